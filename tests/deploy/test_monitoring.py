"""The monitoring part of template.yaml, against the code (src/telemetry/mod.rs) and the runbook (docs/operations.md).

Tracing and the role's least privilege, the alarms, the dashboard, the
saved Logs Insights queries and the Monitoring parameter group.
"""

import json
import re

import pytest
from breakage import Broken, assert_rejected, drop, edit, put, replace

# The metrics src/telemetry/mod.rs emits (namespace and `service` dimension
# from the function's environment); the alarms and the dashboard may name these.
METRICS = {
    "ColdStart",
    "PlantCreated",
    "PlantReplayed",
    "PlantConflict",
    "ClientError",
    "AuthRejected",
    "ServerError",
    "StoreUnavailable",
    "DeadlineExceeded",
    "Latency",
    "StoreLatency",
}
REF_STACK = {"Ref": "AWS::StackName"}
# Each alarm's actions: the given topic, or the one AlarmEmail creates, or none.
NOTIFY = {
    "Fn::If": [
        "HasAlarmNotifications",
        [{"Fn::If": ["HasAlarmTopicArn", {"Ref": "AlarmTopicArn"}, {"Ref": "AlarmTopic"}]}],
        {"Ref": "AWS::NoValue"},
    ]
}
XRAY_WRITES = ["xray:PutTelemetryRecords", "xray:PutTraceSegments"]
MONITORING_PARAMETERS = [
    "AlarmTopicArn",
    "AlarmEmail",
    "LatencyP99ThresholdMs",
    "StoreUnavailableMinutes",
    "TableThrottleThreshold",
    "Api5xxThreshold",
]


def of_type(template, kind):
    return {name: r for name, r in template["Resources"].items() if r["Type"] == kind}


def alarms(template):
    return {name: r["Properties"] for name, r in of_type(template, "AWS::CloudWatch::Alarm").items()}


def namespace(template):
    """Where the function sends its metrics (its POWERTOOLS_METRICS_NAMESPACE)."""
    return template["Resources"]["PlantsFunction"]["Properties"]["Environment"]["Variables"].get(
        "POWERTOOLS_METRICS_NAMESPACE"
    )


def statements(template):
    return [
        statement
        for policy in template["Resources"]["PlantsFunctionRole"]["Properties"]["Policies"]
        for statement in policy["PolicyDocument"]["Statement"]
    ]


def actions(statement):
    return statement["Action"] if isinstance(statement["Action"], list) else [statement["Action"]]


def dashboards(template):
    """(name, body text, Sub variables, body parsed as JSON or None) of each dashboard."""
    for name, dashboard in of_type(template, "AWS::CloudWatch::Dashboard").items():
        text, variables = dashboard["Properties"]["DashboardBody"]["Fn::Sub"], {}
        if isinstance(text, list):  # the list form: the text, and its variables
            text, variables = text
        try:
            body = json.loads(re.sub(r"\$\{[^}]+\}", "X", text))
        except json.JSONDecodeError:
            body = None
        yield name, text, variables, body


def dashboard_metrics(body):
    """(namespace, metric, stat) of each metric row of each widget."""
    rows = []
    for widget in body["widgets"] if body else []:
        properties = widget.get("properties", {})
        for row in properties.get("metrics", []):
            options = row[-1] if isinstance(row[-1], dict) else {}
            rows.append((row[0], row[1], options.get("stat", properties.get("stat"))))
    return rows


def runbook_anchors(runbook):
    """The anchors GitHub gives the headings of docs/operations.md."""
    return {
        re.sub(r"[^a-z0-9 -]", "", heading.strip().lower()).replace(" ", "-")
        for heading in re.findall(r"^#+ (.+)$", runbook, re.M)
    }


# ---- tracing and least privilege ------------------------------------------


def both_functions_trace_every_invocation(template):
    return [
        f"{name}: Tracing is not Active"
        for name in ("PlantsFunction", "PlantsManagedFunction")
        if template["Resources"][name]["Properties"].get("Tracing") != "Active"
    ]


def test_both_functions_trace_every_invocation(template):
    assert both_functions_trace_every_invocation(template) == []


def the_role_grants_no_wildcard_action(template):
    return [f"role: wildcard action in {st}" for st in statements(template) if any("*" in a for a in actions(st))]


def test_the_role_grants_no_wildcard_action(template):
    assert the_role_grants_no_wildcard_action(template) == []


