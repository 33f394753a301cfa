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
    40901, 41301, 41501, 50001, 50301,
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

echo "check_deploy: all checks passed"
