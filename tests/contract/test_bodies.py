"""Bad bodies: each a 400 with its code and exact message, and nothing written."""

import base64
import json

import pytest
from helpers import I64_MAX, I64_MIN, ROOT, TOKEN, assert_error, fresh_id, header

i = fresh_id()
LENGTH = "field `{}` must be {} characters"
WHITESPACE = "field `{}` must not be only whitespace"
CONTROL = "field `{}` must not contain control characters"
INTEGER, STRING = "field `id` must be an integer", "field `{}` must be a string"
ID_INT64 = f"field `id` must be an integer from {I64_MIN} to {I64_MAX}"
OBJECT = "request body must be a JSON object"


def not_json(error, column):
    """The message of a syntax error `column` characters into a body after the id `i` (its digits vary)."""
    return f"request body is not valid JSON: {error} at line 1 column {column + len(str(i))}"


BAD_BODIES = [  # (label, body, code, message), all under the one fresh id `i`
    ("empty", b"", 40001, "request body is empty"),
    ("only whitespace", b"  \n", 40001, "request body is not valid JSON: EOF while parsing a value at line 2 column 0"),
    ("a missing comma", f'{{"id": {i} "name": "Fern"}}', 40001, not_json("expected `,` or `}`", 9)),
    ("trailing garbage", f'{{"id": {i}, "name": "Fern"}} x', 40001, not_json("trailing characters", 26)),
    ("an array", b"[1, 2]", 40001, OBJECT),
    ("a string", b'"plant"', 40001, OBJECT),
    ("null", b"null", 40001, OBJECT),
    ("a duplicate field", f'{{"id": {i}, "name": "a", "name": "b"}}', 40001, "duplicate field `name`"),
    ("a duplicate id", f'{{"id": {i}, "id": {i}, "name": "a"}}', 40001, "duplicate field `id`"),
    ("an unknown field", {"id": i, "name": "Fern", "colour": "green"}, 40005, "unknown field `colour`"),
    ("an unknown field before a missing one", {"id": i, "Name": "Fern"}, 40005, "unknown field `Name`"),
    ("no name", {"id": i}, 40002, "missing required field `name`"),
    ("no id", {"name": "Fern"}, 40002, "missing required field `id`"),
    ("an empty object", {}, 40002, "missing required field `id`"),
    ("id 1.0", f'{{"id": {i}.0, "name": "Fern"}}', 40003, INTEGER),
    ("id 1e3", f'{{"id": {i}e0, "name": "Fern"}}', 40003, INTEGER),
    ("id 1E+2", '{"id": 1E+2, "name": "Fern"}', 40003, INTEGER),
    ("id -0.0", '{"id": -0.0, "name": "Fern"}', 40003, INTEGER),
    ("id as a string", {"id": str(i), "name": "Fern"}, 40003, INTEGER),
    ("id null", {"id": None, "name": "Fern"}, 40003, INTEGER),
    ("id true", {"id": True, "name": "Fern"}, 40003, INTEGER),
    ("id above int64", {"id": I64_MAX + 1, "name": "Fern"}, 40004, ID_INT64),
    ("id below int64", {"id": I64_MIN - 1, "name": "Fern"}, 40004, ID_INT64),
    ("name null", {"id": i, "name": None}, 40003, STRING.format("name")),
    ("name a number", {"id": i, "name": 5}, 40003, STRING.format("name")),
    ("name an array", {"id": i, "name": ["Fern"]}, 40003, STRING.format("name")),
    ("name empty", {"id": i, "name": ""}, 40004, LENGTH.format("name", "1 to 256")),
    ("name 257 characters", {"id": i, "name": "n" * 257}, 40004, LENGTH.format("name", "1 to 256")),
    ("name only spaces", {"id": i, "name": "   "}, 40004, WHITESPACE.format("name")),
    ("name only Unicode whitespace", {"id": i, "name": "\u3000\u2003"}, 40004, WHITESPACE.format("name")),
    ("name with NUL", {"id": i, "name": "a\u0000b"}, 40004, CONTROL.format("name")),
    ("name with a newline", {"id": i, "name": "a\nb"}, 40004, CONTROL.format("name")),
    ("name with DEL", {"id": i, "name": "a\u007f"}, 40004, CONTROL.format("name")),
    ("tag null", {"id": i, "name": "Fern", "tag": None}, 40003, STRING.format("tag")),
    ("tag a number", {"id": i, "name": "Fern", "tag": 1}, 40003, STRING.format("tag")),
    ("tag empty", {"id": i, "name": "Fern", "tag": ""}, 40004, LENGTH.format("tag", "1 to 64")),
    ("tag 65 characters", {"id": i, "name": "Fern", "tag": "t" * 65}, 40004, LENGTH.format("tag", "1 to 64")),
    ("tag only whitespace", {"id": i, "name": "Fern", "tag": " "}, 40004, WHITESPACE.format("tag")),
    ("tag with a tab", {"id": i, "name": "Fern", "tag": "a\tb"}, 40004, CONTROL.format("tag")),
    ("id checked before name", {"id": "x", "name": ""}, 40003, INTEGER),
    ("name checked before tag", {"id": i, "name": "", "tag": ""}, 40004, LENGTH.format("name", "1 to 256")),
]


@pytest.mark.parametrize("body, code, message", [case[1:] for case in BAD_BODIES], ids=[case[0] for case in BAD_BODIES])
def test_bad_bodies_are_a_400_with_their_code_and_nothing_is_written(api, body, code, message):
    assert_error(api.call(body=body), 400, code, message)
    api.assert_nothing_stored(i, 0, 100)


NON_UTF8_ID = fresh_id()
NON_UTF8 = f'{{"id":{NON_UTF8_ID},"name":"\xff"}}'.encode("latin-1")  # one byte not UTF-8


def test_a_non_utf8_body_gets_40001_from_the_function_itself(api):
    # Sent as a base64 event straight to the function through the Lambda
    # invoke API that `cargo lambda watch` emulates: what API Gateway
    # does with a body it does not treat as text.
    event = json.loads((ROOT / "events" / "create-http-api.json").read_text(encoding="utf-8"))
    event["headers"].update({"authorization": f"Bearer {TOKEN}", "content-length": str(len(NON_UTF8))})
    event.update(body=base64.b64encode(NON_UTF8).decode(), isBase64Encoded=True)
    url = f"{api.url}/2015-03-31/functions/plant-store/invocations"  # the binary's name
    response = api.session.post(url, json=event)
    answer = response.json()
    assert response.status_code == 200, answer
    assert answer["statusCode"] == 400, answer
    headers = {k.lower(): v for k, v in answer["headers"].items()}
    assert headers.get("content-type") == "application/json", answer
    assert headers.get("cache-control") == "no-store", answer
    message = f"request body is not valid JSON: invalid unicode code point at line 1 column {len(NON_UTF8) - 2}"
    assert json.loads(answer["body"]) == {"error": 40001, "message": message}
    api.assert_nothing_stored(NON_UTF8_ID)


def test_a_non_utf8_body_over_http_gets_the_emulators_own_500(api):
    # `cargo lambda watch` cannot put these bytes in an event and answers 500
    # itself, never invoking the function (no X-Request-Id, not our content
    # type): why scripts/schemathesis_hooks.py keeps them out of schemathesis's
    # run. Once the emulator passes them on, expect 400/40001 here and drop that filter.
    response = api.call(body=NON_UTF8)
    assert response.status_code == 500, response.content
    assert header(response, "x-request-id") == [], response.headers
    assert header(response, "content-type") != ["application/json"], response.headers
    api.assert_nothing_stored(NON_UTF8_ID)
