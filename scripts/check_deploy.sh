#!/usr/bin/env bash
# Offline proof of the deployment files: template.yaml, samconfig.toml and
# openapi.yaml. Needs no AWS account, region, credentials or container.
#
# Usage: scripts/check_deploy.sh TOOLS_BIN
#   TOOLS_BIN: the bin directory of a virtualenv with cfn-lint, aws-sam-cli
#   and openapi-spec-validator installed (e.g. .tools/venv/bin).
#
# Prints one line per check and stops at the first failure (exit 1).
# It does not run `sam build`: that needs cargo-lambda and zig.
set -euo pipefail

if [ "$#" -ne 1 ]; then
    echo "usage: $0 TOOLS_BIN (the bin directory of the tool virtualenv)" >&2
    exit 2
fi
if ! tools=$(cd "$1" 2>/dev/null && pwd); then
    echo "check_deploy: no such directory: $1" >&2
    exit 2
fi
for tool in python cfn-lint sam openapi-spec-validator; do
    if [ ! -x "$tools/$tool" ]; then
        echo "check_deploy: $tool not found in $tools (pip install cfn-lint aws-sam-cli openapi-spec-validator)" >&2
        exit 2
    fi
done

cd "$(dirname "$0")/.."
export SAM_CLI_TELEMETRY=0

log=$(mktemp)
trap 'rm -f "$log"' EXIT

check() {
    local name=$1
    shift
    if "$@" >"$log" 2>&1; then
        echo "ok   $name"
    else
        echo "FAIL $name"
        # Some tools dump whole documents on failure: keep it readable.
        cut -c1-400 "$log" | head -n 60 | sed 's/^/     /'
        exit 1
    fi
}

check "cfn-lint template.yaml" "$tools/cfn-lint" template.yaml
check "sam validate --lint" "$tools/sam" validate --lint --template template.yaml
check "openapi-spec-validator openapi.yaml (OpenAPI 3.1)" \
    "$tools/openapi-spec-validator" --schema 3.1 openapi.yaml
check "openapi.yaml error catalogue, references, headers and examples" \
    "$tools/python" - openapi.yaml <<'PY'
"""Checks openapi.yaml beyond what the spec validator covers.

- every internal $ref points at something;
- the `error` codes the responses declare are exactly the catalogue, each
  under the HTTP status its first three digits name, and each listed in the
  document-level description;
- every response carries the headers sent on every response;
- every example (request, response, header) is valid against its schema,
  and every catalogue code has at least one response example.
"""
import re
import sys

import jsonschema
import yaml
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

CATALOGUE = {
    40001, 40002, 40003, 40004, 40005, 40101, 40102, 40301, 40401, 40501,
    40901, 41301, 41501, 50001, 50301, 50302,
}
EVERY_RESPONSE_HEADERS = {"X-Request-Id", "Cache-Control", "X-Content-Type-Options"}
BASE = "urn:plant-store:openapi"

with open(sys.argv[1], encoding="utf-8") as f:
    doc = yaml.safe_load(f)
failures = []


def fail(msg):
    failures.append(msg)


info = doc.get("info", {})
for what, got, want in [
    ("openapi", doc.get("openapi"), "3.1.0"),
    ("info.title", info.get("title"), "OpenAPI Plant Store"),
    ("info.version", info.get("version"), "1.0.0"),
    ("info.license.identifier", info.get("license", {}).get("identifier"), "MIT"),
]:
    if got != want:
        fail(f"{what} is {got!r}, expected {want!r}")


def unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def pointer(ref):
    node = doc
    for token in ref[2:].split("/") if ref != "#" else []:
        token = unescape(token)
        if isinstance(node, list):
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise KeyError(ref)
    return node


