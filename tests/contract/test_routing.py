"""Routing before anything else: unknown paths, other methods, body size, content type."""

import json

import pytest
from helpers import MAX_BODY_BYTES, VALID, assert_error, assert_json, fresh_id

WITH_AND_WITHOUT_TOKEN = pytest.mark.parametrize("token", [VALID, None], ids=["token", "no token"])


@pytest.mark.parametrize(
    "method, path",
    [("POST", "/plant"), ("POST", "/plants/"), ("POST", "/plants/1"), ("GET", "/")]
    + [("POST", "/PLANTS"), ("DELETE", "/anything")],
)
@WITH_AND_WITHOUT_TOKEN
def test_a_path_other_than_plants_is_a_404_before_anything_else(api, method, path, token):
    plant_id = fresh_id()
    response = api.call(method, path, body={"id": plant_id, "name": "Fern"}, token=token)
    assert_error(response, 404, 40401, "no such resource")
    api.assert_nothing_stored(plant_id)


def test_the_query_string_does_not_change_the_route(api):
    plant_id = fresh_id()
    assert_json(api.call(path="/plants?dry_run=1", body={"id": plant_id, "name": "Fern"}), 200, {"name": "Fern"})
    api.assert_stored(plant_id, "Fern")


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "TRACE", "OPTIONS"])
@WITH_AND_WITHOUT_TOKEN
def test_a_method_other_than_post_is_a_405_with_allow_before_authentication(api, method, token):
    plant_id = fresh_id()
    response = api.call(method, body={"id": plant_id, "name": "Fern"}, token=token)
    assert_error(response, 405, 40501, "method not allowed; use POST", {"allow": "POST"})
    api.assert_nothing_stored(plant_id)


def test_head_is_a_405_with_the_headers_and_no_body(api):
    response = api.call("HEAD", body=None, content_type=None)
    assert_error(response, 405, 40501, "method not allowed; use POST", {"allow": "POST"}, head=True)


PLANT_ID = fresh_id()
OVERSIZED = json.dumps({"id": PLANT_ID, "name": "Cactus"}).encode()
OVERSIZED = OVERSIZED[:-1] + b" " * (MAX_BODY_BYTES + 1 - len(OVERSIZED)) + b"}"


@pytest.mark.parametrize(
    "body, content_type",
    [
        pytest.param(OVERSIZED, "application/json", id="valid JSON"),
        pytest.param(b"x" * (MAX_BODY_BYTES * 4), "application/json", id="not JSON"),
        pytest.param(OVERSIZED, "text/plain", id="a wrong content type"),
    ],
)
def test_a_body_over_16384_bytes_is_a_413_before_parsing(api, body, content_type):
    assert len(OVERSIZED) == MAX_BODY_BYTES + 1
    assert_error(api.call(body=body, content_type=content_type), 413, 41301, "request body exceeds 16384 bytes")
    api.assert_nothing_stored(PLANT_ID)


NOT_JSON = [None, "text/plain", "application/x-www-form-urlencoded", "application/jsonx", "application/json-patch+json"]
NOT_JSON += ["application/json; charset=iso-8859-1", "application/json; charset=utf-16", ""]


@pytest.mark.parametrize("content_type", NOT_JSON)
def test_a_content_type_other_than_json_is_a_415(api, content_type):
    plant_id = fresh_id()
    response = api.call(body={"id": plant_id, "name": "Fern"}, content_type=content_type)
    assert_error(response, 415, 41501, "Content-Type must be application/json")
    api.assert_nothing_stored(plant_id)