def the_only_wildcard_resource_is_for_the_two_xray_writes(template):
    """X-Ray's writes have no resource-level permissions; nothing else gets `*`."""
    return [
        f"role: a `*` resource for something other than the X-Ray writes: {st}"
        for st in statements(template)
        if st.get("Resource") == "*" and sorted(actions(st)) != XRAY_WRITES
    ]


def test_the_only_wildcard_resource_is_for_the_two_xray_writes(template):
    assert the_only_wildcard_resource_is_for_the_two_xray_writes(template) == []


def the_role_grants_the_two_xray_writes_tracing_needs(template):
    granted = {a for st in statements(template) for a in actions(st)}
    if not set(XRAY_WRITES) <= granted:
        return [f"role: active tracing needs {XRAY_WRITES}; it grants {sorted(granted)}"]
    return []


def test_the_role_grants_the_two_xray_writes_tracing_needs(template):
    assert the_role_grants_the_two_xray_writes_tracing_needs(template) == []


def the_role_grants_no_cloudwatch_action_as_metrics_are_log_lines(template):
    granted = {a for st in statements(template) for a in actions(st)}
    cloudwatch = sorted(a for a in granted if a.startswith("cloudwatch:"))
    return [f"role: grants {cloudwatch}, but metrics are EMF log lines"] if cloudwatch else []


def test_the_role_grants_no_cloudwatch_action_as_metrics_are_log_lines(template):
    assert the_role_grants_no_cloudwatch_action_as_metrics_are_log_lines(template) == []


# ---- the metrics ------------------------------------------------------------


def the_function_emits_the_documented_metrics(emitted_metrics):
    """A new metric is added to METRICS on purpose (and to the runbook)."""
    problems = [f"src/telemetry/mod.rs no longer emits {m}" for m in sorted(METRICS - emitted_metrics)]
    return problems + [f"src/telemetry/mod.rs emits {m}, not in METRICS" for m in sorted(emitted_metrics - METRICS)]


def test_the_function_emits_the_documented_metrics(emitted_metrics):
    assert the_function_emits_the_documented_metrics(emitted_metrics) == []


def the_metrics_service_dimension_is_the_stack_name(template):
    """So that two stacks in one account never share metrics or alarms."""
    variables = template["Resources"]["PlantsFunction"]["Properties"]["Environment"]["Variables"]
    if variables.get("POWERTOOLS_SERVICE_NAME") != REF_STACK:
        return [f"POWERTOOLS_SERVICE_NAME is {variables.get('POWERTOOLS_SERVICE_NAME')!r}, not the stack name"]
    return []


def test_the_metrics_service_dimension_is_the_stack_name(template):
    assert the_metrics_service_dimension_is_the_stack_name(template) == []


# ---- the alarms ---------------------------------------------------------------


def alarmed_metrics(template):
    """(namespace, metric) -> (alarm name, properties), with the function's namespace as "ours"."""
    ours = namespace(template)
    return {
        ("ours" if p["Namespace"] == ours else p["Namespace"], p["MetricName"]): (name, p)
        for name, p in alarms(template).items()
    }


# The alarms docs/operations.md documents, and the parameter that sets each threshold.
DOCUMENTED_ALARMS = {
    ("AWS/Lambda", "Errors"): None,
    ("AWS/Lambda", "Throttles"): None,
    ("ours", "ServerError"): None,
    ("ours", "StoreUnavailable"): ("EvaluationPeriods", "StoreUnavailableMinutes"),
    ("ours", "Latency"): ("Threshold", "LatencyP99ThresholdMs"),
    ("AWS/DynamoDB", "ThrottledRequests"): ("Threshold", "TableThrottleThreshold"),
    ("AWS/DynamoDB", "SystemErrors"): None,
    ("AWS/ApiGateway", "5xx"): ("Threshold", "Api5xxThreshold"),
}


def there_is_an_alarm_on_each_documented_metric(template):
    watched = alarmed_metrics(template)
    return [f"no alarm on {ns} {metric}" for ns, metric in DOCUMENTED_ALARMS if (ns, metric) not in watched]


def test_there_is_an_alarm_on_each_documented_metric(template):
    assert there_is_an_alarm_on_each_documented_metric(template) == []


