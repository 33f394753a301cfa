"""Negative cases: every property's check must fail on a copy of a document broken on purpose.

A check is a plain function of fixtures (`template`, `openapi`, `runbook`...)
that returns the problems it finds, none when the property holds. The
positive test asserts there are none; a `Broken` case runs the very same
function on a deep copy of one document changed by a named mutation, and
asserts that it reports the expected problem. So no check can pass by
accident, and test_every_check_can_fail.py sees that each has such a case.
"""

import copy
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from documents import DERIVED


@dataclass(frozen=True)
class Broken:
    """`check` must report a problem containing `expect` once `mutate` has broken `document`."""

    check: Callable[..., list[str]]
    how: str  # what is broken, as a reader would say it (the test id)
    mutate: Callable[[Any], Any]  # takes the deep copy, returns the broken copy
    expect: str
    document: str = "template"  # the name of the fixture it breaks

    def __str__(self):
        return f"{self.check.__name__}: {self.how}"


def assert_rejected(case, request):
    """Run `case.check` with `case.document` broken (and what derives from it
    computed again from the broken copy), every other argument the fixture of
    its name."""
    original = request.getfixturevalue(case.document)
    try:
        broken = case.mutate(copy.deepcopy(original))
    except (KeyError, IndexError) as e:
        pytest.fail(f"the case breaks what {case.document} no longer has ({e!r}): update it to what is there now")
    assert broken != original, f"the mutation {case.how!r} changed nothing"
    arguments = {}
    for name in inspect.signature(case.check).parameters:
        source, derive = DERIVED.get(name, (None, None))
        if name == case.document:
            arguments[name] = broken
        elif source == case.document:
            arguments[name] = derive(broken)
        else:
            arguments[name] = request.getfixturevalue(name)
    problems = case.check(**arguments)
    assert any(case.expect in problem for problem in problems), (
        f"{case.check.__name__} should report {case.expect!r} when {case.how}, but reported {problems}"
    )


# ---- mutations: a dotted path names a key (or a list index) from the root ----


def _parent(document, path):
    *parents, last = path.split(".")
    node = document
    for key in parents:
        node = node[int(key)] if isinstance(node, list) else node[key]
    return node, (int(last) if isinstance(node, list) else last)


def drop(path):
    """Remove the key (or list item) at `path`; a path that does not exist is an error."""

    def mutate(document):
        node, key = _parent(document, path)
        del node[key]
        return document

    return mutate


def put(path, value):
    """Set the value at `path` (its parent must exist)."""

    def mutate(document):
        node, key = _parent(document, path)
        node[key] = value
        return document

    return mutate


def edit(path, change):
    """Replace the value at `path` (which must exist) with `change(value)`."""

    def mutate(document):
        node, key = _parent(document, path)
        node[key] = change(node[key])
        return document

    return mutate


def replace(old, new):
    """In a text document, or with edit() in a string value: replace `old`, which must be there."""

    def mutate(text):
        assert old in text, f"{old!r} is not in the text to break"
        return text.replace(old, new)

    return mutate
