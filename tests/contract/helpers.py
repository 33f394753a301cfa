"""What the contract tests share: the HTTP client, the table, the issuer and the assertions."""

import itertools
import json
import re
import secrets
import sys
import threading
import time
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import jwt
import requests
from cryptography.hazmat.primitives.asymmetric import rsa

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "scripts"))
import local_stack  # noqa: E402  (the stack as a child process, DynamoDB Local's client)

HOST = local_stack.HOST
TOKEN, TABLE = local_stack.settings()
JWT_AUDIENCE = "plant-store-contract-tests"
JWT_SCOPE = "plants:write"  # the function's default PLANTS_JWT_SCOPE
JWT_KID = "contract-tests-1"
MAX_BODY_BYTES = 16384
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
AUTHORIZATION = f"Bearer {TOKEN}"  # the stack's static token
JSON = "application/json"

_IDS = itertools.count(secrets.randbelow(2**62) + 2**40)  # a random start: distinct between runs


def fresh_id():
    """An id no other test (and, in practice, no generated case) uses."""
    return next(_IDS)


class Issuer:
    """A throw-away OpenID Connect issuer on loopback (a fresh RSA key per run)
    that mints RS256 tokens. Served by the standard library's http.server:
    two fixed JSON documents need no web framework."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(self.key.public_key(), as_dict=True)
        documents = {"/jwks.json": {"keys": [jwk | {"use": "sig", "alg": "RS256", "kid": JWT_KID}]}}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                document = documents.get(self.path)
                body = json.dumps(document if document is not None else {"error": "not found"}).encode()
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", JSON)
                self.send_header("Cache-Control", "max-age=300")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        documents["/.well-known/openid-configuration"] = {"issuer": self.url, "jwks_uri": f"{self.url}/jwks.json"}
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def token(self, scope=JWT_SCOPE, expires_in=300, **overrides):
        now = int(time.time())
        claims = {"iss": self.url, "sub": "contract-tests", "aud": JWT_AUDIENCE, "iat": now, "nbf": now}
        claims.update(exp=now + expires_in, scope=scope, **overrides)
        return jwt.encode(claims, self.key, algorithm="RS256", headers={"typ": "at+jwt", "kid": JWT_KID})

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class Api:
    """The running stack as the tests see it: its front door and its table."""

    def __init__(self, stack):
        self.url = f"http://{HOST}:{stack.port}"
        self.session = requests.Session()
        self.session.trust_env = False  # loopback only: no proxy, no netrc
        # Only what the test says, plus Host and Content-Length: as http.client sends.
        self.session.headers = requests.structures.CaseInsensitiveDict({"Accept-Encoding": "identity"})
        self.table = local_stack.dynamodb_client(stack.dynamodb_port)

    def call(self, method="POST", path="/plants", body=None, authorization=AUTHORIZATION, content_type=JSON):
        """One request; None sends no Authorization or no Content-Type."""
        headers = {"Authorization": authorization, "Content-Type": content_type}
        body = json.dumps(body, ensure_ascii=False) if isinstance(body, (dict, list)) else body
        body = body.encode() if isinstance(body, str) else body
        sent = {name: value for name, value in headers.items() if value is not None}
        return self.session.request(method, self.url + path, data=body, headers=sent, timeout=60)

    def accepted(self, name="Fern", tag=None, plant_id=None, body=None, **call):
        """A new plant (under a fresh id unless given; as `body` if given) that must get 200
        with its name and tag and be stored exactly, created now; the response."""
        plant_id, started = fresh_id() if plant_id is None else plant_id, datetime.now(UTC)
        plant = {"name": name} | ({} if tag is None else {"tag": tag})
        response = self.call(body={"id": plant_id, **plant} if body is None else body, **call)
        assert_json(response, 200, plant)
        item = self.stored_item(plant_id) or {}
        created_at = item.get("created_at", {}).get("S", "")
        expected = {"id": {"N": str(plant_id)}, "created_at": {"S": created_at}}
        assert item == expected | {key: {"S": value} for key, value in plant.items()}, f"stored under id {plant_id}"
        assert RFC3339_UTC.match(created_at), created_at  # UTC: fromisoformat gives an aware time
        moment, skew = datetime.fromisoformat(created_at), timedelta(seconds=5)
        assert started - skew <= moment <= datetime.now(UTC) + skew, f"created_at {created_at} is not now"
        return response

    def refused(self, status, code, message, extra=None, **call):
        """A new plant under a fresh id that must get exactly this error and leave nothing stored."""
        plant_id = fresh_id()
        assert_error(self.call(body={"id": plant_id, "name": "Fern"}, **call), status, code, message, extra)
        self.assert_nothing_stored(plant_id)

    def stored_item(self, plant_id):
        """The item stored under `plant_id` (strongly consistent read), or None."""
        key = {"id": {"N": str(plant_id)}}
        return self.table.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")

    def assert_nothing_stored(self, *plant_ids):
        for plant_id in plant_ids:
            assert self.stored_item(plant_id) is None, f"id {plant_id} must not be stored"


def padded(plant, size):
    """`plant` as JSON, padded with JSON whitespace to exactly `size` bytes."""
    body = json.dumps(plant).encode()
    return body[:-1] + b" " * (size - len(body)) + b"}"


def header(response, name):
    """Every value of header `name` as received, in order ([] when absent)."""
    return response.raw.headers.getlist(name)


def show(response):
    return f"<{response.status_code} {dict(response.raw.headers.items())} {response.content[:300]!r}>"


def canonical_json(response):
    """The body as canonical JSON text, so that types count too (Python's
    40001.0 == 40001, but the contract's int32 is not 40001.0); a duplicate key fails."""

    def no_duplicates(pairs):
        assert len(pairs) == len(dict(pairs)), f"duplicate keys in {response.content!r}"
        return dict(pairs)

    return json.dumps(json.loads(response.content, object_pairs_hook=no_duplicates), sort_keys=True)


def assert_json(response, status, body, extra=None, head=False):
    """Exact status, the headers every response carries, exactly the `extra`
    headers of WWW-Authenticate, Allow and Retry-After, and the exact body."""
    assert response.status_code == status, show(response)
    for name, value in (("content-type", JSON), ("cache-control", "no-store"), ("x-content-type-options", "nosniff")):
        assert header(response, name) == [value], show(response)
    request_id = header(response, "x-request-id")
    assert len(request_id) == 1 and request_id[0].strip(), f"one non-empty X-Request-Id: {show(response)}"
    for name in ("www-authenticate", "allow", "retry-after"):
        assert header(response, name) == ([extra[name]] if name in (extra or {}) else []), f"{name}: {show(response)}"
    if head:
        assert response.content == b"", show(response)
    else:
        assert canonical_json(response) == json.dumps(body, sort_keys=True), show(response)


def assert_error(response, status, code, message, extra=None, head=False):
    assert_json(response, status, {"error": code, "message": message}, extra, head)