def the_alarm_thresholds_are_the_documented_parameters(template):
    watched = alarmed_metrics(template)
    return [
        f"{watched[key][0]}: {setting} should be the parameter {parameter}"
        for key, threshold in DOCUMENTED_ALARMS.items()
        if threshold and key in watched
        for setting, parameter in [threshold]
        if watched[key][1].get(setting) != {"Ref": parameter}
    ]


def test_the_alarm_thresholds_are_the_documented_parameters(template):
    assert the_alarm_thresholds_are_the_documented_parameters(template) == []


def the_latency_alarm_watches_p99(template):
    latency = alarmed_metrics(template).get(("ours", "Latency"), (None, {}))[1]
    return [] if latency.get("ExtendedStatistic") == "p99" else ["the latency alarm is not on p99"]


def test_the_latency_alarm_watches_p99(template):
    assert the_latency_alarm_watches_p99(template) == []


def every_alarm_notifies_the_optional_topic_on_alarm_and_on_recovery(template):
    return [
        f"{name}: {key} must notify the optional alarm topic"
        for name, props in alarms(template).items()
        for key in ("AlarmActions", "OKActions")
        if props.get(key) != NOTIFY
    ]


def test_every_alarm_notifies_the_optional_topic_on_alarm_and_on_recovery(template):
    assert every_alarm_notifies_the_optional_topic_on_alarm_and_on_recovery(template) == []


def every_alarm_treats_missing_data_as_not_breaching(template):
    """No traffic is not an incident."""
    return [
        f"{name}: TreatMissingData must be notBreaching"
        for name, props in alarms(template).items()
        if props.get("TreatMissingData") != "notBreaching"
    ]


def test_every_alarm_treats_missing_data_as_not_breaching(template):
    assert every_alarm_treats_missing_data_as_not_breaching(template) == []


def every_alarm_links_a_heading_of_the_runbook(template, runbook):
    anchors = runbook_anchors(runbook)
    problems = []
    for name, props in alarms(template).items():
        link = re.search(r"docs/operations\.md#([a-z0-9-]+)", props.get("AlarmDescription", ""))
        if not link or link.group(1) not in anchors:
            problems.append(f"{name}: AlarmDescription must link a heading of docs/operations.md")
    return problems


def test_every_alarm_links_a_heading_of_the_runbook(template, runbook):
    assert every_alarm_links_a_heading_of_the_runbook(template, runbook) == []


def our_alarms_watch_only_metrics_the_function_emits(template, emitted_metrics):
    return [
        f"{name}: {props['MetricName']} is not a metric the function emits"
        for name, props in alarms(template).items()
        if props["Namespace"] == namespace(template) and props["MetricName"] not in emitted_metrics
    ]


def test_our_alarms_watch_only_metrics_the_function_emits(template, emitted_metrics):
    assert our_alarms_watch_only_metrics_the_function_emits(template, emitted_metrics) == []


def our_alarms_have_exactly_the_service_dimension(template):
    return [
        f"{name}: our metrics have exactly the service dimension, the stack name"
        for name, props in alarms(template).items()
        if props["Namespace"] == namespace(template)
        and props.get("Dimensions") != [{"Name": "service", "Value": REF_STACK}]
    ]


def test_our_alarms_have_exactly_the_service_dimension(template):
    assert our_alarms_have_exactly_the_service_dimension(template) == []


def the_alarm_topic_exists_only_for_alarm_email_with_its_one_subscription(template):
    topic = template["Resources"].get("AlarmTopic", {})
    protocols = [s.get("Protocol") for s in topic.get("Properties", {}).get("Subscription", [])]
    if topic.get("Condition") != "HasAlarmEmail" or protocols != ["email"]:
        return ["AlarmTopic: created only for AlarmEmail, with its one e-mail subscription"]
    return []


def test_the_alarm_topic_exists_only_for_alarm_email_with_its_one_subscription(template):
    assert the_alarm_topic_exists_only_for_alarm_email_with_its_one_subscription(template) == []


def alarm_topic_arn_and_alarm_email_cannot_both_be_set(template):
    if "OneAlarmDestination" not in template.get("Rules", {}):
        return ["Rules: no OneAlarmDestination, so AlarmTopicArn and AlarmEmail could both be set"]
    return []


def test_alarm_topic_arn_and_alarm_email_cannot_both_be_set(template):
    assert alarm_topic_arn_and_alarm_email_cannot_both_be_set(template) == []


# ---- the dashboard ------------------------------------------------------------


