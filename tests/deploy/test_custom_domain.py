"""The optional custom domain of template.yaml: off by default, and every variant lints."""

import pytest
from breakage import Broken, assert_rejected, drop, put
from documents import REGION, lint_problems, pattern_problems, with_defaults

DOMAIN_PARAMETERS = ("DomainName", "CertificateArn", "BasePath")
CERTIFICATE_ARN = f"arn:aws:acm:{REGION}:123456789012:certificate/0a1b2c3d-1111-2222-3333-444455556666"
# What each parameter's pattern must accept (API Gateway's mapping keys of
# one or more segments, DNS names, ACM certificates) and the mistakes it must refuse.
PATTERN_CASES = {
    "BasePath": (["", "v1", "orders/v1", "a.b_c~d-e/2"], ["/v1", "v1/", "orders//v1", "v 1", "v1?x"]),
    "DomainName": (
        ["", "api.example.com", "a-b.example.co.uk"],
        ["API.example.com", "api..example.com", "-a.example.com", "localhost", "api.example.com."],
    ),
    "CertificateArn": (["", CERTIFICATE_ARN], ["arn:aws:iam::123456789012:role/x", "certificate"]),
}


def the_domain_parameters_default_to_empty(template):
    return [
        f"parameter {name} must exist and default to empty"
        for name in DOMAIN_PARAMETERS
        if template["Parameters"].get(name, {}).get("Default") != ""
    ]


def test_the_domain_parameters_default_to_empty(template):
    assert the_domain_parameters_default_to_empty(template) == []


def a_custom_domain_and_a_base_path_are_on_only_when_set(template):
    conditions = template["Conditions"]
    return [
        f"{condition} must be: {parameter} is not empty"
        for condition, parameter in (("HasCustomDomain", "DomainName"), ("HasBasePath", "BasePath"))
        if conditions.get(condition) != {"Fn::Not": [{"Fn::Equals": [{"Ref": parameter}, ""]}]}
    ]


def test_a_custom_domain_and_a_base_path_are_on_only_when_set(template):
    assert a_custom_domain_and_a_base_path_are_on_only_when_set(template) == []


def domain_resources(template):
    kinds = {"AWS::ApiGatewayV2::DomainName", "AWS::ApiGatewayV2::ApiMapping"}
    return {name: r for name, r in template["Resources"].items() if r["Type"] in kinds}


def the_domain_name_and_its_mapping_exist_only_with_a_domain_name(template):
    found = domain_resources(template)
    kinds = sorted(r["Type"] for r in found.values())
    problems = (
        []
        if kinds == ["AWS::ApiGatewayV2::ApiMapping", "AWS::ApiGatewayV2::DomainName"]
        else [f"expected one domain name and one API mapping, found {sorted(found)}"]
    )
    return problems + [
        f"{name} must have Condition: HasCustomDomain"
        for name, resource in found.items()
        if resource.get("Condition") != "HasCustomDomain"
    ]


def test_the_domain_name_and_its_mapping_exist_only_with_a_domain_name(template):
    assert the_domain_name_and_its_mapping_exist_only_with_a_domain_name(template) == []


def the_domain_outputs_exist_only_with_a_domain_name(template):
    return [
        f"output {name} must have Condition: HasCustomDomain"
        for name, output in template["Outputs"].items()
        if "Domain" in name and output.get("Condition") != "HasCustomDomain"
    ]


def test_the_domain_outputs_exist_only_with_a_domain_name(template):
    assert the_domain_outputs_exist_only_with_a_domain_name(template) == []


def api_mapping(template):
    return next(
        (r["Properties"] for r in domain_resources(template).values() if r["Type"].endswith("ApiMapping")),
        {},
    )


def the_api_mapping_maps_the_http_apis_own_stage(template):
    mapping = api_mapping(template)
    if mapping.get("ApiId") != {"Ref": "PlantsApi"} or mapping.get("Stage") != {"Ref": "PlantsApi.Stage"}:
        return ["the API mapping must map PlantsApi's own stage"]
    return []


def test_the_api_mapping_maps_the_http_apis_own_stage(template):
    assert the_api_mapping_maps_the_http_apis_own_stage(template) == []


