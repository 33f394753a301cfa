"""Lambda Managed Instances in template.yaml: optional, the classic deploy unchanged by default, every variant lints.

The template's own properties first, then each variant (documents.VARIANTS)
as the SAM translator renders it with its conditions resolved.
"""

import re

import pytest
from breakage import Broken, assert_rejected, drop, edit, put
from documents import PSEUDO_PARAMETERS, VARIANTS, lint_problems, pattern_problems, with_defaults

CAPACITY_PROVIDER_PARAMETERS = ("CapacityProviderArn", "CapacityProviderSubnetIds", "CapacityProviderSecurityGroupIds")
# What each pattern must accept, and the mix-ups it must refuse.
PATTERN_CASES = {
    "CapacityProviderArn": (
        ["", "arn:aws:lambda:eu-west-1:123456789012:capacity-provider:plants_1-a"],
        [
            "plants",
            "arn:aws:lambda:eu-west-1:123456789012:function:plants",
            "arn:aws:lambda:eu-west-1:12345:capacity-provider:plants",
        ],
    ),
    "CapacityProviderSubnetIds": (["", "subnet-0a1b2c3d4e5f60718"], ["sg-0123abcd", "subnet-0a1b 2c3d", "subnet-"]),
    "CapacityProviderSecurityGroupIds": (["", "sg-0123abcd"], ["subnet-0a1b2c3d", "sg-XYZ", "default"]),
}
# What only the function's name, memory and compute type may change.
OWN_PROPERTIES = {"FunctionName", "MemorySize", "CapacityProviderConfig"}
# Lambda refuses provisioned concurrency and a function VpcConfig beside a
# capacity provider; reserved concurrency and events are kept off both (see
# the comments in template.yaml).
REFUSED = ("ProvisionedConcurrencyConfig", "VpcConfig", "ReservedConcurrentExecutions", "Events")


def functions(template):
    resources = template["Resources"]
    return resources.get("PlantsFunction", {}), resources.get("PlantsManagedFunction", {})


def capacity_provider_config(template):
    return functions(template)[1].get("Properties", {}).get("CapacityProviderConfig", {})


def referenced(node):
    """Logical ids a node refers to: Ref, GetAtt, and the ${…} of a Sub not bound by its variables."""
    if isinstance(node, dict):
        if set(node) == {"Ref"}:
            yield node["Ref"].split(".")[0]
        elif set(node) == {"Fn::GetAtt"}:
            yield node["Fn::GetAtt"][0]
        elif set(node) == {"Fn::Sub"}:
            text, variables = (node["Fn::Sub"], {}) if isinstance(node["Fn::Sub"], str) else node["Fn::Sub"]
            for name in re.findall(r"\$\{([^}!]+)\}", text):
                if name.split(".")[0] not in variables:
                    yield name.split(".")[0]
            yield from referenced(variables)
        else:
            for value in node.values():
                yield from referenced(value)
    elif isinstance(node, list):
        for value in node:
            yield from referenced(value)


def of_type(rendered, kind):
    return sorted(name for name, r in rendered.resources.items() if r["Type"] == kind)


def rendered_with_their_function(variants):
    """The rendered variants that have their function (each_variant_has_exactly_its_function checks the others)."""
    return [r for r in variants.values() if r.variant.function in r.resources]


# ---- the template ---------------------------------------------------------


def the_capacity_provider_parameters_default_to_empty(template):
    return [
        f"parameter {name} must exist and default to empty"
        for name in CAPACITY_PROVIDER_PARAMETERS
        if template["Parameters"].get(name, {}).get("Default") != ""
    ]


def test_the_capacity_provider_parameters_default_to_empty(template):
    assert the_capacity_provider_parameters_default_to_empty(template) == []


def the_concurrency_per_environment_stays_within_what_lambda_allows(template):
    """1 to 64 invocations at once per vCPU; the environment has one."""
    concurrency = template["Parameters"].get("MaxConcurrencyPerEnvironment", {})
    if not 1 <= int(concurrency.get("Default", 0)) <= int(concurrency.get("MaxValue", 0)) <= 64:
        return ["MaxConcurrencyPerEnvironment: a default from 1 to MaxValue, and MaxValue at most 64 (per vCPU)"]
    return []


