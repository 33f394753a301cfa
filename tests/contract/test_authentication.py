"""Authentication: the static token, JWTs from the loopback issuer, and the challenges."""

import pytest
from helpers import JWT_SCOPE, MAX_BODY_BYTES, TOKEN, assert_error, fresh_id
from jwt.utils import base64url_decode, base64url_encode

MISSING = (401, 40101, "missing bearer token", {"www-authenticate": 'Bearer realm="plants"'})
INVALID = (401, 40102, "invalid bearer token", {"www-authenticate": 'Bearer realm="plants", error="invalid_token"'})
CHALLENGE = f'Bearer realm="plants", error="insufficient_scope", scope="{JWT_SCOPE}"'
SCOPE = (403, 40301, f"token lacks the required scope `{JWT_SCOPE}`", {"www-authenticate": CHALLENGE})


def bearer_jwt(forge=False, **claims):
    """The Authorization of a token the issuer mints; with `forge`, the last bit of its signature flipped."""

    def make(issuer):
        head, body, signature = issuer.token(**claims).split(".")
        raw = bytearray(base64url_decode(signature))
        raw[-1] ^= 1 if forge else 0
        return f"Bearer {head}.{body}.{base64url_encode(bytes(raw)).decode()}"

    return make


REFUSED = [  # pytest.param(Authorization, refusal, id=label)
    pytest.param(None, MISSING, id="no Authorization header"),
    pytest.param("Basic cGxhbnQ6c3RvcmU=", MISSING, id="another scheme"),
    pytest.param("Token plant-store-dev-token", MISSING, id="another scheme with the token"),
    pytest.param("Bearer", MISSING, id="Bearer alone"),
    pytest.param("Bearer ", MISSING, id="Bearer and a space"),
    pytest.param("bearer", MISSING, id="bearer alone"),
    pytest.param("Bearer not-the-dev-token", INVALID, id="another token"),
    pytest.param(f"Bearer {TOKEN}x", INVALID, id="the token and more"),
    pytest.param("Bearer plant store", INVALID, id="not RFC 6750 b64token syntax"),
    pytest.param("Bearer a.b.c", INVALID, id="JWT-shaped garbage"),
    pytest.param(bearer_jwt(scope="plants:read"), SCOPE, id="a JWT with scope plants:read"),
    pytest.param(bearer_jwt(scope="plants:write-all openid"), SCOPE, id="a JWT with scope plants:write-all openid"),
    pytest.param(bearer_jwt(scope=""), SCOPE, id="a JWT with an empty scope"),
    pytest.param(bearer_jwt(expires_in=-3600), INVALID, id="an expired JWT"),
    pytest.param(bearer_jwt(forge=True), INVALID, id="a JWT with a bad signature"),
    pytest.param(bearer_jwt(aud="someone-else"), INVALID, id="a JWT for another audience"),
    pytest.param(bearer_jwt(iss="http://127.0.0.1:1"), INVALID, id="a JWT from another issuer"),
]


@pytest.mark.parametrize("value, refusal", REFUSED)
def test_a_request_without_an_accepted_token_is_refused_with_its_challenge(api, issuer, value, refusal):
    api.refused(*refusal, authorization=value(issuer) if callable(value) else value)


@pytest.mark.parametrize(
    "value",
    [f"bearer {TOKEN}", f"BEARER {TOKEN}", f"BeArEr {TOKEN}", bearer_jwt()],
    ids=["bearer", "BEARER", "BeArEr", "a JWT from the issuer with the scope"],
)
def test_the_scheme_name_in_any_case_and_a_jwt_with_the_scope_are_accepted(api, issuer, value):
    api.accepted(authorization=value(issuer) if callable(value) else value)


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
    assert_error(api.call(body=body, authorization=None, content_type=content_type), *MISSING)
    api.assert_nothing_stored(PLANT_ID)