def there_is_one_dashboard(template):
    found = sorted(of_type(template, "AWS::CloudWatch::Dashboard"))
    return [] if len(found) == 1 else [f"expected one dashboard, found {found}"]


def test_there_is_one_dashboard(template):
    assert there_is_one_dashboard(template) == []


def the_dashboard_names_the_function_that_exists(template):
    """Its only Sub variable is FunctionName: the classic or the managed function, whichever the stack has."""
    function = {"Fn::If": ["OnManagedInstances", {"Ref": "PlantsManagedFunction"}, {"Ref": "PlantsFunction"}]}
    return [
        f"{name}: the only Sub variable must be FunctionName, the function that exists: {variables}"
        for name, _, variables, _ in dashboards(template)
        if variables != {"FunctionName": function}
    ]


def test_the_dashboard_names_the_function_that_exists(template):
    assert the_dashboard_names_the_function_that_exists(template) == []


def the_dashboard_body_is_json(template):
    return [f"{name}: the body is not JSON" for name, _, _, body in dashboards(template) if body is None]


def test_the_dashboard_body_is_json(template):
    assert the_dashboard_body_is_json(template) == []


def the_dashboard_shows_every_alarm(template):
    return [
        f"{name}: the alarm widget lacks {alarm}"
        for name, text, _, _ in dashboards(template)
        for alarm in alarms(template)
        if f"{alarm}.Arn" not in re.findall(r"\$\{([^}]+)\}", text)
    ]


def test_the_dashboard_shows_every_alarm(template):
    assert the_dashboard_shows_every_alarm(template) == []


def the_dashboard_shows_only_metrics_the_function_emits(template, emitted_metrics):
    return [
        f"{name}: {metric} is not a metric the function emits"
        for name, _, _, body in dashboards(template)
        for ns, metric, _ in dashboard_metrics(body)
        if ns == namespace(template) and metric not in emitted_metrics
    ]


def test_the_dashboard_shows_only_metrics_the_function_emits(template, emitted_metrics):
    assert the_dashboard_shows_only_metrics_the_function_emits(template, emitted_metrics) == []


def the_dashboard_shows_the_documented_metrics(template):
    ours = namespace(template)
    documented = [
        (ours, "Latency", "p50"),
        (ours, "Latency", "p99"),
        (ours, "ColdStart", "Sum"),
        (ours, "PlantCreated", "Sum"),
        (ours, "ClientError", "Sum"),
        (ours, "ServerError", "Sum"),
        ("AWS/DynamoDB", "ConsumedWriteCapacityUnits", "Sum"),
        ("AWS/DynamoDB", "ThrottledRequests", "Sum"),
    ]
    return [
        f"{name}: no widget shows {wanted}"
        for name, _, _, body in dashboards(template)
        for wanted in documented
        if wanted not in dashboard_metrics(body)
    ]


def test_the_dashboard_shows_the_documented_metrics(template):
    assert the_dashboard_shows_the_documented_metrics(template) == []


# ---- the saved queries and the parameters -------------------------------------


def the_four_runbook_queries_are_saved(template):
    queries = sorted(of_type(template, "AWS::Logs::QueryDefinition"))
    return [] if len(queries) == 4 else [f"expected the 4 documented Logs Insights queries, found {queries}"]


def test_the_four_runbook_queries_are_saved(template):
    assert the_four_runbook_queries_are_saved(template) == []


def every_saved_query_reads_the_function_log_group(template):
    return [
        f"{name}: must query the function's log group"
        for name, query in of_type(template, "AWS::Logs::QueryDefinition").items()
        if query["Properties"].get("LogGroupNames") != [{"Ref": "PlantsLogGroup"}]
    ]


def test_every_saved_query_reads_the_function_log_group(template):
    assert every_saved_query_reads_the_function_log_group(template) == []


def every_saved_query_is_in_the_runbook_word_for_word(template, runbook):
    return [
        f"{name}: the query is not in docs/operations.md word for word"
        for name, query in of_type(template, "AWS::Logs::QueryDefinition").items()
        if query["Properties"]["QueryString"].strip() not in runbook
    ]


def test_every_saved_query_is_in_the_runbook_word_for_word(template, runbook):
    assert every_saved_query_is_in_the_runbook_word_for_word(template, runbook) == []