def test_the_concurrency_per_environment_stays_within_what_lambda_allows(template):
    assert the_concurrency_per_environment_stays_within_what_lambda_allows(template) == []


def the_capacity_provider_patterns_accept_what_they_name_and_refuse_the_mixups(template):
    return pattern_problems(template["Parameters"], PATTERN_CASES)


def test_the_capacity_provider_patterns_accept_what_they_name_and_refuse_the_mixups(template):
    assert the_capacity_provider_patterns_accept_what_they_name_and_refuse_the_mixups(template) == []


def the_two_functions_exist_under_exclusive_conditions(template):
    classic, managed = functions(template)
    problems = []
    if classic.get("Condition") != "OnClassicLambda" or managed.get("Condition") != "OnManagedInstances":
        problems.append("PlantsFunction must have Condition OnClassicLambda, PlantsManagedFunction OnManagedInstances")
    if template["Conditions"].get("OnClassicLambda") != {"Fn::Not": [{"Condition": "OnManagedInstances"}]}:
        problems.append("OnClassicLambda must be exactly: not OnManagedInstances")
    return problems


def test_the_two_functions_exist_under_exclusive_conditions(template):
    assert the_two_functions_exist_under_exclusive_conditions(template) == []


def the_two_functions_differ_only_in_name_memory_and_capacity_provider(template):
    classic, managed = (
        {k: v for k, v in f.get("Properties", {}).items() if k not in OWN_PROPERTIES} for f in functions(template)
    )
    differ = sorted(k for k in classic.keys() | managed.keys() if classic.get(k) != managed.get(k))
    return [f"the two functions differ beyond {sorted(OWN_PROPERTIES)}: {differ}"] if differ else []


def test_the_two_functions_differ_only_in_name_memory_and_capacity_provider(template):
    assert the_two_functions_differ_only_in_name_memory_and_capacity_provider(template) == []


def the_two_functions_have_the_same_build_metadata(template):
    """`sam build` then builds the code once for both."""
    classic, managed = functions(template)
    if classic.get("Metadata") != managed.get("Metadata"):
        return [f"the two functions' Metadata differ: {classic.get('Metadata')} and {managed.get('Metadata')}"]
    return []


def test_the_two_functions_have_the_same_build_metadata(template):
    assert the_two_functions_have_the_same_build_metadata(template) == []


def neither_function_has_what_lambda_refuses_beside_a_capacity_provider(template):
    return [
        f"{name}: no {key} (see the comments in template.yaml)"
        for name, function in zip(("PlantsFunction", "PlantsManagedFunction"), functions(template), strict=True)
        for key in REFUSED
        if key in function.get("Properties", {})
    ]


def test_neither_function_has_what_lambda_refuses_beside_a_capacity_provider(template):
    assert neither_function_has_what_lambda_refuses_beside_a_capacity_provider(template) == []


def the_classic_function_has_no_capacity_provider(template):
    if "CapacityProviderConfig" in functions(template)[0].get("Properties", {}):
        return ["PlantsFunction is the classic function: no CapacityProviderConfig"]
    return []


def test_the_classic_function_has_no_capacity_provider(template):
    assert the_classic_function_has_no_capacity_provider(template) == []


def the_managed_function_sets_its_provider_concurrency_and_memory_per_vcpu(template):
    config = capacity_provider_config(template)
    problems = []
    if set(config) != {"Arn", "PerExecutionEnvironmentMaxConcurrency", "ExecutionEnvironmentMemoryGiBPerVCpu"}:
        problems.append(
            f"CapacityProviderConfig needs Arn, the concurrency and the memory per vCPU, not {sorted(config)}"
        )
    if config.get("PerExecutionEnvironmentMaxConcurrency") != {"Ref": "MaxConcurrencyPerEnvironment"}:
        problems.append("CapacityProviderConfig: the concurrency must be the parameter MaxConcurrencyPerEnvironment")
    return problems


