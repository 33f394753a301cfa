"""The deployment documents as the tests read them, through the libraries that deploy them.

template.yaml is decoded by cfn-lint (which turns the short forms `!Ref`,
`!Sub`, `!GetAtt`, `!If`... into their long forms), linted by cfn-lint's
Python API and rendered by the pinned SAM translator, in-process and
offline: no AWS account, region or credentials.
"""

import copy
import json
import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path
from unittest import mock

import yaml
from cfnlint.api import ManualArgs, lint
from cfnlint.decode import decode_str
from samtranslator.public.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform

ROOT = Path(__file__).resolve().parents[2]
# The region cfn-lint and the SAM translator assume: CI sets none, and both
# tools then take us-east-1 (a developer's AWS_REGION must not change the result).
REGION = "us-east-1"
PSEUDO_PARAMETERS = {
    "AWS::Region": REGION,
    "AWS::AccountId": "123456789012",
    "AWS::StackName": "plant-store",
    "AWS::Partition": "aws",
    "AWS::URLSuffix": "amazonaws.com",
    "AWS::NoValue": None,
}
CAPACITY_PROVIDER_ARN = f"arn:aws:lambda:{REGION}:123456789012:capacity-provider:plants"
# The translator counts what it does for a CloudWatch publisher it never has
# here, and warns at exit that the counts went unpublished: noise offline.
logging.getLogger("samtranslator.metrics.metrics").setLevel(logging.ERROR)


def read(relative_path):
    return (ROOT / relative_path).read_text(encoding="utf-8")


def load_template(text):
    """template.yaml as plain dicts, lists and strings, the short forms in their long form."""
    template, errors = decode_str(text)
    if errors:
        raise ValueError("cfn-lint cannot decode template.yaml:\n" + "\n".join(map(str, errors)))
    # cfn-lint's nodes carry their line numbers; plain values compare, copy and print simply.
    return json.loads(json.dumps(template))


def load_openapi(text):
    return yaml.safe_load(text)


def emitted_metrics(emf_source):
    """The metric names src/telemetry/mod.rs emits: its `count("…")` and `ms("…")` calls, its tests left out."""
    code = emf_source.split("#[cfg(test)]", 1)[0]
    return set(re.findall(r'(?:count|ms)\("([A-Za-z]+)"', code))


def lint_problems(template):
    """What cfn-lint reports on the template, as `rule path: message` lines
    (errors and warnings, as the command line fails on both). `sam validate
    --lint` is this same call (cfnlint.api.lint on the template's text). The
    path in the template stands in for a line number, as the text linted is
    the decoded template, so that a variant is a changed default."""
    matches = lint(json.dumps(template), config=ManualArgs(regions=[REGION]))
    return [f"{m.rule.id} {'/'.join(map(str, getattr(m, 'path', None) or []))}: {m.message}" for m in matches]


def pattern_problems(parameters, cases):
    """Each value a parameter's AllowedPattern should accept but refuses, or
    refuse but accepts; `cases` maps a parameter to its (good, bad) values.
    CloudFormation matches the whole value (each item of a CommaDelimitedList)."""
    problems = []
    for name, (good, bad) in cases.items():
        pattern = re.compile(parameters.get(name, {}).get("AllowedPattern", "$^"))
        problems += [f"{name} pattern refuses {value!r}" for value in good if not pattern.fullmatch(value)]
        problems += [f"{name} pattern accepts {value!r}" for value in bad if pattern.fullmatch(value)]
    return problems


def with_defaults(template, values):
    """A copy of the template whose parameters default to `values`: cfn-lint
    reads the defaults, so this is how a variant other than the default is linted."""
    variant = copy.deepcopy(template)
    for name, value in values.items():
        variant["Parameters"][name]["Default"] = value
    return variant


# ---- the template rendered as CloudFormation deploys it --------------------


@dataclass(frozen=True)
class Variant:
    """One way to deploy the template: parameter values, and the function it runs."""

    name: str
    parameters: dict
    function: str


VARIANTS = (
    Variant("classic", {}, "PlantsFunction"),
    Variant("an existing capacity provider", {"CapacityProviderArn": CAPACITY_PROVIDER_ARN}, "PlantsManagedFunction"),
    Variant(
        "a capacity provider created in the stack",
        {
            "CapacityProviderSubnetIds": "subnet-0a1b2c3d,subnet-4e5f6a7b",
            "CapacityProviderSecurityGroupIds": "sg-0123abcd",
        },
        "PlantsManagedFunction",
    ),
)