def the_mapping_key_is_the_base_path_and_absent_without_one(template):
    if api_mapping(template).get("ApiMappingKey") != {
        "Fn::If": ["HasBasePath", {"Ref": "BasePath"}, {"Ref": "AWS::NoValue"}]
    }:
        return ["the API mapping key must be BasePath, and absent when BasePath is empty"]
    return []


def test_the_mapping_key_is_the_base_path_and_absent_without_one(template):
    assert the_mapping_key_is_the_base_path_and_absent_without_one(template) == []


def the_domain_patterns_accept_what_api_gateway_accepts_and_refuse_the_mistakes(template):
    return pattern_problems(template["Parameters"], PATTERN_CASES)


def test_the_domain_patterns_accept_what_api_gateway_accepts_and_refuse_the_mistakes(template):
    assert the_domain_patterns_accept_what_api_gateway_accepts_and_refuse_the_mistakes(template) == []


def cfn_lint_finds_nothing_with_a_custom_domain(template):
    """cfn-lint reads the parameters' defaults: lint with the domain on, with and without a base path."""
    problems = []
    for base_path in ("orders/v1", ""):
        values = {"DomainName": "api.example.com", "CertificateArn": CERTIFICATE_ARN, "BasePath": base_path}
        variant = f"DomainName set and BasePath {base_path!r}"
        problems += [f"{variant}: {p}" for p in lint_problems(with_defaults(template, values))]
    return problems


def test_cfn_lint_finds_nothing_with_a_custom_domain(template):
    assert cfn_lint_finds_nothing_with_a_custom_domain(template) == []


BROKEN = [
    Broken(
        the_domain_parameters_default_to_empty,
        "a domain by default",
        put("Parameters.DomainName.Default", "api.example.com"),
        "parameter DomainName must exist and default to empty",
    ),
    Broken(
        a_custom_domain_and_a_base_path_are_on_only_when_set,
        "a base path condition on the domain name",
        put("Conditions.HasBasePath", {"Fn::Not": [{"Fn::Equals": [{"Ref": "DomainName"}, ""]}]}),
        "HasBasePath must be: BasePath is not empty",
    ),
    Broken(
        the_domain_name_and_its_mapping_exist_only_with_a_domain_name,
        "a domain name created always",
        drop("Resources.PlantsDomain.Condition"),
        "PlantsDomain must have Condition: HasCustomDomain",
    ),
    Broken(
        the_domain_name_and_its_mapping_exist_only_with_a_domain_name,
        "no API mapping",
        drop("Resources.PlantsApiMapping"),
        "expected one domain name and one API mapping, found ['PlantsDomain']",
    ),
    Broken(
        the_domain_outputs_exist_only_with_a_domain_name,
        "a domain output always",
        drop("Outputs.CustomDomainTarget.Condition"),
        "output CustomDomainTarget must have Condition: HasCustomDomain",
    ),
    Broken(
        the_api_mapping_maps_the_http_apis_own_stage,
        "a fixed stage name",
        put("Resources.PlantsApiMapping.Properties.Stage", "$default"),
        "the API mapping must map PlantsApi's own stage",
    ),
    Broken(
        the_mapping_key_is_the_base_path_and_absent_without_one,
        "an empty mapping key when BasePath is empty",
        put("Resources.PlantsApiMapping.Properties.ApiMappingKey", {"Ref": "BasePath"}),
        "the API mapping key must be BasePath, and absent when BasePath is empty",
    ),
    Broken(
        the_domain_patterns_accept_what_api_gateway_accepts_and_refuse_the_mistakes,
        "a base path pattern that accepts a leading slash",
        put("Parameters.BasePath.AllowedPattern", "^.*$"),
        "BasePath pattern accepts '/v1'",
    ),
    Broken(
        the_domain_patterns_accept_what_api_gateway_accepts_and_refuse_the_mistakes,
        "a domain pattern that refuses a hyphen",
        put("Parameters.DomainName.AllowedPattern", "^$|^([a-z0-9]+\\.)+[a-z]{2,}$"),
        "DomainName pattern refuses 'a-b.example.co.uk'",
    ),
    Broken(
        cfn_lint_finds_nothing_with_a_custom_domain,
        "a base path pattern of one segment",
        put("Parameters.BasePath.AllowedPattern", "^[a-z0-9]*$"),
        "DomainName set and BasePath 'orders/v1': E2015 Parameters/BasePath/Default",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_broken_copy_fails_its_check(case, request):
    assert_rejected(case, request)
