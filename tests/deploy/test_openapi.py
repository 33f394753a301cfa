"""openapi.yaml: a valid OpenAPI 3.1 document whose errors, headers and examples agree with the error catalogue."""

import re

import pytest
from breakage import Broken, assert_rejected, drop, edit, put, replace
from documents import ROOT
from openapi_schema_validator import OAS31Validator, oas31_format_checker
from openapi_spec_validator import OpenAPIV31SpecValidator
from referencing import Registry, Resource
from referencing.jsonschema import DRAFT202012

# The error catalogue: every `error` code the function answers, one a line.
# Its first three digits are the HTTP status. Adding a code is one more line
# here, beside the code and openapi.yaml (CONTRIBUTING, "Adding an error code").
CATALOGUE = (
    40001,  # the body is not valid JSON, is empty, is not an object, or repeats a field
    40002,  # a required field is missing
    40003,  # a field has the wrong JSON type
    40004,  # a value is out of bounds
    40005,  # an unknown field is present
    40101,  # no Authorization header, or not the Bearer scheme
    40102,  # the bearer token is not accepted
    40301,  # the token lacks the required scope
    40401,  # no such resource
    40501,  # a method other than POST on /plants
    40901,  # the same id is stored with different content
    41301,  # the body is larger than 16384 bytes
    41501,  # Content-Type missing or not application/json
    50001,  # unexpected error
    50301,  # the store (or the issuer's keys) unavailable; Retry-After
    50302,  # the invocation's deadline came first; Retry-After
)
# The contract these tests describe: a contract change bumps info.version
# here too (README, "Versions").
CONTRACT = {
    "openapi": "3.1.0",
    "info.title": "OpenAPI Plant Store",
    "info.version": "1.0.0",
    "info.license.identifier": "MIT",
}
EVERY_RESPONSE_HEADERS = {"X-Request-Id", "Cache-Control", "X-Content-Type-Options"}
METHODS = {"get", "put", "post", "delete", "options", "head", "patch", "trace"}
JSON = "application/json"


# ---- reading the document: references and what each response declares ------


def _unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def _escape(token):
    return str(token).replace("~", "~0").replace("/", "~1")


def pointer(doc, ref):
    """The node a local reference (`#/components/...`) names; KeyError if none."""
    node = doc
    for token in ref[2:].split("/") if ref != "#" else []:
        token = _unescape(token)
        if isinstance(node, list) and token.isdigit() and int(token) < len(node):
            node = node[int(token)]
        elif isinstance(node, dict) and token in node:
            node = node[token]
        else:
            raise KeyError(ref)
    return node


def deref(doc, node, path):
    """Follow Reference Objects; the target and its path from the root."""
    while isinstance(node, dict) and "$ref" in node:
        ref = node["$ref"]
        node = pointer(doc, ref)
        path = tuple(_unescape(t) for t in ref[2:].split("/"))
    return node, path


