"""template.yaml as a whole, and samconfig.toml: what `sam deploy` reads."""

import tempfile
from pathlib import Path

import pytest
from breakage import Broken, assert_rejected, drop, edit, put, replace
from documents import lint_problems, translator_problems
from samcli.lib.config.exceptions import SamConfigFileReadException, SamConfigVersionException
from samcli.lib.config.samconfig import SamConfig


def cfn_lint_finds_nothing_with_the_default_parameters(template):
    """cfn-lint's errors and warnings (`cfn-lint template.yaml`, and `sam validate --lint`, which is the same call)."""
    return lint_problems(template)


def test_cfn_lint_finds_nothing_with_the_default_parameters(template):
    assert cfn_lint_finds_nothing_with_the_default_parameters(template) == []


def the_sam_translator_accepts_every_variant(template):
    return translator_problems(template)


def test_the_sam_translator_accepts_every_variant(template):
    assert the_sam_translator_accepts_every_variant(template) == []


def samconfig_is_read_by_the_sam_cli_and_names_the_stack(samconfig):
    """The SAM CLI's own reader: valid TOML with a version it knows, and the stack sam deploy makes."""
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "samconfig.toml").write_text(samconfig, encoding="utf-8")
        try:
            config = SamConfig(folder, "samconfig.toml")
        except (SamConfigFileReadException, SamConfigVersionException) as e:
            # The read error wraps the parser's, and only the parser's prints.
            return [f"samconfig.toml: the SAM CLI cannot read it: {e.__cause__ or e}"]
        if not config.get_all(["deploy"], "parameters").get("stack_name"):
            return ["samconfig.toml: no stack_name for sam deploy"]
    return []


def test_samconfig_is_read_by_the_sam_cli_and_names_the_stack(samconfig):
    assert samconfig_is_read_by_the_sam_cli_and_names_the_stack(samconfig) == []


def the_table_is_retained_and_has_point_in_time_recovery(template):
    """Deleting or replacing the stack never deletes the plants."""
    table = template["Resources"]["PlantsTable"]
    props = table["Properties"]
    problems = [
        f"PlantsTable: {policy} must be Retain"
        for policy in ("DeletionPolicy", "UpdateReplacePolicy")
        if table.get(policy) != "Retain"
    ]
    if props.get("DeletionProtectionEnabled") is not True:
        problems.append("PlantsTable: DeletionProtectionEnabled must be true")
    if props.get("PointInTimeRecoverySpecification", {}).get("PointInTimeRecoveryEnabled") is not True:
        problems.append("PlantsTable: point-in-time recovery must be enabled")
    return problems


def test_the_table_is_retained_and_has_point_in_time_recovery(template):
    assert the_table_is_retained_and_has_point_in_time_recovery(template) == []


def every_parameter_is_in_exactly_one_group(template):
    """The console's deploy form shows each parameter once, under its group."""
    groups = template["Metadata"]["AWS::CloudFormation::Interface"]["ParameterGroups"]
    grouped = [p for group in groups for p in group["Parameters"]]
    parameters = set(template["Parameters"])
    problems = [f"{p} is in no parameter group" for p in sorted(parameters - set(grouped))]
    problems += [f"{p} is grouped but is no parameter" for p in sorted(set(grouped) - parameters)]
    problems += [f"{p} is in {grouped.count(p)} groups" for p in sorted(set(grouped)) if grouped.count(p) > 1]
    return problems


def test_every_parameter_is_in_exactly_one_group(template):
    assert every_parameter_is_in_exactly_one_group(template) == []


GROUPS = "Metadata.AWS::CloudFormation::Interface.ParameterGroups"
BROKEN = [
    Broken(
        cfn_lint_finds_nothing_with_the_default_parameters,
        "a timeout above Lambda's maximum",
        put("Resources.PlantsFunction.Properties.Timeout", 9999),
        "E3034 Resources/PlantsFunction/Properties/Timeout",
    ),
    Broken(
        the_sam_translator_accepts_every_variant,
        "the managed function with provisioned concurrency",
        put(
            "Resources.PlantsManagedFunction.Properties.ProvisionedConcurrencyConfig",
            {"ProvisionedConcurrentExecutions": 1},
        ),
        "PlantsManagedFunction",
    ),
    Broken(
        samconfig_is_read_by_the_sam_cli_and_names_the_stack,
        "no version",
        replace("version = 0.1\n", ""),
        "cannot read it",
        document="samconfig",
    ),
    Broken(
        samconfig_is_read_by_the_sam_cli_and_names_the_stack,
        "a table header without its bracket",
        replace("[default.deploy.parameters]", "[default.deploy.parameters"),
        "cannot read it: Unexpected character",
        document="samconfig",
    ),
    Broken(
        samconfig_is_read_by_the_sam_cli_and_names_the_stack,
        "no stack name",
        replace('stack_name = "plant-store"', ""),
        "no stack_name",
        document="samconfig",
    ),
    Broken(
        the_table_is_retained_and_has_point_in_time_recovery,
        "the table deleted with the stack",
        put("Resources.PlantsTable.DeletionPolicy", "Delete"),
        "DeletionPolicy must be Retain",
    ),
    Broken(
        the_table_is_retained_and_has_point_in_time_recovery,
        "no point-in-time recovery",
        drop("Resources.PlantsTable.Properties.PointInTimeRecoverySpecification"),
        "point-in-time recovery",
    ),
    Broken(
        every_parameter_is_in_exactly_one_group,
        "a parameter in no group",
        drop(f"{GROUPS}.1.Parameters.0"),
        "Architecture is in no parameter group",
    ),
    Broken(
        every_parameter_is_in_exactly_one_group,
        "a parameter in two groups",
        edit(f"{GROUPS}.0.Parameters", lambda names: [*names, "Architecture"]),
        "Architecture is in 2 groups",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_broken_copy_fails_its_check(case, request):
    assert_rejected(case, request)