@dataclass(frozen=True)
class Rendered:
    """A variant as CloudFormation would create it: the SAM translator's
    output with false conditions dropped, each Fn::If taken and AWS::NoValue removed."""

    variant: Variant
    parameters: dict
    resources: dict
    outputs: dict


class NoManagedPolicies:
    """The translator asks IAM for managed policy ARNs only for a function's
    `Policies`; ours have a `Role`, so offline an empty map is the truth."""

    def load(self):
        return {}


def translate(template, parameter_values):
    """The SAM translator's CloudFormation for these parameter values (raises
    InvalidDocumentException, with every cause, if it refuses the template)."""
    sam_input = copy.deepcopy(template)
    for resource in sam_input["Resources"].values():
        if resource.get("Type") == "AWS::Serverless::Function":
            # `sam build` and `sam package` replace the local folder with the uploaded code.
            resource["Properties"]["CodeUri"] = "s3://bucket/plants.zip"
    with mock.patch.dict(os.environ, {"AWS_REGION": REGION, "AWS_DEFAULT_REGION": REGION}):
        return transform(sam_input, dict(parameter_values), NoManagedPolicies())


def translator_problems(template):
    """Why the SAM translator refuses a variant of the template, if it does."""
    problems = []
    for variant in VARIANTS:
        try:
            translate(template, variant.parameters)
        except InvalidDocumentException as e:
            problems += [f"{variant.name}: {cause}" for cause in e.causes]
    return problems


def render_variants(template):
    return {variant.name: render(template, variant) for variant in VARIANTS}


def render(template, variant):
    processed = translate(template, variant.parameters)
    values = dict(PSEUDO_PARAMETERS)
    for name, parameter in processed["Parameters"].items():
        value = variant.parameters.get(name, parameter.get("Default"))
        values[name] = value.split(",") if parameter["Type"] == "CommaDelimitedList" else value
    conditions = Conditions(processed.get("Conditions", {}), values)
    sections = {
        section: {
            name: conditions.resolve({k: v for k, v in item.items() if k != "Condition"})
            for name, item in processed.get(section, {}).items()
            if "Condition" not in item or conditions.holds(item["Condition"])
        }
        for section in ("Resources", "Outputs")
    }
    return Rendered(variant, processed["Parameters"], sections["Resources"], sections["Outputs"])


_NO_VALUE = object()


class Conditions:
    """The template's conditions for given parameter values, as CloudFormation
    evaluates them at deploy time. Written here because no library fits:
    the SAM translator leaves conditions to CloudFormation, and cfn-lint's
    condition solver reasons about `Ref`s only (it gives up on the `Fn::Join`
    of CreatesCapacityProvider) and resolves `Fn::If` on its own node types."""

    def __init__(self, conditions, values):
        self.conditions, self.values, self.truth = conditions, values, {}

    def holds(self, name):
        if name not in self.truth:
            self.truth[name] = self._evaluate(self.conditions[name])
        return self.truth[name]

    def _evaluate(self, node):
        ((function, argument),) = node.items()
        match function:
            case "Condition":
                return self.holds(argument)
            case "Fn::Equals":
                return str(self._value(argument[0])) == str(self._value(argument[1]))
            case "Fn::Not":
                return not self._evaluate(argument[0])
            case "Fn::And":
                return all(map(self._evaluate, argument))
            case "Fn::Or":
                return any(map(self._evaluate, argument))
        raise ValueError(f"a condition function these tests do not evaluate: {node}")

    def _value(self, node):
        if not isinstance(node, dict):
            return node
        if set(node) == {"Ref"}:
            return self.values[node["Ref"]]
        if set(node) == {"Fn::Join"}:
            separator, items = node["Fn::Join"]
            return separator.join(self._value(items))
        raise ValueError(f"a value these tests do not evaluate in a condition: {node}")

    def resolve(self, node):
        """The node with each Fn::If taken and AWS::NoValue removed."""
        if isinstance(node, dict):
            if set(node) == {"Fn::If"}:
                condition, yes, no = node["Fn::If"]
                return self.resolve(yes if self.holds(condition) else no)
            if node == {"Ref": "AWS::NoValue"}:
                return _NO_VALUE
            resolved = {k: self.resolve(v) for k, v in node.items()}
            return {k: v for k, v in resolved.items() if v is not _NO_VALUE}
        if isinstance(node, list):
            return [v for v in map(self.resolve, node) if v is not _NO_VALUE]
        return node


# Fixtures computed from another document: a broken copy of the source is
# computed again (breakage.py), so that a negative case breaks what a reader edits.
DERIVED = {
    "variants": ("template", render_variants),
    "emitted_metrics": ("emf_source", emitted_metrics),
}