def test_the_managed_function_sets_its_provider_concurrency_and_memory_per_vcpu(template):
    assert the_managed_function_sets_its_provider_concurrency_and_memory_per_vcpu(template) == []


def the_managed_function_has_at_least_2_gb_in_whole_vcpus_of_2_to_8_gib(template):
    ratio = capacity_provider_config(template).get("ExecutionEnvironmentMemoryGiBPerVCpu")
    memory = functions(template)[1].get("Properties", {}).get("MemorySize")
    if not (
        isinstance(ratio, int | float)
        and 2 <= ratio <= 8
        and isinstance(memory, int)
        and memory >= 2048
        and memory % int(ratio * 1024) == 0
    ):
        return [
            f"PlantsManagedFunction: at least 2048 MB in whole vCPUs of 2 to 8 GiB ({memory} MB, {ratio} GiB a vCPU)"
        ]
    return []


def test_the_managed_function_has_at_least_2_gb_in_whole_vcpus_of_2_to_8_gib(template):
    assert the_managed_function_has_at_least_2_gb_in_whole_vcpus_of_2_to_8_gib(template) == []


def the_capacity_provider_is_created_only_for_subnets(template):
    provider = template["Resources"].get("PlantsCapacityProvider", {})
    if (
        provider.get("Type") != "AWS::Serverless::CapacityProvider"
        or provider.get("Condition") != "CreatesCapacityProvider"
    ):
        return ["PlantsCapacityProvider: an AWS::Serverless::CapacityProvider with Condition CreatesCapacityProvider"]
    return []


def test_the_capacity_provider_is_created_only_for_subnets(template):
    assert the_capacity_provider_is_created_only_for_subnets(template) == []


def the_capacity_providers_instances_have_the_functions_architecture(template):
    provider = template["Resources"].get("PlantsCapacityProvider", {})
    if provider.get("Properties", {}).get("InstanceRequirements", {}).get("Architectures") != [{"Ref": "Architecture"}]:
        return ["PlantsCapacityProvider: its instances must have the function's Architecture"]
    return []


def test_the_capacity_providers_instances_have_the_functions_architecture(template):
    assert the_capacity_providers_instances_have_the_functions_architecture(template) == []


def cfn_lint_finds_nothing_on_managed_instances(template):
    """cfn-lint reads the parameters' defaults: lint each Managed Instances variant with its parameters as defaults."""
    return [
        f"{variant.name}: {problem}"
        for variant in VARIANTS
        if variant.parameters
        for problem in lint_problems(with_defaults(template, variant.parameters))
    ]


def test_cfn_lint_finds_nothing_on_managed_instances(template):
    assert cfn_lint_finds_nothing_on_managed_instances(template) == []


# ---- each variant, rendered -------------------------------------------------


def each_variant_has_exactly_its_function(variants):
    return [
        f"{r.variant.name}: the functions are {found}, expected [{r.variant.function}]"
        for r in variants.values()
        if (found := of_type(r, "AWS::Lambda::Function")) != [r.variant.function]
    ]


def test_each_variant_has_exactly_its_function(variants):
    assert each_variant_has_exactly_its_function(variants) == []


def the_classic_deploy_is_unchanged_when_no_capacity_provider_is_given(variants):
    problems = []
    for r in rendered_with_their_function(variants):
        props = r.resources[r.variant.function]["Properties"]
        if r.variant.function == "PlantsFunction" and (
            "CapacityProviderConfig" in props
            or of_type(r, "AWS::Lambda::CapacityProvider")
            or props.get("MemorySize") != 128
        ):
            problems.append(f"{r.variant.name}: the classic function at 128 MB, and no capacity provider")
    return problems


def test_the_classic_deploy_is_unchanged_when_no_capacity_provider_is_given(variants):
    assert the_classic_deploy_is_unchanged_when_no_capacity_provider_is_given(variants) == []


