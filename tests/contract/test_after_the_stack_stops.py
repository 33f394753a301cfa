"""Last: the stack stops and frees both ports, then the function's EMF documents are checked."""

import json
import re

import jsonschema
import pytest
from helpers import ROOT


@pytest.mark.phase(2)
def test_the_stack_stops_and_both_ports_are_free_again(stack):
    assert stack.stop() == []


@pytest.mark.phase(2)
def test_every_emf_document_matches_the_schema_one_per_request(stack):
    """Every EMF document the function wrote while the tests ran, against
    tests/schemas/emf.schema.json and the EMF specification's
    cross-references, and one document per request line."""
    assert stack.stop() == []  # every line written
    schema = json.loads((ROOT / "tests" / "schemas" / "emf.schema.json").read_text(encoding="utf-8"))
    validator = jsonschema.Draft202012Validator(schema)
    requests, documents, problems = 0, 0, []
    with open(stack.log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # colours, if the log has them
            if re.search(r"\bINFO\b.*\brequest request_id=", line):
                requests += 1
            start = line.find('{"_aws":')
            if start < 0:
                continue
            documents += 1
            try:
                document = json.loads(line[start:])
            except ValueError as err:
                problems.append(f"not one JSON object ({err}): {line.strip()[:200]}")
                continue
            problems.extend(f"{error.json_path}: {error.message}" for error in validator.iter_errors(document))
            # What JSON Schema cannot say: every dimension is a string member,
            # every metric a number member (the specification's target members).
            declared = set()
            for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
                for dimension in (d for dimensions in directive.get("Dimensions", []) for d in dimensions):
                    if not isinstance(document.get(dimension), str):
                        problems.append(f"dimension {dimension} is not a string member")
                for metric in directive.get("Metrics", []):
                    declared.add(metric.get("Name"))
                    value = document.get(metric.get("Name"))
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        problems.append(f"metric {metric.get('Name')} has no number member: {value!r}")
            numbers = {k for k, v in document.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if numbers - declared:
                problems.append(f"numbers not declared as metrics: {sorted(numbers - declared)}")
    assert requests > 0, "no request line in the stack's output"
    assert documents == requests, f"{documents} EMF documents for {requests} request lines"
    assert not problems, "; ".join(sorted(set(problems))[:5])
