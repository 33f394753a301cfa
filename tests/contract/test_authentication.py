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


REFUSED = [  # (label, Authorization, refusal)
    ("no Authorization header", None, MISSING),
    ("another scheme", "Basic cGxhbnQ6c3RvcmU=", MISSING),
    ("another scheme with the token", "Token plant-store-dev-token", MISSING),
    ("Bearer alone", "Bearer", MISSING),
    ("Bearer and a space", "Bearer ", MISSING),
    ("bearer alone", "bearer", MISSING),
    ("another token", "Bearer not-the-dev-token", INVALID),
    ("the token and more", f"Bearer {TOKEN}x", INVALID),
    ("not RFC 6750 b64token syntax", "Bearer plant store", INVALID),
    ("JWT-shaped garbage", "Bearer a.b.c", INVALID),
    ("a JWT with scope plants:read", bearer_jwt(scope="plants:read"), SCOPE),
    ("a JWT with scope plants:write-all openid", bearer_jwt(scope="plants:write-all openid"), SCOPE),
    ("a JWT with an empty scope", bearer_jwt(scope=""), SCOPE),
    ("an expired JWT", bearer_jwt(expires_in=-3600), INVALID),
    ("a JWT with a bad signature", bearer_jwt(forge=True), INVALID),
    ("a JWT for another audience", bearer_jwt(aud="someone-else"), INVALID),
    ("a JWT from another issuer", bearer_jwt(iss="http://127.0.0.1:1"), INVALID),
]


@pytest.mark.parametrize("value, refusal", [case[1:] for case in REFUSED], ids=[case[0] for case in REFUSED])
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