def the_monitoring_group_holds_the_monitoring_parameters(template):
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    monitoring = next((g["Parameters"] for g in groups if g["Label"]["default"].startswith("Monitoring")), [])
    if sorted(monitoring) != sorted(MONITORING_PARAMETERS):
        return [f"the Monitoring group lists {monitoring}, expected {MONITORING_PARAMETERS}"]
    return []


def test_the_monitoring_group_holds_the_monitoring_parameters(template):
    assert the_monitoring_group_holds_the_monitoring_parameters(template) == []


ROLE = "Resources.PlantsFunctionRole.Properties.Policies"
PUT_PLANTS = f"{ROLE}.1.PolicyDocument.Statement.0"
BODY = "Resources.PlantsDashboard.Properties.DashboardBody.Fn::Sub"
BROKEN = [
    Broken(
        both_functions_trace_every_invocation,
        "the managed function without tracing",
        put("Resources.PlantsManagedFunction.Properties.Tracing", "PassThrough"),
        "PlantsManagedFunction: Tracing is not Active",
    ),
    Broken(
        the_role_grants_no_wildcard_action,
        "every DynamoDB action",
        put(f"{PUT_PLANTS}.Action", ["dynamodb:*"]),
        "role: wildcard action",
    ),
    Broken(
        the_only_wildcard_resource_is_for_the_two_xray_writes,
        "PutItem on every table",
        put(f"{PUT_PLANTS}.Resource", "*"),
        "role: a `*` resource for something other than the X-Ray writes",
    ),
    Broken(
        the_role_grants_the_two_xray_writes_tracing_needs,
        "no PutTelemetryRecords",
        put(f"{ROLE}.2.PolicyDocument.Statement.0.Action", ["xray:PutTraceSegments"]),
        "role: active tracing needs",
    ),
    Broken(
        the_role_grants_no_cloudwatch_action_as_metrics_are_log_lines,
        "PutMetricData granted",
        edit(f"{PUT_PLANTS}.Action", lambda granted: [*granted, "cloudwatch:PutMetricData"]),
        "role: grants ['cloudwatch:PutMetricData']",
    ),
    Broken(
        the_function_emits_the_documented_metrics,
        "a metric renamed in the code",
        replace('count("ColdStart"', 'count("ColdStarts"'),
        "no longer emits ColdStart",
        document="emf_source",
    ),
    Broken(
        the_metrics_service_dimension_is_the_stack_name,
        "a fixed service name",
        put("Resources.PlantsFunction.Properties.Environment.Variables.POWERTOOLS_SERVICE_NAME", "plant-store"),
        "POWERTOOLS_SERVICE_NAME is 'plant-store', not the stack name",
    ),
    Broken(
        there_is_an_alarm_on_each_documented_metric,
        "the table's system errors unwatched",
        drop("Resources.TableSystemErrorsAlarm"),
        "no alarm on AWS/DynamoDB SystemErrors",
    ),
    Broken(
        the_alarm_thresholds_are_the_documented_parameters,
        "a fixed 5xx threshold",
        put("Resources.Api5xxAlarm.Properties.Threshold", 5),
        "Api5xxAlarm: Threshold should be the parameter Api5xxThreshold",
    ),
    Broken(
        the_latency_alarm_watches_p99,
        "the latency alarm on p90",
        put("Resources.LatencyAlarm.Properties.ExtendedStatistic", "p90"),
        "the latency alarm is not on p99",
    ),
    Broken(
        every_alarm_notifies_the_optional_topic_on_alarm_and_on_recovery,
        "an alarm silent on recovery",
        drop("Resources.LatencyAlarm.Properties.OKActions"),
        "LatencyAlarm: OKActions must notify the optional alarm topic",
    ),
    Broken(
        every_alarm_treats_missing_data_as_not_breaching,
        "an alarm that fires on no traffic",
        put("Resources.FunctionErrorsAlarm.Properties.TreatMissingData", "breaching"),
        "FunctionErrorsAlarm: TreatMissingData must be notBreaching",
    ),
    Broken(
        every_alarm_links_a_heading_of_the_runbook,
        "a runbook heading renamed",
        replace("\n### Latency\n", "\n### Slowness\n"),
        "LatencyAlarm: AlarmDescription must link a heading of docs/operations.md",
        document="runbook",
    ),
    Broken(
        every_alarm_links_a_heading_of_the_runbook,
        "an alarm description without its link",
        edit("Resources.Api5xxAlarm.Properties.AlarmDescription", replace("; see docs/operations.md#api-5xx", "")),
        "Api5xxAlarm: AlarmDescription must link a heading",
    ),
    Broken(
        our_alarms_watch_only_metrics_the_function_emits,
        "an alarm on a metric name with a typo",
        put("Resources.ServerErrorAlarm.Properties.MetricName", "ServerErrors"),
        "ServerErrorAlarm: ServerErrors is not a metric the function emits",
    ),
    Broken(
        our_alarms_watch_only_metrics_the_function_emits,
        "a metric the code no longer emits",
        replace('count("StoreUnavailable"', 'count("StoreDown"'),
        "StoreUnavailableAlarm: StoreUnavailable is not a metric the function emits",
        document="emf_source",
    ),
    Broken(
        our_alarms_have_exactly_the_service_dimension,
        "a fixed service dimension",
        put("Resources.LatencyAlarm.Properties.Dimensions.0.Value", "plant-store"),
        "LatencyAlarm: our metrics have exactly the service dimension",
    ),
    Broken(
        the_alarm_topic_exists_only_for_alarm_email_with_its_one_subscription,
        "a topic created for a given topic ARN too",
        put("Resources.AlarmTopic.Condition", "HasAlarmNotifications"),
        "AlarmTopic: created only for AlarmEmail",
    ),
    Broken(
        alarm_topic_arn_and_alarm_email_cannot_both_be_set,
        "no rule between the two",
        drop("Rules.OneAlarmDestination"),
        "Rules: no OneAlarmDestination",
    ),
    Broken(
        there_is_one_dashboard,
        "a second dashboard",
        edit("Resources", lambda resources: {**resources, "OtherDashboard": resources["PlantsDashboard"]}),
        "expected one dashboard, found ['OtherDashboard', 'PlantsDashboard']",
    ),
    Broken(
        the_dashboard_names_the_function_that_exists,
        "the classic function always",
        put(f"{BODY}.1.FunctionName", {"Ref": "PlantsFunction"}),
        "PlantsDashboard: the only Sub variable must be FunctionName",
    ),
    Broken(
        the_dashboard_body_is_json,
        "a missing colon",
        edit(f"{BODY}.0", replace('"widgets": [', '"widgets" [')),
        "PlantsDashboard: the body is not JSON",
    ),
    Broken(
        the_dashboard_shows_every_alarm,
        "an alarm missing from the alarm widget",
        edit(f"{BODY}.0", replace('"${TableSystemErrorsAlarm.Arn}", ', "")),
        "PlantsDashboard: the alarm widget lacks TableSystemErrorsAlarm",
    ),
    Broken(
        the_dashboard_shows_only_metrics_the_function_emits,
        "a widget on a metric name with a typo",
        edit(f"{BODY}.0", replace('"PlantStore", "PlantReplayed"', '"PlantStore", "PlantRetried"')),
        "PlantsDashboard: PlantRetried is not a metric the function emits",
    ),
    Broken(
        the_dashboard_shows_the_documented_metrics,
        "no handler p99",
        edit(
            f"{BODY}.0", replace('{"stat": "p99", "label": "handler p99"}', '{"stat": "p90", "label": "handler p90"}')
        ),
        "PlantsDashboard: no widget shows ('PlantStore', 'Latency', 'p99')",
    ),
    Broken(
        the_four_runbook_queries_are_saved,
        "a query not saved",
        drop("Resources.LatencyQuery"),
        "expected the 4 documented Logs Insights queries",
    ),
    Broken(
        every_saved_query_reads_the_function_log_group,
        "a query on another log group",
        put("Resources.ColdStartsQuery.Properties.LogGroupNames", ["/aws/lambda/other"]),
        "ColdStartsQuery: must query the function's log group",
    ),
    Broken(
        every_saved_query_is_in_the_runbook_word_for_word,
        "the runbook's query changed",
        replace("| sort requests desc", "| sort requests asc"),
        "ErrorsByCodeQuery: the query is not in docs/operations.md word for word",
        document="runbook",
    ),
    Broken(
        the_monitoring_group_holds_the_monitoring_parameters,
        "a threshold parameter in no group",
        edit("Metadata.AWS::CloudFormation::Interface.ParameterGroups.4.Parameters", lambda names: names[:-1]),
        "the Monitoring group lists",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_broken_copy_fails_its_check(case, request):
    assert_rejected(case, request)
