"""Routing before anything else: unknown paths, other methods, body size, content type."""

import pytest
from helpers import AUTHORIZATION, MAX_BODY_BYTES, assert_error, fresh_id, padded

WITH_AND_WITHOUT_TOKEN = pytest.mark.parametrize("authorization", [AUTHORIZATION, None], ids=["token", "no token"])
NOT_ALLOWED = (405, 40501, "method not allowed; use POST", {"allow": "POST"})


@pytest.mark.parametrize(
    "method, path",
    [("POST", "/plant"), ("POST", "/plants/"), ("POST", "/plants/1"), ("GET", "/")]
    + [("POST", "/PLANTS"), ("DELETE", "/anything")],
)
@WITH_AND_WITHOUT_TOKEN
def test_a_path_other_than_plants_is_a_404_before_anything_else(api, method, path, authorization):
    api.refused(404, 40401, "no such resource", method=method, path=path, authorization=authorization)


def test_the_query_string_does_not_change_the_route(api):
    api.accepted(path="/plants?dry_run=1")


@pytest.mark.parametrize("method", ["GET", "PUT", "PATCH", "DELETE", "TRACE", "OPTIONS"])
@WITH_AND_WITHOUT_TOKEN
def test_a_method_other_than_post_is_a_405_with_allow_before_authentication(api, method, authorization):
    api.refused(*NOT_ALLOWED, method=method, authorization=authorization)


def test_head_is_a_405_with_the_headers_and_no_body(api):
    assert_error(api.call("HEAD", body=None, content_type=None), *NOT_ALLOWED, head=True)


PLANT_ID = fresh_id()
OVERSIZED = padded({"id": PLANT_ID, "name": "Cactus"}, MAX_BODY_BYTES + 1)


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
    api.refused(415, 41501, "Content-Type must be application/json", content_type=content_type)