def walk(node, path=()):
    yield node, path
    if isinstance(node, dict):
        for key, value in node.items():
            yield from walk(value, (*path, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            yield from walk(value, (*path, i))


def operations(doc):
    for route, item in doc.get("paths", {}).items():
        for method, op in item.items():
            if method in METHODS:
                yield f"{method.upper()} {route}", op, ("paths", route, method)


def responses(doc):
    """(where, status, response, its path) for each response of each operation, dereferenced."""
    for where, op, op_path in operations(doc):
        for status, response in op.get("responses", {}).items():
            response, path = deref(doc, response, (*op_path, "responses", status))
            yield f"{where} {status}", str(status), response, path


def examples(doc, media, media_path):
    """(name, value) of each example of a Media Type Object."""
    found = [("example", media["example"])] if "example" in media else []
    for name, example in (media.get("examples") or {}).items():
        example, _ = deref(doc, example, (*media_path, "examples", name))
        if "value" in example:
            found.append((name, example["value"]))
    return found


def declared_codes(doc, schema, schema_path):
    """The `error` values a response schema allows (enum or const in its allOf)."""
    schema, schema_path = deref(doc, schema, schema_path)
    codes = set()
    for sub in schema.get("allOf", []):
        sub, _ = deref(doc, sub, schema_path)
        error = (sub.get("properties") or {}).get("error") or {}
        codes.update(error.get("enum", []))
        if "const" in error:
            codes.add(error["const"])
    return codes


def error_bodies(doc):
    """(where, status, JSON media, its path) of each error response with a JSON body."""
    for where, status, response, path in responses(doc):
        media = (response.get("content") or {}).get(JSON)
        if not status.startswith("2") and media is not None:
            yield where, status, media, (*path, "content", JSON)


def declared(doc):
    """Each code the error responses declare, and where: (where, status) pairs."""
    codes = {}
    for where, status, media, path in error_bodies(doc):
        for code in declared_codes(doc, media.get("schema", {}), (*path, "schema")):
            codes.setdefault(code, []).append((where, status))
    return codes


# ---- the properties ----------------------------------------------------------


def openapi_spec_validator_accepts_the_document_as_openapi_3_1(openapi):
    """What `openapi-spec-validator --schema 3.1 openapi.yaml` checks, every error listed."""
    validator = OpenAPIV31SpecValidator(openapi, base_uri=(ROOT / "openapi.yaml").as_uri())
    # The first line of each message; the rest repeats the schema's innards.
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message.splitlines()[0]}" for e in validator.iter_errors()]


def test_openapi_spec_validator_accepts_the_document_as_openapi_3_1(openapi):
    assert openapi_spec_validator_accepts_the_document_as_openapi_3_1(openapi) == []


def the_document_names_the_contract_and_its_version(openapi):
    problems = []
    for path, want in CONTRACT.items():
        got = openapi
        for key in path.split("."):
            got = got.get(key) if isinstance(got, dict) else None
        if got != want:
            problems.append(f"{path} is {got!r}, expected {want!r}")
    return problems


def test_the_document_names_the_contract_and_its_version(openapi):
    assert the_document_names_the_contract_and_its_version(openapi) == []


def every_reference_points_at_something_inside_the_document(openapi):
    problems = []
    for node, path in walk(openapi):
        if isinstance(node, dict) and isinstance(node.get("$ref"), str):
            ref, where = node["$ref"], "/".join(map(str, path))
            if not ref.startswith("#"):
                problems.append(f"external $ref at {where}: {ref}")
                continue
            try:
                pointer(openapi, ref)
            except KeyError:
                problems.append(f"dangling $ref at {where}: {ref}")
    return problems


def test_every_reference_points_at_something_inside_the_document(openapi):
    assert every_reference_points_at_something_inside_the_document(openapi) == []


def every_response_has_a_json_body(openapi):
    bodies = ((where, response.get("content") or {}) for where, _, response, _ in responses(openapi))
    return [f"{where}: no {JSON} content" for where, content in bodies if JSON not in content]


def test_every_response_has_a_json_body(openapi):
    assert every_response_has_a_json_body(openapi) == []


def every_error_response_declares_its_codes(openapi):
    return [
        f"{where}: the schema declares no `error` codes"
        for where, _, media, path in error_bodies(openapi)
        if not declared_codes(openapi, media.get("schema", {}), (*path, "schema"))
    ]


def test_every_error_response_declares_its_codes(openapi):
    assert every_error_response_declares_its_codes(openapi) == []


def every_error_code_starts_with_its_status(openapi):
    return [
        f"{where}: code {code} does not start with the status {status}"
        for code, places in declared(openapi).items()
        for where, status in places
        if str(code)[:3] != status
    ]


def test_every_error_code_starts_with_its_status(openapi):
    assert every_error_code_starts_with_its_status(openapi) == []


def the_responses_declare_exactly_the_catalogue(openapi):
    codes = set(declared(openapi))
    problems = [f"catalogue code {c} is declared by no response" for c in sorted(set(CATALOGUE) - codes)]
    return problems + [f"code {c} is declared but not in the catalogue" for c in sorted(codes - set(CATALOGUE))]


def test_the_responses_declare_exactly_the_catalogue(openapi):
    assert the_responses_declare_exactly_the_catalogue(openapi) == []


def the_description_table_lists_exactly_the_catalogue(openapi):
    """info.description's table: rows that start with `| 40001 | 400 |`."""
    description = openapi.get("info", {}).get("description", "")
    rows = re.findall(r"^\|\s*(\d{5})\s*\|\s*(\d{3})\s*\|", description, re.M)
    listed = {int(code) for code, status in rows if code[:3] == status}
    problems = [f"the catalogue table in info.description lacks {c}" for c in sorted(set(CATALOGUE) - listed)]
    return problems + [
        f"the catalogue table in info.description lists {c}, not a catalogue code"
        for c in sorted(listed - set(CATALOGUE))
    ]


def test_the_description_table_lists_exactly_the_catalogue(openapi):
    assert the_description_table_lists_exactly_the_catalogue(openapi) == []


def every_catalogue_code_has_a_response_example(openapi):
    shown = {
        value.get("error")
        for _, _, media, path in error_bodies(openapi)
        for _, value in examples(openapi, media, path)
        if isinstance(value, dict)
    }
    return [f"catalogue code {code} has no response example" for code in CATALOGUE if code not in shown]


def test_every_catalogue_code_has_a_response_example(openapi):
    assert every_catalogue_code_has_a_response_example(openapi) == []


def every_response_carries_the_headers_sent_on_every_response(openapi):
    problems = []
    for where, _, response, path in responses(openapi):
        headers = response.get("headers") or {}
        if missing := EVERY_RESPONSE_HEADERS - set(headers):
            problems.append(f"{where}: missing headers {sorted(missing)}")
        for name, header in headers.items():
            header, _ = deref(openapi, header, (*path, "headers", name))
            if header.get("required") is not True:
                problems.append(f"{where}: header {name} is not required: true")
    return problems


def test_every_response_carries_the_headers_sent_on_every_response(openapi):
    assert every_response_carries_the_headers_sent_on_every_response(openapi) == []


def every_example_matches_its_schema(openapi):
    """Request, response and header examples, each validated against its
    schema by the OpenAPI 3.1 dialect (JSON Schema 2020-12 and OpenAPI's formats)."""
    base = "urn:plant-store:openapi"
    registry = Registry().with_resource(base, Resource.from_contents(openapi, default_specification=DRAFT202012))

    def mismatches(value, schema_path, where):
        ref = base + "#/" + "/".join(_escape(t) for t in schema_path)
        validator = OAS31Validator({"$ref": ref}, registry=registry, format_checker=oas31_format_checker)
        errors = sorted(validator.iter_errors(value), key=str)
        return [f"{where}: example {value!r} does not match its schema: {e.message}" for e in errors]

    def media_examples(media, media_path, where):
        if "schema" not in media:
            return []
        return [
            problem
            for name, value in examples(openapi, media, media_path)
            for problem in mismatches(value, (*media_path, "schema"), f"{where} example {name}")
        ]

    problems = []
    for where, op, op_path in operations(openapi):
        body, body_path = deref(openapi, op.get("requestBody", {}), (*op_path, "requestBody"))
        for media_type, media in (body.get("content") or {}).items():
            problems += media_examples(media, (*body_path, "content", media_type), f"{where} request {media_type}")
    for where, _, response, path in responses(openapi):
        for name, header in (response.get("headers") or {}).items():
            header, header_path = deref(openapi, header, (*path, "headers", name))
            if "example" in header and "schema" in header:
                problems += mismatches(header["example"], (*header_path, "schema"), f"{where} header {name}")
        if media := (response.get("content") or {}).get(JSON):
            problems += media_examples(media, (*path, "content", JSON), where)
    return problems


def test_every_example_matches_its_schema(openapi):
    assert every_example_matches_its_schema(openapi) == []


RESPONSES = "components.responses"
BAD_REQUEST_CODES = f"{RESPONSES}.BadRequest.content.application/json.schema.allOf.1.properties.error.enum"
BROKEN = [
    Broken(
        openapi_spec_validator_accepts_the_document_as_openapi_3_1,
        "an operation id that is a number",
        put("paths./plants.post.operationId", 42),
        'paths//plants/post/operationId: 42 is not of type "string"',
        document="openapi",
    ),
    Broken(
        the_document_names_the_contract_and_its_version,
        "a contract version the tests do not describe",
        put("info.version", "1.1.0"),
        "info.version is '1.1.0', expected '1.0.0'",
        document="openapi",
    ),
    Broken(
        every_reference_points_at_something_inside_the_document,
        "a reference to a response that does not exist",
        put("paths./plants.post.responses.404.$ref", "#/components/responses/Gone"),
        "dangling $ref at paths//plants/post/responses/404: #/components/responses/Gone",
        document="openapi",
    ),
    Broken(
        every_reference_points_at_something_inside_the_document,
        "a reference to another file",
        put("paths./plants.post.responses.404.$ref", "errors.yaml#/NotFound"),
        "external $ref",
        document="openapi",
    ),
    Broken(
        every_response_has_a_json_body,
        "a response without content",
        drop(f"{RESPONSES}.NotFound.content"),
        "POST /plants 404: no application/json content",
        document="openapi",
    ),
    Broken(
        every_error_response_declares_its_codes,
        "an error body that is any Error",
        put(f"{RESPONSES}.NotFound.content.application/json.schema", {"$ref": "#/components/schemas/Error"}),
        "POST /plants 404: the schema declares no `error` codes",
        document="openapi",
    ),
    Broken(
        every_error_code_starts_with_its_status,
        "a 409 code under 404",
        put(f"{RESPONSES}.NotFound.content.application/json.schema.allOf.1.properties.error.enum", [40901]),
        "POST /plants 404: code 40901 does not start with the status 404",
        document="openapi",
    ),
    Broken(
        the_responses_declare_exactly_the_catalogue,
        "a code no response declares",
        edit(BAD_REQUEST_CODES, lambda codes: codes[:-1]),
        "catalogue code 40005 is declared by no response",
        document="openapi",
    ),
    Broken(
        the_responses_declare_exactly_the_catalogue,
        "a code outside the catalogue",
        edit(BAD_REQUEST_CODES, lambda codes: [*codes, 40006]),
        "code 40006 is declared but not in the catalogue",
        document="openapi",
    ),
    Broken(
        the_description_table_lists_exactly_the_catalogue,
        "a row missing from the table",
        edit("info.description", replace("| 41501 | 415 |", "| 41501 | 413 |")),
        "the catalogue table in info.description lacks 41501",
        document="openapi",
    ),
    Broken(
        every_catalogue_code_has_a_response_example,
        "a code without an example",
        drop(f"{RESPONSES}.BadRequest.content.application/json.examples.unknownField"),
        "catalogue code 40005 has no response example",
        document="openapi",
    ),
    Broken(
        every_response_carries_the_headers_sent_on_every_response,
        "a response without Cache-Control",
        drop(f"{RESPONSES}.NotFound.headers.Cache-Control"),
        "POST /plants 404: missing headers ['Cache-Control']",
        document="openapi",
    ),
    Broken(
        every_response_carries_the_headers_sent_on_every_response,
        "an optional X-Request-Id",
        put("components.headers.X-Request-Id.required", False),
        "header X-Request-Id is not required: true",
        document="openapi",
    ),
    Broken(
        every_example_matches_its_schema,
        "a request example with a number for a name",
        put("paths./plants.post.requestBody.content.application/json.examples.withTag.value.name", 42),
        "POST /plants request application/json example withTag: example",
        document="openapi",
    ),
    Broken(
        every_example_matches_its_schema,
        "an id example beyond int64",
        put("paths./plants.post.requestBody.content.application/json.examples.largestId.value.id", 2**63),
        "example largestId",
        document="openapi",
    ),
    Broken(
        every_example_matches_its_schema,
        "a header example its schema refuses",
        put("components.headers.X-Request-Id.example", ""),
        "header X-Request-Id: example '' does not match its schema",
        document="openapi",
    ),
]


@pytest.mark.parametrize("case", BROKEN, ids=str)
def test_a_broken_copy_fails_its_check(case, request):
    assert_rejected(case, request)
