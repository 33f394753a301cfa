"""Authentication: the static token, JWTs from the loopback issuer, and the challenges."""

import pytest
from helpers import (
    CHALLENGE,
    INSUFFICIENT_SCOPE,
    INVALID_TOKEN,
    JWT_SCOPE,
    MAX_BODY_BYTES,
    TOKEN,
    assert_error,
    assert_json,
    fresh_id,
)
from jwt.utils import base64url_decode, base64url_encode


def assert_refused(api, authorization, status, code, message, challenge):
    plant_id = fresh_id()
    headers = {} if authorization is None else {"Authorization": authorization}
    response = api.call(body={"id": plant_id, "name": "Fern"}, headers=headers, token=None)
    assert_error(response, status, code, message, {"www-authenticate": challenge})
    api.assert_nothing_stored(plant_id)


def test_no_authorization_header_is_a_401_40101(api):
    assert_refused(api, None, 401, 40101, "missing bearer token", CHALLENGE)


@pytest.mark.parametrize(
    "value", ["Basic cGxhbnQ6c3RvcmU=", "Token plant-store-dev-token", "Bearer", "Bearer ", "bearer"]
)
def test_another_scheme_or_an_empty_bearer_is_a_401_40101(api, value):
    assert_refused(api, value, 401, 40101, "missing bearer token", CHALLENGE)


@pytest.mark.parametrize(
    "value",
    [
        "Bearer not-the-dev-token",
        f"Bearer {TOKEN}x",
        "Bearer plant store",  # not RFC 6750 b64token syntax
        "Bearer a.b.c",  # JWT-shaped garbage
    ],
)
def test_a_token_that_is_not_accepted_is_a_401_40102(api, value):
    assert_refused(api, value, 401, 40102, "invalid bearer token", INVALID_TOKEN)


@pytest.mark.parametrize("scheme", ["bearer", "BEARER", "BeArEr"])
def test_the_scheme_name_is_case_insensitive(api, scheme):
    plant_id = fresh_id()
    headers = {"Authorization": f"{scheme} {TOKEN}"}
    assert_json(api.call(body={"id": plant_id, "name": "Fern"}, token=None, headers=headers), 200, {"name": "Fern"})
    api.assert_stored(plant_id, "Fern")


PLANT_ID = fresh_id()


@pytest.mark.parametrize(
    "body, content_type",
    [
        pytest.param(b"{", "application/json", id="invalid JSON"),
        pytest.param({"id": "1", "name": None}, "application/json", id="a wrong type"),
        pytest.param(b"x" * (MAX_BODY_BYTES + 1), "application/json", id="an oversized body"),
        pytest.param({"id": PLANT_ID, "name": "Fern"}, "text/plain", id="a wrong content type"),
        pytest.param({"id": PLANT_ID, "name": "Fern"}, None, id="no content type"),
    ],
)
def test_authentication_comes_before_anything_about_the_body(api, body, content_type):
    response = api.call(body=body, token=None, content_type=content_type)
    assert_error(response, 401, 40101, "missing bearer token", {"www-authenticate": CHALLENGE})
    api.assert_nothing_stored(PLANT_ID)


def test_a_jwt_from_the_issuer_with_the_scope_is_accepted(api, issuer):
    plant_id = fresh_id()
    assert_json(api.call(body={"id": plant_id, "name": "Orchid"}, token=issuer.token()), 200, {"name": "Orchid"})
    api.assert_stored(plant_id, "Orchid")


@pytest.mark.parametrize("scope", ["plants:read", "plants:write-all openid", ""])
def test_a_jwt_without_the_scope_is_a_403_40301(api, issuer, scope):
    message = f"token lacks the required scope `{JWT_SCOPE}`"
    assert_refused(api, f"Bearer {issuer.token(scope=scope)}", 403, 40301, message, INSUFFICIENT_SCOPE)


def forged(token):
    """The token with the last bit of its signature flipped."""
    head, claims, signature = token.split(".")
    raw = bytearray(base64url_decode(signature))
    raw[-1] ^= 1
    return f"{head}.{claims}.{base64url_encode(bytes(raw)).decode()}"


@pytest.mark.parametrize(
    "make",
    [
        pytest.param(lambda issuer: issuer.token(expires_in=-3600), id="expired"),
        pytest.param(lambda issuer: forged(issuer.token()), id="bad signature"),
        pytest.param(lambda issuer: issuer.token(aud="someone-else"), id="another audience"),
        pytest.param(lambda issuer: issuer.token(iss="http://127.0.0.1:1"), id="another issuer"),
    ],
)
def test_an_expired_forged_or_foreign_jwt_is_a_401_40102(api, issuer, make):
    assert_refused(api, f"Bearer {make(issuer)}", 401, 40102, "invalid bearer token", INVALID_TOKEN)
