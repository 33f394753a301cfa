"""Every property of tests/deploy is shown to fail on a copy broken on purpose.

The house pattern, which this enforces: `test_<property>` asserts that the
plain function `<property>` finds no problem, and the module's `BROKEN`
list has at least one case that makes that very function report one.
"""

import importlib
import types
from pathlib import Path

import pytest

HERE = Path(__file__)
MODULES = sorted(p.stem for p in HERE.parent.glob("test_*.py") if p != HERE)
NEGATIVE_TEST = "test_a_broken_copy_fails_its_check"


def properties_without_a_broken_case(module):
    names = vars(module)
    tests = [name for name, value in names.items() if name.startswith("test_") and callable(value)]
    problems = [
        f"{module.__name__}: {test} has no check named {test[5:]}"
        for test in tests
        if test != NEGATIVE_TEST and not callable(names.get(test[5:]))
    ]
    if NEGATIVE_TEST not in tests:
        problems.append(f"{module.__name__}: no {NEGATIVE_TEST}")
    broken = {case.check.__name__ for case in names.get("BROKEN", [])}
    return problems + [
        f"{module.__name__}: {test[5:]} has no case in BROKEN"
        for test in tests
        if test != NEGATIVE_TEST and test[5:] not in broken
    ]


@pytest.mark.parametrize("module_name", MODULES)
def test_every_property_has_a_broken_copy_that_fails_it(module_name):
    assert properties_without_a_broken_case(importlib.import_module(module_name)) == []


def test_a_property_without_a_broken_case_is_found():
    module = types.ModuleType("test_example")

    def the_table_has_a_key(template):
        return []

    module.the_table_has_a_key = the_table_has_a_key
    module.test_the_table_has_a_key = lambda template: None
    module.test_what_nothing_checks = lambda: None
    module.test_a_broken_copy_fails_its_check = lambda case, request: None
    module.BROKEN = []
    assert properties_without_a_broken_case(module) == [
        "test_example: test_what_nothing_checks has no check named what_nothing_checks",
        "test_example: the_table_has_a_key has no case in BROKEN",
        "test_example: what_nothing_checks has no case in BROKEN",
    ]
