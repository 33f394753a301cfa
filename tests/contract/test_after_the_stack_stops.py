"""Last: the stack stops and frees both ports, then the function's EMF documents are checked."""

import json
import re

import jsonschema
import pytest
from helpers import ROOT


@pytest.mark.phase(2)
def test_the_stack_stops_and_both_ports_are_free_again(stack):
    assert stack.stop() == []


def is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def emf_problems(document, validator):
    """The schema's errors, then what JSON Schema cannot say (the EMF specification's
    target members): every dimension is a string member, every metric a number member,
    and every number member is a declared metric."""
    problems = [f"{error.json_path}: {error.message}" for error in validator.iter_errors(document)]
    directives = document.get("_aws", {}).get("CloudWatchMetrics", [])
    dimensions = {name for directive in directives for names in directive.get("Dimensions", []) for name in names}
    metrics = {metric.get("Name") for directive in directives for metric in directive.get("Metrics", [])}
    problems += [f"dimension {d} is not a string member" for d in dimensions if not isinstance(document.get(d), str)]
    problems += [
        f"metric {m} has no number member: {document.get(m)!r}" for m in metrics if not is_number(document.get(m))
    ]
    if undeclared := {key for key, value in document.items() if is_number(value)} - metrics:
        problems.append(f"numbers not declared as metrics: {sorted(undeclared)}")
    return problems


@pytest.mark.phase(2)
def test_every_emf_document_matches_the_schema_one_per_request(stack):
    """Every EMF document the function wrote while the tests ran, against
    tests/schemas/emf.schema.json and the EMF specification's
    cross-references, and one document per request line."""
    assert stack.stop() == []  # every line written
    schema = json.loads((ROOT / "tests" / "schemas" / "emf.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    with open(stack.log_path, encoding="utf-8", errors="replace") as f:
        lines = [re.sub(r"\x1b\[[0-9;]*m", "", line) for line in f]  # colours, if the log has them
    requests = sum(1 for line in lines if re.search(r"\bINFO\b.*\brequest request_id=", line))
    documents, problems = [line[line.find('{"_aws":') :] for line in lines if '{"_aws":' in line], []
    for document in documents:
        try:
            problems += emf_problems(json.loads(document), validator)
        except ValueError as err:
            problems.append(f"not one JSON object ({err}): {document.strip()[:200]}")
    assert requests > 0, "no request line in the stack's output"
    assert len(documents) == requests, f"{len(documents)} EMF documents for {requests} request lines"
    assert not problems, "; ".join(sorted(set(problems))[:5])