def escape(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def walk(node, path=()):
    yield node, path
    if isinstance(node, dict):
        for k, v in node.items():
            yield from walk(v, path + (k,))
    elif isinstance(node, list):
        for i, v in enumerate(node):
            yield from walk(v, path + (i,))


# 1. every internal reference resolves
for node, path in walk(doc):
    if isinstance(node, dict) and isinstance(node.get("$ref"), str):
        ref = node["$ref"]
        if not ref.startswith("#"):
            fail(f"external $ref at {'/'.join(map(str, path))}: {ref}")
            continue
        try:
            pointer(ref)
        except (KeyError, IndexError, ValueError):
            fail(f"dangling $ref at {'/'.join(map(str, path))}: {ref}")
if failures:
    sys.exit("\n".join(failures))


def deref(node, path):
    """Follow a Reference Object; return the target and its JSON pointer."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        node = pointer(ref)
        path = tuple(unescape(t) for t in ref[2:].split("/"))
    return node, path


registry = Registry().with_resource(
    BASE, Resource.from_contents(doc, default_specification=DRAFT202012)
)


def validator_at(path):
    ref = BASE + "#/" + "/".join(escape(t) for t in path)
    return jsonschema.Draft202012Validator({"$ref": ref}, registry=registry)


def check_example(value, schema_path, where):
    errors = sorted(validator_at(schema_path).iter_errors(value), key=str)
    for e in errors:
        fail(f"{where}: example {value!r} does not match its schema: {e.message}")


def check_examples(media, media_path, where):
    if "schema" not in media:
        return []
    schema_path = media_path + ("schema",)
    values = []
    if "example" in media:
        values.append(("example", media["example"]))
    for name, ex in (media.get("examples") or {}).items():
        ex, _ = deref(ex, media_path + ("examples", name))
        if "value" in ex:
            values.append((name, ex["value"]))
    for name, value in values:
        check_example(value, schema_path, f"{where} example {name}")
    return [v for _, v in values]


def declared_codes(schema, schema_path):
    """The `error` values a response schema allows (enum/const in allOf)."""
    schema, schema_path = deref(schema, schema_path)
    codes = set()
    for sub in schema.get("allOf", []):
        sub, _ = deref(sub, schema_path)
        prop = (sub.get("properties") or {}).get("error") or {}
        if "enum" in prop:
            codes.update(prop["enum"])
        if "const" in prop:
            codes.add(prop["const"])
    return codes


description = info.get("description", "")
declared = {}
examples_seen = set()
for route, item in doc.get("paths", {}).items():
    for method, op in item.items():
        if method not in {"get", "put", "post", "delete", "options", "head", "patch", "trace"}:
            continue
        where_op = f"{method.upper()} {route}"
        op_path = ("paths", route, method)
        body, body_path = deref(op.get("requestBody", {}), op_path + ("requestBody",))
        for mt, media in (body.get("content") or {}).items():
            check_examples(media, body_path + ("content", mt), f"{where_op} request {mt}")
        for status, resp in op.get("responses", {}).items():
            where = f"{where_op} {status}"
            resp, resp_path = deref(resp, op_path + ("responses", status))
            headers = resp.get("headers") or {}
            missing = EVERY_RESPONSE_HEADERS - set(headers)
            if missing:
                fail(f"{where}: missing headers {sorted(missing)}")
            for hname, header in headers.items():
                header, header_path = deref(header, resp_path + ("headers", hname))
                if not header.get("required"):
                    fail(f"{where}: header {hname} is not required: true")
                if "example" in header and "schema" in header:
                    check_example(header["example"], header_path + ("schema",), f"{where} header {hname}")
            content = resp.get("content") or {}
            if "application/json" not in content:
                fail(f"{where}: no application/json content")
                continue
            media = content["application/json"]
            media_path = resp_path + ("content", "application/json")
            values = check_examples(media, media_path, where)
            if not status.startswith("2"):
                codes = declared_codes(media.get("schema", {}), media_path + ("schema",))
                if not codes:
                    fail(f"{where}: the schema declares no `error` codes")
                for code in codes:
                    if str(code)[:3] != status:
                        fail(f"{where}: code {code} does not start with the status {status}")
                    declared.setdefault(code, set()).add(where)
                examples_seen.update(v.get("error") for v in values if isinstance(v, dict))

codes = set(declared)
if codes != CATALOGUE:
    if CATALOGUE - codes:
        fail(f"catalogue codes not declared by any response: {sorted(CATALOGUE - codes)}")
    if codes - CATALOGUE:
        fail(f"codes declared but not in the catalogue: {sorted(codes - CATALOGUE)}")
# the catalogue table: rows that start with `| 40001 | 400 |`
in_description = {
    int(code)
    for code, status in re.findall(r"^\|\s*(\d{5})\s*\|\s*(\d{3})\s*\|", description, re.M)
    if code[:3] == status
}
if in_description != CATALOGUE:
    fail(f"the catalogue table in info.description lists {sorted(in_description)}, expected the catalogue {sorted(CATALOGUE)}")
if CATALOGUE - examples_seen:
    fail(f"catalogue codes without a response example: {sorted(CATALOGUE - examples_seen)}")

if failures:
    sys.exit("\n".join(failures))
print(f"{len(codes)} error codes, all responses and examples consistent")
PY

check "template.yaml monitoring: tracing, alarms, dashboard, queries, least privilege" \
    "$tools/python" - template.yaml src/telemetry/emf.rs docs/operations.md <<'PY'
"""Checks the monitoring part of template.yaml against the code and the runbook.

- active tracing, and the role grants exactly the two X-Ray writes it needs
  (the only `*` resource), no wildcard action, and no PutMetricData (the
  metrics are EMF lines in the function's log);
- an alarm on each documented metric, each notifying the optional topic on
  alarm and on recovery, treating missing data as fine, with the documented
  threshold parameters, and a description that links an existing heading of
  docs/operations.md;
- our alarms and dashboard name only metrics src/telemetry/emf.rs emits, in the
  namespace and with the service dimension the function is given;
- the dashboard body is JSON with the documented widgets and every alarm;
- every saved Logs Insights query is in docs/operations.md, word for word;
- every parameter is in exactly one parameter group; the monitoring ones in
  the Monitoring group.
"""
import json
import re
import sys

from cfnlint.decode import decode

template, errors = decode(sys.argv[1])
if errors:
    sys.exit("\n".join(str(e) for e in errors))
telemetry = open(sys.argv[2], encoding="utf-8").read()
runbook = open(sys.argv[3], encoding="utf-8").read()
resources = template["Resources"]
failures = []


def fail(msg):
    failures.append(msg)


def of_type(kind):
    return {name: r for name, r in resources.items() if r["Type"] == kind}


REF_STACK = {"Ref": "AWS::StackName"}
NOTIFY = {"Fn::If": ["HasAlarmNotifications",
                     [{"Fn::If": ["HasAlarmTopicArn", {"Ref": "AlarmTopicArn"}, {"Ref": "AlarmTopic"}]}],
                     {"Ref": "AWS::NoValue"}]}

# 1. tracing and least privilege
function = resources["PlantsFunction"]["Properties"]
if function.get("Tracing") != "Active":
    fail("PlantsFunction: Tracing is not Active")
statements = [
    st
    for policy in resources["PlantsFunctionRole"]["Properties"]["Policies"]
    for st in policy["PolicyDocument"]["Statement"]
]
actions = lambda st: st["Action"] if isinstance(st["Action"], list) else [st["Action"]]
for st in statements:
    if any("*" in a for a in actions(st)):
        fail(f"role: wildcard action in {st}")
    if st.get("Resource") == "*" and sorted(actions(st)) != ["xray:PutTelemetryRecords", "xray:PutTraceSegments"]:
        fail(f"role: a `*` resource for something other than the X-Ray writes: {st}")
granted = {a for st in statements for a in actions(st)}
if not {"xray:PutTraceSegments", "xray:PutTelemetryRecords"} <= granted:
    fail("role: active tracing needs xray:PutTraceSegments and xray:PutTelemetryRecords")
if any(a.startswith("cloudwatch:") for a in granted):
    fail("role: grants CloudWatch actions, but metrics are EMF log lines")

# 2. the metrics the code emits, where the function sends them
emitted = set(re.findall(r'(?:count|ms)\("([A-Za-z]+)"', telemetry))
if len(emitted) != 11:
    fail(f"src/telemetry/emf.rs: expected 11 metric names, found {sorted(emitted)}")
env = function["Environment"]["Variables"]
namespace = env.get("POWERTOOLS_METRICS_NAMESPACE")
if env.get("POWERTOOLS_SERVICE_NAME") != REF_STACK:
    fail("POWERTOOLS_SERVICE_NAME must be the stack name, so stacks never share metrics")

# 3. alarms
alarms = of_type("AWS::CloudWatch::Alarm")
by_metric = {(a["Properties"]["Namespace"], a["Properties"]["MetricName"]): (name, a["Properties"]) for name, a in alarms.items()}
required = {
    ("AWS/Lambda", "Errors"): None,
    ("AWS/Lambda", "Throttles"): None,
    (namespace, "ServerError"): None,
    (namespace, "StoreUnavailable"): ("EvaluationPeriods", "StoreUnavailableMinutes"),
    (namespace, "Latency"): ("Threshold", "LatencyP99ThresholdMs"),
    ("AWS/DynamoDB", "ThrottledRequests"): ("Threshold", "TableThrottleThreshold"),
    ("AWS/DynamoDB", "SystemErrors"): None,
    ("AWS/ApiGateway", "5xx"): ("Threshold", "Api5xxThreshold"),
}
for key, parameter in required.items():
    if key not in by_metric:
        fail(f"no alarm on {key[0]} {key[1]}")
        continue
    name, props = by_metric[key]
    if parameter and props.get(parameter[0]) != {"Ref": parameter[1]}:
        fail(f"{name}: {parameter[0]} should be the parameter {parameter[1]}")
if by_metric.get((namespace, "Latency"), (None, {}))[1].get("ExtendedStatistic") != "p99":
    fail("the latency alarm is not on p99")
anchors = {
    re.sub(r"[^a-z0-9 -]", "", h.strip().lower()).replace(" ", "-")
    for h in re.findall(r"^#+ (.+)$", runbook, re.M)
}
for name, alarm in alarms.items():
    props = alarm["Properties"]
    for key in ("AlarmActions", "OKActions"):
        if props.get(key) != NOTIFY:
            fail(f"{name}: {key} must notify the optional alarm topic")
    if props.get("TreatMissingData") != "notBreaching":
        fail(f"{name}: TreatMissingData must be notBreaching (no traffic is not an incident)")
    link = re.search(r"docs/operations\.md#([a-z0-9-]+)", props.get("AlarmDescription", ""))
    if not link or link.group(1) not in anchors:
        fail(f"{name}: AlarmDescription must link a heading of docs/operations.md")
    if props["Namespace"] == namespace:
        if props["MetricName"] not in emitted:
            fail(f"{name}: {props['MetricName']} is not a metric the function emits")
        if props.get("Dimensions") != [{"Name": "service", "Value": REF_STACK}]:
            fail(f"{name}: our metrics have exactly the service dimension")
topic = resources.get("AlarmTopic", {})
if topic.get("Condition") != "HasAlarmEmail" or [s["Protocol"] for s in topic["Properties"].get("Subscription", [])] != ["email"]:
    fail("AlarmTopic: created only for AlarmEmail, with its one e-mail subscription")
if "OneAlarmDestination" not in template.get("Rules", {}):
    fail("Rules: AlarmTopicArn and AlarmEmail must not both be set")

# 4. the dashboard
dashboards = of_type("AWS::CloudWatch::Dashboard")
if len(dashboards) != 1:
    fail(f"expected one dashboard, found {len(dashboards)}")
for name, dashboard in dashboards.items():
    body_sub = dashboard["Properties"]["DashboardBody"]["Fn::Sub"]
    if isinstance(body_sub, list):
        # the list form: the text, and variables naming the function
        body_sub, variables = body_sub
        if variables != {"FunctionName": {"Fn::If": ["OnManagedInstances", {"Ref": "PlantsManagedFunction"},
                                                      {"Ref": "PlantsFunction"}]}}:
            fail(f"{name}: the only Sub variable must be FunctionName, the function that exists: {variables}")
    refs = set(re.findall(r"\$\{([^}]+)\}", body_sub))
    body = json.loads(re.sub(r"\$\{[^}]+\}", "X", body_sub))
    for alarm_name in alarms:
        if f"{alarm_name}.Arn" not in refs:
            fail(f"{name}: the alarm widget lacks {alarm_name}")
    metrics = []
    for widget in body["widgets"]:
        for row in widget.get("properties", {}).get("metrics", []):
            stat = row[-1].get("stat", widget["properties"].get("stat")) if isinstance(row[-1], dict) else None
            metrics.append((row[0], row[1], stat))
    for ns, metric, _ in metrics:
        if ns == namespace and metric not in emitted:
            fail(f"{name}: {metric} is not a metric the function emits")
    for wanted in [(namespace, "Latency", "p50"), (namespace, "Latency", "p99"), (namespace, "ColdStart", "Sum"),
                   (namespace, "PlantCreated", "Sum"), (namespace, "ClientError", "Sum"), (namespace, "ServerError", "Sum"),
                   ("AWS/DynamoDB", "ConsumedWriteCapacityUnits", "Sum"), ("AWS/DynamoDB", "ThrottledRequests", "Sum")]:
        if wanted not in metrics:
            fail(f"{name}: no widget shows {wanted}")

# 5. saved queries are the runbook's, word for word
queries = of_type("AWS::Logs::QueryDefinition")
if len(queries) != 4:
    fail(f"expected the 4 documented Logs Insights queries, found {len(queries)}")
for name, query in queries.items():
    props = query["Properties"]
    if props.get("LogGroupNames") != [{"Ref": "PlantsLogGroup"}]:
        fail(f"{name}: must query the function's log group")
    if props["QueryString"].strip() not in runbook:
        fail(f"{name}: the query is not in docs/operations.md word for word")

# 6. parameter groups
groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
grouped = [p for g in groups for p in g["Parameters"]]
if sorted(grouped) != sorted(template["Parameters"]):
    fail(f"every parameter must be in exactly one group: {sorted(set(template['Parameters']) ^ set(grouped))}")
monitoring = next((g["Parameters"] for g in groups if g["Label"]["default"].startswith("Monitoring")), [])
if sorted(monitoring) != sorted(["AlarmTopicArn", "AlarmEmail", "LatencyP99ThresholdMs", "StoreUnavailableMinutes",
                                 "TableThrottleThreshold", "Api5xxThreshold"]):
    fail(f"the Monitoring group lists {monitoring}")

if failures:
    sys.exit("\n".join(failures))
print(f"{len(alarms)} alarms, 1 dashboard, {len(queries)} queries, {len(emitted)} metrics consistent")
PY

check "template.yaml custom domain: optional, off by default, every variant lints" \
    "$tools/python" - template.yaml "$tools/cfn-lint" <<'PY'
"""Checks the custom-domain part of template.yaml.

- DomainName, CertificateArn and BasePath default to empty, and every
  resource and output they bring is conditional on DomainName: nothing
  changes when they are empty;
- their patterns accept what API Gateway accepts (one or more mapping-key
  segments) and refuse the mistakes (slashes at either end, an upper-case
  or empty DNS label);
- the API mapping maps the HTTP API's stage, with the key only when BasePath
  is set;
- the template lints with cfn-lint once with the domain on (with and without
  a base path), not only with its empty defaults.
"""
import re
import subprocess
import sys
import tempfile

from cfnlint.decode import decode

path, cfn_lint = sys.argv[1], sys.argv[2]
template, errors = decode(path)
if errors:
    sys.exit("\n".join(str(e) for e in errors))
failures = []
params = template["Parameters"]
for name in ("DomainName", "CertificateArn", "BasePath"):
    if params.get(name, {}).get("Default") != "":
        failures.append(f"parameter {name} must exist and default to empty")
conditions = template["Conditions"]
if conditions.get("HasCustomDomain") != {"Fn::Not": [{"Fn::Equals": [{"Ref": "DomainName"}, ""]}]}:
    failures.append("HasCustomDomain must be: DomainName is not empty")
if conditions.get("HasBasePath") != {"Fn::Not": [{"Fn::Equals": [{"Ref": "BasePath"}, ""]}]}:
    failures.append("HasBasePath must be: BasePath is not empty")

domain_types = {"AWS::ApiGatewayV2::DomainName", "AWS::ApiGatewayV2::ApiMapping"}
domain_resources = {n: r for n, r in template["Resources"].items() if r["Type"] in domain_types}
if sorted(r["Type"] for r in domain_resources.values()) != sorted(domain_types):
    failures.append(f"expected one domain name and one API mapping, found {sorted(domain_resources)}")
for name, resource in domain_resources.items():
    if resource.get("Condition") != "HasCustomDomain":
        failures.append(f"{name} must have Condition: HasCustomDomain")
for name, output in template["Outputs"].items():
    if "Domain" in name and output.get("Condition") != "HasCustomDomain":
        failures.append(f"output {name} must have Condition: HasCustomDomain")
mapping = next((r["Properties"] for r in domain_resources.values() if r["Type"].endswith("ApiMapping")), {})
if mapping.get("ApiId") != {"Ref": "PlantsApi"} or mapping.get("Stage") != {"Ref": "PlantsApi.Stage"}:
    failures.append("the API mapping must map PlantsApi's own stage")
if mapping.get("ApiMappingKey") != {"Fn::If": ["HasBasePath", {"Ref": "BasePath"}, {"Ref": "AWS::NoValue"}]}:
    failures.append("the API mapping key must be BasePath, and absent when BasePath is empty")

cases = {
    "BasePath": (["", "v1", "orders/v1", "a.b_c~d-e/2"], ["/v1", "v1/", "orders//v1", "v 1", "v1?x"]),
    "DomainName": (["", "api.example.com", "a-b.example.co.uk"], ["API.example.com", "api..example.com", "-a.example.com", "localhost", "api.example.com."]),
    "CertificateArn": (["", "arn:aws:acm:eu-west-1:123456789012:certificate/0a1b2c3d-1111-2222-3333-444455556666"], ["arn:aws:iam::123456789012:role/x", "certificate"]),
}
for name, (good, bad) in cases.items():
    pattern = re.compile(params[name]["AllowedPattern"])
    for value in good:
        if not pattern.fullmatch(value):
            failures.append(f"{name} pattern refuses {value!r}")
    for value in bad:
        if pattern.fullmatch(value):
            failures.append(f"{name} pattern accepts {value!r}")

# cfn-lint reads defaults; lint the variants with the domain on, too.
text = open(path, encoding="utf-8").read()
for base_path in ("orders/v1", ""):
    variant = text
    for name, value in (("DomainName", "api.example.com"),
                        ("CertificateArn", "arn:aws:acm:us-east-1:123456789012:certificate/0a1b2c3d-1111-2222-3333-444455556666"),
                        ("BasePath", base_path)):
        variant, count = re.subn(rf"(\n  {name}:\n(?:    .*\n)*?    Default: )''", rf"\g<1>'{value}'", variant, count=1)
        if count != 1:
            failures.append(f"could not set the default of {name} for the lint variant")
    with tempfile.NamedTemporaryFile("w", suffix=".yaml", delete=False) as f:
        f.write(variant)
    result = subprocess.run([cfn_lint, f.name], capture_output=True, text=True)
    if result.returncode != 0:
        failures.append(f"cfn-lint with DomainName set and BasePath {base_path!r}:\n{result.stdout}{result.stderr}")

if failures:
    sys.exit("\n".join(failures))
print("custom domain: 3 optional parameters, 2 conditional resources, 3 conditional outputs, 2 variants lint")
PY

check "template.yaml Managed Instances: optional, classic unchanged by default, every variant lints" \
    "$tools/python" - template.yaml "$tools/cfn-lint" "$tools/sam" <<'PY'
"""Checks the Lambda Managed Instances part of template.yaml.

- CapacityProviderArn, CapacityProviderSubnetIds and
  CapacityProviderSecurityGroupIds default to empty, and their patterns
  accept what they name and refuse the mix-ups; the per-environment
  maximum concurrency defaults within what Lambda allows (1 to 64 per vCPU);
- the function exists twice, each under exclusive conditions: PlantsFunction
  (classic) and PlantsManagedFunction (on a capacity provider), alike in
  every property but their name, memory and capacity provider; neither has
  what Lambda refuses beside a capacity provider (provisioned concurrency, a
  function VpcConfig) or reserved concurrency; the managed one has at least
  2 GB at 2 to 8 GiB per vCPU;
- rendered by the SAM translator with conditions resolved, each variant
  (classic, an existing provider, a provider created in the stack) has
  exactly its function, the API and the alarms point at it, and nothing
  refers to a resource the variant lacks;
- cfn-lint and `sam validate --lint` pass with the Managed Instances
  parameters set (both ways), not only with their empty defaults.
"""
import copy
import json
import os
import re
import subprocess
import sys
import tempfile

from cfnlint.decode import decode

path, cfn_lint, sam = sys.argv[1:4]
template, errors = decode(path)
if errors:
    sys.exit("\n".join(str(e) for e in errors))
template = json.loads(json.dumps(template))
failures = []
fail = failures.append
params = template["Parameters"]
resources = template["Resources"]

for name in ("CapacityProviderArn", "CapacityProviderSubnetIds", "CapacityProviderSecurityGroupIds"):
    if params.get(name, {}).get("Default") != "":
        fail(f"parameter {name} must exist and default to empty")
concurrency = params.get("MaxConcurrencyPerEnvironment", {})
if not (1 <= int(concurrency.get("Default", 0)) <= int(concurrency.get("MaxValue", 0)) <= 64):
    fail("MaxConcurrencyPerEnvironment: a default from 1 to MaxValue, and MaxValue at most 64 (per vCPU)")

# A CommaDelimitedList's pattern applies to each of its items.
cases = {
    "CapacityProviderArn": (["", "arn:aws:lambda:eu-west-1:123456789012:capacity-provider:plants_1-a"],
                            ["plants", "arn:aws:lambda:eu-west-1:123456789012:function:plants",
                             "arn:aws:lambda:eu-west-1:12345:capacity-provider:plants"]),
    "CapacityProviderSubnetIds": (["", "subnet-0a1b2c3d4e5f60718"], ["sg-0123abcd", "subnet-0a1b 2c3d", "subnet-"]),
    "CapacityProviderSecurityGroupIds": (["", "sg-0123abcd"], ["subnet-0a1b2c3d", "sg-XYZ", "default"]),
}
for name, (good, bad) in cases.items():
    pattern = re.compile(params.get(name, {}).get("AllowedPattern", "$^"))
    for value in good:
        if not pattern.fullmatch(value):
            fail(f"{name} pattern refuses {value!r}")
    for value in bad:
        if pattern.fullmatch(value):
            fail(f"{name} pattern accepts {value!r}")

classic = resources.get("PlantsFunction", {})
managed = resources.get("PlantsManagedFunction", {})
if classic.get("Condition") != "OnClassicLambda" or managed.get("Condition") != "OnManagedInstances":
    fail("PlantsFunction must have Condition OnClassicLambda, PlantsManagedFunction OnManagedInstances")
if template["Conditions"].get("OnClassicLambda") != {"Fn::Not": [{"Condition": "OnManagedInstances"}]}:
    fail("OnClassicLambda must be exactly: not OnManagedInstances")
OWN = {"FunctionName", "MemorySize", "CapacityProviderConfig"}
a = {k: v for k, v in classic.get("Properties", {}).items() if k not in OWN}
b = {k: v for k, v in managed.get("Properties", {}).items() if k not in OWN}
if a != b:
    fail(f"the two functions differ beyond {sorted(OWN)}: {sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))}")
if classic.get("Metadata") != managed.get("Metadata"):
    fail("the two functions must have the same Metadata: sam build builds them once only then")
for name, function in (("PlantsFunction", classic), ("PlantsManagedFunction", managed)):
    for key in ("ProvisionedConcurrencyConfig", "VpcConfig", "ReservedConcurrentExecutions", "Events"):
        if key in function.get("Properties", {}):
            fail(f"{name}: no {key} (see the comments in template.yaml)")
if "CapacityProviderConfig" in classic.get("Properties", {}):
    fail("PlantsFunction is the classic function: no CapacityProviderConfig")
config = managed.get("Properties", {}).get("CapacityProviderConfig", {})
if set(config) != {"Arn", "PerExecutionEnvironmentMaxConcurrency", "ExecutionEnvironmentMemoryGiBPerVCpu"}:
    fail(f"PlantsManagedFunction: CapacityProviderConfig needs Arn, the concurrency and the memory per vCPU: {sorted(config)}")
if config.get("PerExecutionEnvironmentMaxConcurrency") != {"Ref": "MaxConcurrencyPerEnvironment"}:
    fail("PlantsManagedFunction: PerExecutionEnvironmentMaxConcurrency must be the parameter MaxConcurrencyPerEnvironment")
ratio = config.get("ExecutionEnvironmentMemoryGiBPerVCpu")
memory = managed.get("Properties", {}).get("MemorySize")
if not (isinstance(ratio, (int, float)) and 2 <= ratio <= 8 and isinstance(memory, int) and memory >= 2048
        and memory % int(ratio * 1024) == 0):
    fail(f"PlantsManagedFunction: at least 2048 MB, a whole number of vCPUs at 2 to 8 GiB each ({memory} MB, {ratio})")
provider = resources.get("PlantsCapacityProvider", {})
if provider.get("Type") != "AWS::Serverless::CapacityProvider" or provider.get("Condition") != "CreatesCapacityProvider":
    fail("PlantsCapacityProvider: an AWS::Serverless::CapacityProvider with Condition CreatesCapacityProvider")
if provider.get("Properties", {}).get("InstanceRequirements", {}).get("Architectures") != [{"Ref": "Architecture"}]:
    fail("PlantsCapacityProvider: its instances must have the function's Architecture")

# The processed template, through the pinned SAM translator, offline.
from samtranslator.translator.transform import transform
from samtranslator.public.exceptions import InvalidDocumentException


class NoManagedPolicies:
    def load(self):
        return {}


os.environ.setdefault("AWS_DEFAULT_REGION", "us-east-1")
sam_input = copy.deepcopy(template)
for resource in sam_input["Resources"].values():
    if resource["Type"] == "AWS::Serverless::Function":
        resource["Properties"]["CodeUri"] = "s3://bucket/plants.zip"
try:
    processed = transform(sam_input, {}, NoManagedPolicies())
except InvalidDocumentException as e:
    sys.exit("the SAM translator refuses template.yaml: " + "; ".join(str(c) for c in e.causes))

NO_VALUE = object()
PSEUDO = {"AWS::Region": "us-east-1", "AWS::AccountId": "123456789012", "AWS::StackName": "plant-store",
          "AWS::Partition": "aws", "AWS::URLSuffix": "amazonaws.com", "AWS::NoValue": None}


def effective(overrides):
    """Resources and outputs of the processed template for these parameter
    values: false conditions dropped, Fn::If taken, AWS::NoValue removed."""
    values = dict(PSEUDO)
    for name, p in processed["Parameters"].items():
        value = overrides.get(name, p.get("Default"))
        values[name] = value.split(",") if p["Type"] == "CommaDelimitedList" else value
    conditions, truth = processed["Conditions"], {}

    def evaluate(node):
        (fn, arg), = node.items()
        if fn == "Ref":
            return values[arg]
        if fn == "Condition":
            return holds(arg)
        if fn == "Fn::Equals":
            return str(evaluate_value(arg[0])) == str(evaluate_value(arg[1]))
        if fn == "Fn::Not":
            return not evaluate(arg[0])
        if fn == "Fn::And":
            return all(evaluate(x) for x in arg)
        if fn == "Fn::Or":
            return any(evaluate(x) for x in arg)
        raise ValueError(node)

    def evaluate_value(node):
        if isinstance(node, dict) and "Fn::Join" in node:
            sep, items = node["Fn::Join"]
            return sep.join(evaluate_value(items))
        return evaluate(node) if isinstance(node, dict) else node

    def holds(name):
        if name not in truth:
            truth[name] = evaluate(conditions[name])
        return truth[name]

    def resolve(node):
        if isinstance(node, dict):
            if set(node) == {"Fn::If"}:
                c, yes, no = node["Fn::If"]
                return resolve(yes if holds(c) else no)
            if node == {"Ref": "AWS::NoValue"}:
                return NO_VALUE
            out = {k: resolve(v) for k, v in node.items()}
            return {k: v for k, v in out.items() if v is not NO_VALUE}
        if isinstance(node, list):
            return [v for v in map(resolve, node) if v is not NO_VALUE]
        return node

    out = {}
    for section in ("Resources", "Outputs"):
        out[section] = {
            name: resolve({k: v for k, v in item.items() if k != "Condition"})
            for name, item in processed.get(section, {}).items()
            if "Condition" not in item or holds(item["Condition"])
        }
    return out


def referenced(node):
    """Logical ids a resolved node refers to (Ref, GetAtt, ${…} in Sub)."""
    if isinstance(node, dict):
        if set(node) == {"Ref"}:
            yield node["Ref"].split(".")[0]
            return
        if set(node) == {"Fn::GetAtt"}:
            yield node["Fn::GetAtt"][0]
            return
        if set(node) == {"Fn::Sub"}:
            text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
            for name in re.findall(r"\$\{([^}!]+)\}", text):
                if name.split(".")[0] not in variables:
                    yield name.split(".")[0]
            yield from referenced(variables)
            return
        for v in node.values():
            yield from referenced(v)
    elif isinstance(node, list):
        for v in node:
            yield from referenced(v)


ARN = "arn:aws:lambda:us-east-1:123456789012:capacity-provider:plants"
variants = {
    "classic": ({}, "PlantsFunction"),
    "an existing capacity provider": ({"CapacityProviderArn": ARN}, "PlantsManagedFunction"),
    "a capacity provider created in the stack": (
        {"CapacityProviderSubnetIds": "subnet-0a1b2c3d,subnet-4e5f6a7b", "CapacityProviderSecurityGroupIds": "sg-0123abcd"},
        "PlantsManagedFunction"),
}
for variant, (overrides, function) in variants.items():
    eff = effective(overrides)
    res = eff["Resources"]
    functions = sorted(n for n, r in res.items() if r["Type"] == "AWS::Lambda::Function")
    if functions != [function]:
        fail(f"{variant}: the functions are {functions}, expected [{function}]")
        continue
    props = res[function]["Properties"]
    cpc = props.get("CapacityProviderConfig", {}).get("LambdaManagedInstancesCapacityProviderConfig")
    providers = sorted(n for n, r in res.items() if r["Type"] == "AWS::Lambda::CapacityProvider")
    if function == "PlantsFunction":
        if cpc is not None or providers or props.get("MemorySize") != 128:
            fail(f"{variant}: the classic function at 128 MB, no capacity provider")
    else:
        arn = cpc.get("CapacityProviderArn") if cpc else None
        created = "CapacityProviderSubnetIds" in overrides
        if created and (providers != ["PlantsCapacityProvider"] or "PlantsCapacityProvider" not in set(referenced(arn))):
            fail(f"{variant}: the function must run on the capacity provider the stack creates ({arn})")
        if not created and (providers or arn != {"Ref": "CapacityProviderArn"}):
            fail(f"{variant}: the function must run on CapacityProviderArn, and nothing be created ({arn}, {providers})")
    paths = res["PlantsApi"]["Properties"]["Body"]["paths"]
    for route in ("/plants", "/$default"):
        uri = paths.get(route, {}).get("x-amazon-apigateway-any-method", {}).get("x-amazon-apigateway-integration", {}).get("uri")
        if set(referenced(uri)) - set(PSEUDO) != {function}:
            fail(f"{variant}: the route {route} must integrate {function}, not {uri}")
    permissions = [r["Properties"] for r in res.values() if r["Type"] == "AWS::Lambda::Permission"]
    if [p["FunctionName"] for p in permissions] != [{"Ref": function}]:
        fail(f"{variant}: one permission for the API to invoke {function}: {permissions}")
    for name, alarm in res.items():
        dims = alarm.get("Properties", {}).get("Dimensions", []) if alarm["Type"] == "AWS::CloudWatch::Alarm" else []
        for dim in dims:
            if dim["Name"] == "FunctionName" and dim["Value"] != {"Ref": function}:
                fail(f"{variant}: {name} watches {dim['Value']}, not {function}")
    known = set(res) | set(processed["Parameters"]) | set(PSEUDO)
    for section, items in eff.items():
        for name, item in items.items():
            missing = sorted(set(referenced(item)) - known)
            if missing:
                fail(f"{variant}: {section} {name} refers to {missing}, which this variant does not have")

# cfn-lint and sam validate read the parameters' defaults: lint each Managed
# Instances variant too, with its parameters as the defaults.
text = open(path, encoding="utf-8").read()
env = dict(os.environ, SAM_CLI_TELEMETRY="0")
for variant, (overrides, _) in variants.items():
    if not overrides:
        continue
    copy_text = text
    for name, value in overrides.items():
        copy_text, count = re.subn(rf"(\n  {name}:\n(?:    .*\n)*?    Default: )''", rf"\g<1>'{value}'", copy_text, count=1)
        if count != 1:
            fail(f"could not set the default of {name} for the lint variant")
    with tempfile.TemporaryDirectory() as tmp:
        variant_path = os.path.join(tmp, "template.yaml")
        with open(variant_path, "w", encoding="utf-8") as f:
            f.write(copy_text)
        for command in ([cfn_lint, variant_path], [sam, "validate", "--lint", "--template", variant_path]):
            result = subprocess.run(command, capture_output=True, text=True, env=env)
            if result.returncode != 0:
                fail(f"{os.path.basename(command[0])} with {variant}:\n{result.stdout}{result.stderr}")

if failures:
    sys.exit("\n".join(failures))
print("Managed Instances: 4 parameters, 3 variants rendered and resolved, 2 variants lint")
PY

echo "check_deploy: all checks passed"