def a_managed_variant_runs_on_its_capacity_provider(variants):
    """The one the stack creates for subnets, else the one CapacityProviderArn names (and nothing is created)."""
    problems = []
    for r in rendered_with_their_function(variants):
        if r.variant.function != "PlantsManagedFunction":
            continue
        config = r.resources[r.variant.function]["Properties"].get("CapacityProviderConfig", {})
        arn = config.get("LambdaManagedInstancesCapacityProviderConfig", {}).get("CapacityProviderArn")
        providers = of_type(r, "AWS::Lambda::CapacityProvider")
        if "CapacityProviderSubnetIds" in r.variant.parameters:
            if providers != ["PlantsCapacityProvider"] or "PlantsCapacityProvider" not in set(referenced(arn)):
                problems.append(
                    f"{r.variant.name}: the function must run on the capacity provider the stack creates ({arn})"
                )
        elif providers or arn != {"Ref": "CapacityProviderArn"}:
            problems.append(
                f"{r.variant.name}: the function must run on CapacityProviderArn, and nothing be created "
                f"({arn}, {providers})"
            )
    return problems


def test_a_managed_variant_runs_on_its_capacity_provider(variants):
    assert a_managed_variant_runs_on_its_capacity_provider(variants) == []


def the_api_routes_reach_the_variants_function(variants):
    problems = []
    for r in variants.values():
        paths = r.resources["PlantsApi"]["Properties"]["Body"]["paths"]
        for route in ("/plants", "/$default"):
            method = paths.get(route, {}).get("x-amazon-apigateway-any-method", {})
            uri = method.get("x-amazon-apigateway-integration", {}).get("uri")
            if set(referenced(uri)) - set(PSEUDO_PARAMETERS) != {r.variant.function}:
                problems.append(f"{r.variant.name}: the route {route} must integrate {r.variant.function}, not {uri}")
    return problems


def test_the_api_routes_reach_the_variants_function(variants):
    assert the_api_routes_reach_the_variants_function(variants) == []


def the_api_may_invoke_the_variants_function_and_nothing_else(variants):
    problems = []
    for r in variants.values():
        permissions = [p["Properties"] for p in r.resources.values() if p["Type"] == "AWS::Lambda::Permission"]
        if [p["FunctionName"] for p in permissions] != [{"Ref": r.variant.function}]:
            problems.append(
                f"{r.variant.name}: one permission, for the API to invoke {r.variant.function}: {permissions}"
            )
    return problems


def test_the_api_may_invoke_the_variants_function_and_nothing_else(variants):
    assert the_api_may_invoke_the_variants_function_and_nothing_else(variants) == []


def the_alarms_watch_the_variants_function(variants):
    return [
        f"{r.variant.name}: {name} watches {dimension['Value']}, not {r.variant.function}"
        for r in variants.values()
        for name, alarm in r.resources.items()
        if alarm["Type"] == "AWS::CloudWatch::Alarm"
        for dimension in alarm["Properties"].get("Dimensions", [])
        if dimension["Name"] == "FunctionName" and dimension["Value"] != {"Ref": r.variant.function}
    ]


def test_the_alarms_watch_the_variants_function(variants):
    assert the_alarms_watch_the_variants_function(variants) == []


def nothing_refers_to_a_resource_the_variant_lacks(variants):
    problems = []
    for r in variants.values():
        known = set(r.resources) | set(r.parameters) | set(PSEUDO_PARAMETERS)
        for section, items in (("Resources", r.resources), ("Outputs", r.outputs)):
            for name, item in items.items():
                if missing := sorted(set(referenced(item)) - known):
                    problems.append(
                        f"{r.variant.name}: {section} {name} refers to {missing}, which this variant does not have"
                    )
    return problems


def test_nothing_refers_to_a_resource_the_variant_lacks(variants):
    assert nothing_refers_to_a_resource_the_variant_lacks(variants) == []


MANAGED = "Resources.PlantsManagedFunction"
CLASSIC_INVOCATION = (
    "arn:${AWS::Partition}:apigateway:${AWS::Region}:lambda:path/2015-03-31/functions/${PlantsFunction.Arn}/invocations"
)
CREATED = "a capacity provider created in the stack"
EXISTING = "an existing capacity provider"
BROKEN = [
    Broken(
        the_capacity_provider_parameters_default_to_empty,
        "Managed Instances by default",
        put("Parameters.CapacityProviderArn.Default", "arn:aws:lambda:us-east-1:123456789012:capacity-provider:plants"),
        "parameter CapacityProviderArn must exist and default to empty",
    ),
    Broken(
        the_concurrency_per_environment_stays_within_what_lambda_allows,
        "a maximum above 64 per vCPU",
        put("Parameters.MaxConcurrencyPerEnvironment.MaxValue", 128),
        "MaxValue at most 64",
    ),
    Broken(
        the_capacity_provider_patterns_accept_what_they_name_and_refuse_the_mixups,
        "a subnet pattern that takes any prefix",
        put("Parameters.CapacityProviderSubnetIds.AllowedPattern", "^([a-z]+-[0-9a-f]+)?$"),
        "CapacityProviderSubnetIds pattern accepts 'sg-0123abcd'",
    ),
    Broken(
        the_two_functions_exist_under_exclusive_conditions,
        "a managed function in every deploy",
        drop(f"{MANAGED}.Condition"),
        "PlantsManagedFunction OnManagedInstances",
    ),
    Broken(
        the_two_functions_exist_under_exclusive_conditions,
        "a classic condition that overlaps",
        put("Conditions.OnClassicLambda", {"Fn::Not": [{"Condition": "HasCapacityProviderArn"}]}),
        "OnClassicLambda must be exactly: not OnManagedInstances",
    ),
    Broken(
        the_two_functions_differ_only_in_name_memory_and_capacity_provider,
        "a timeout changed in one function only",
        put(f"{MANAGED}.Properties.Timeout", 30),
        "the two functions differ beyond ['CapacityProviderConfig', 'FunctionName', 'MemorySize']: ['Timeout']",
    ),
    Broken(
        the_two_functions_have_the_same_build_metadata,
        "another build method",
        put(f"{MANAGED}.Metadata.BuildMethod", "makefile"),
        "the two functions' Metadata differ",
    ),
    Broken(
        neither_function_has_what_lambda_refuses_beside_a_capacity_provider,
        "reserved concurrency",
        put("Resources.PlantsFunction.Properties.ReservedConcurrentExecutions", 10),
        "PlantsFunction: no ReservedConcurrentExecutions",
    ),
    Broken(
        the_classic_function_has_no_capacity_provider,
        "a capacity provider on the classic function",
        put("Resources.PlantsFunction.Properties.CapacityProviderConfig", {"Arn": {"Ref": "CapacityProviderArn"}}),
        "PlantsFunction is the classic function: no CapacityProviderConfig",
    ),
    Broken(
        the_managed_function_sets_its_provider_concurrency_and_memory_per_vcpu,
        "no memory per vCPU",
        drop(f"{MANAGED}.Properties.CapacityProviderConfig.ExecutionEnvironmentMemoryGiBPerVCpu"),
        "CapacityProviderConfig needs Arn, the concurrency and the memory per vCPU, not ['Arn', 'Per",
    ),
    Broken(
        the_managed_function_sets_its_provider_concurrency_and_memory_per_vcpu,
        "a fixed concurrency",
        put(f"{MANAGED}.Properties.CapacityProviderConfig.PerExecutionEnvironmentMaxConcurrency", 8),
        "CapacityProviderConfig: the concurrency must be the parameter MaxConcurrencyPerEnvironment",
    ),
    Broken(
        the_managed_function_has_at_least_2_gb_in_whole_vcpus_of_2_to_8_gib,
        "a memory size that is no whole number of vCPUs",
        put(f"{MANAGED}.Properties.MemorySize", 3000),
        "(3000 MB, 2 GiB a vCPU)",
    ),
    Broken(
        the_capacity_provider_is_created_only_for_subnets,
        "a capacity provider created for an existing one too",
        put("Resources.PlantsCapacityProvider.Condition", "OnManagedInstances"),
        "PlantsCapacityProvider: an AWS::Serverless::CapacityProvider with Condition CreatesCapacityProvider",
    ),
    Broken(
        the_capacity_providers_instances_have_the_functions_architecture,
        "x86_64 instances whatever the Architecture",
        put("Resources.PlantsCapacityProvider.Properties.InstanceRequirements.Architectures", ["x86_64"]),
        "PlantsCapacityProvider: its instances must have the function's Architecture",
    ),
    Broken(
        cfn_lint_finds_nothing_on_managed_instances,
        "a subnet pattern that refuses real subnet ids",
        put("Parameters.CapacityProviderSubnetIds.AllowedPattern", "^(subnet-[0-9a-f]{4})?$"),
        f"{CREATED}: E2015 Parameters/CapacityProviderSubnetIds/Default",
    ),
    Broken(
        each_variant_has_exactly_its_function,
        "the classic function beside a created capacity provider",
        put("Conditions.OnClassicLambda", {"Fn::Not": [{"Condition": "HasCapacityProviderArn"}]}),
        f"{CREATED}: the functions are ['PlantsFunction', 'PlantsManagedFunction']",
    ),
    Broken(
        the_classic_deploy_is_unchanged_when_no_capacity_provider_is_given,
        "a capacity provider in the classic deploy",
        put("Resources.PlantsCapacityProvider.Condition", "OnClassicLambda"),
        "classic: the classic function at 128 MB, and no capacity provider",
    ),
    Broken(
        the_classic_deploy_is_unchanged_when_no_capacity_provider_is_given,
        "the classic function at 256 MB",
        put("Resources.PlantsFunction.Properties.MemorySize", 256),
        "classic: the classic function at 128 MB",
    ),
    Broken(
        a_managed_variant_runs_on_its_capacity_provider,
        "the created capacity provider unused",
        put(f"{MANAGED}.Properties.CapacityProviderConfig.Arn", {"Ref": "CapacityProviderArn"}),
        f"{CREATED}: the function must run on the capacity provider the stack creates",
    ),
    Broken(
        the_api_routes_reach_the_variants_function,
        "/plants always on the classic function",
        put(
            "Resources.PlantsApi.Properties.DefinitionBody.paths./plants.x-amazon-apigateway-any-method"
            ".x-amazon-apigateway-integration.uri",
            {"Fn::Sub": CLASSIC_INVOCATION},
        ),
        f"{EXISTING}: the route /plants must integrate PlantsManagedFunction",
    ),
    Broken(
        the_api_may_invoke_the_variants_function_and_nothing_else,
        "the permission always for the classic function",
        put("Resources.PlantsFunctionEverythingPermission.Properties.FunctionName", {"Ref": "PlantsFunction"}),
        f"{EXISTING}: one permission, for the API to invoke PlantsManagedFunction",
    ),
    Broken(
        the_alarms_watch_the_variants_function,
        "an alarm always on the classic function",
        put("Resources.FunctionErrorsAlarm.Properties.Dimensions.0.Value", {"Ref": "PlantsFunction"}),
        f"{EXISTING}: FunctionErrorsAlarm watches {{'Ref': 'PlantsFunction'}}, not PlantsManagedFunction",
    ),
    Broken(
        nothing_refers_to_a_resource_the_variant_lacks,
        "an output naming the classic function always",
        put("Outputs.FunctionName.Value", {"Ref": "PlantsFunction"}),
        f"{EXISTING}: Outputs FunctionName refers to ['PlantsFunction']",
    ),
    Broken(
        nothing_refers_to_a_resource_the_variant_lacks,
        "the created provider's name used without it",
        edit(f"{MANAGED}.Properties.CapacityProviderConfig.Arn", lambda choice: choice["Fn::If"][1]),
        f"{EXISTING}: Resources PlantsManagedFunction refers to ['PlantsCapacityProvider']",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_broken_copy_fails_its_check(case, request):
    assert_rejected(case, request)
