"""What the contract tests share: the HTTP client, the table, the issuer and the assertions."""

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
from jwt.utils import to_base64url_uint

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
CHALLENGE = 'Bearer realm="plants"'
INVALID_TOKEN = 'Bearer realm="plants", error="invalid_token"'
INSUFFICIENT_SCOPE = f'Bearer realm="plants", error="insufficient_scope", scope="{JWT_SCOPE}"'
EXTRA_HEADERS = ("www-authenticate", "allow", "retry-after")
RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")
VALID = object()  # the stack's static token
JSON = "application/json"

_used_ids = set()


def fresh_id():
    """An id no other test (and, in practice, no generated case) uses."""
    while True:
        plant_id = secrets.randbelow(2**62) + 2**40
        if plant_id not in _used_ids:
            _used_ids.add(plant_id)
            return plant_id


class Issuer:
    """A throw-away OpenID Connect issuer on loopback (a fresh RSA key per run)
    that mints RS256 tokens. Served by the standard library's http.server:
    two fixed JSON documents need no web framework."""

    def __init__(self):
        self.key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        numbers = self.key.public_key().public_numbers()
        jwk = {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": JWT_KID}
        jwk.update(n=to_base64url_uint(numbers.n).decode(), e=to_base64url_uint(numbers.e).decode())
        documents = {"/jwks.json": {"keys": [jwk]}}

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                document = documents.get(self.path)
                body = json.dumps(document if document is not None else {"error": "not found"}).encode()
                self.send_response(200 if document is not None else 404)
                self.send_header("Content-Type", "application/json")
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
        self.port = stack.port
        self.url = f"http://{HOST}:{stack.port}"
        self.session = requests.Session()
        self.session.trust_env = False  # loopback only: no proxy, no netrc
        # Only what the test says, plus Host and Content-Length: as http.client sends.
        self.session.headers = requests.structures.CaseInsensitiveDict({"Accept-Encoding": "identity"})
        self.table = local_stack.dynamodb_client(stack.dynamodb_port)

    def call(self, method="POST", path="/plants", body=None, headers=None, token=VALID, content_type=JSON):
        """One request. `token=None` sends no Authorization; `content_type=None` no Content-Type."""
        sent = {}
        if token is not None:
            sent["Authorization"] = f"Bearer {TOKEN if token is VALID else token}"
        if content_type is not None:
            sent["Content-Type"] = content_type
        sent.update(headers or {})
        if isinstance(body, (dict, list)):
            body = json.dumps(body, ensure_ascii=False)
        if isinstance(body, str):
            body = body.encode()
        return self.session.request(method, self.url + path, data=body, headers=sent, timeout=60)

    def stored_item(self, plant_id):
        """The item stored under `plant_id` (strongly consistent read), or None."""
        key = {"id": {"N": str(plant_id)}}
        return self.table.get_item(TableName=TABLE, Key=key, ConsistentRead=True).get("Item")

    def assert_stored(self, plant_id, name, tag=None, after=None):
        item = self.stored_item(plant_id)
        assert item is not None, f"nothing stored under id {plant_id}"
        created_at = item.get("created_at", {}).get("S", "")
        expected = {"id": {"N": str(plant_id)}, "name": {"S": name}, "created_at": {"S": created_at}}
        if tag is not None:
            expected["tag"] = {"S": tag}
        assert item == expected
        assert RFC3339_UTC.match(created_at), created_at
        moment = datetime.fromisoformat(created_at)  # the regex above made sure it is UTC
        now = datetime.now(UTC)
        lower = (after or now - timedelta(minutes=5)) - timedelta(seconds=5)
        assert lower <= moment <= now + timedelta(seconds=5), f"created_at {created_at} is not now"
        return item

    def assert_nothing_stored(self, *plant_ids):
        for plant_id in plant_ids:
            assert self.stored_item(plant_id) is None, f"id {plant_id} must not be stored"


def header(response, name):
    """Every value of header `name` as received, in order ([] when absent)."""
    return response.raw.headers.getlist(name)


def show(response):
    return f"<{response.status_code} {dict(response.raw.headers.items())} {response.content[:300]!r}>"


def parse_json(response):
    def no_duplicates(pairs):
        keys = [key for key, _ in pairs]
        assert len(keys) == len(set(keys)), f"duplicate keys in {response.content!r}"
        return dict(pairs)

    return json.loads(response.content, object_pairs_hook=no_duplicates)


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


def assert_json(response, status, body, extra=None, head=False):
    """Exact status, the headers every response carries, exactly the `extra`
    headers of WWW-Authenticate, Allow and Retry-After, and the exact body."""
    assert response.status_code == status, show(response)
    assert header(response, "content-type") == ["application/json"], show(response)
    assert header(response, "cache-control") == ["no-store"], show(response)
    assert header(response, "x-content-type-options") == ["nosniff"], show(response)
    request_id = header(response, "x-request-id")
    assert len(request_id) == 1 and request_id[0].strip(), f"one non-empty X-Request-Id: {show(response)}"
    for name in EXTRA_HEADERS:
        assert header(response, name) == ([extra[name]] if name in (extra or {}) else []), f"{name}: {show(response)}"
    if head:
        assert response.content == b"", show(response)
    else:
        # Compared as canonical JSON text, so that types count too
        # (Python's 40001.0 == 40001, but the contract's int32 is not 40001.0).
        assert canonical(parse_json(response)) == canonical(body), show(response)


def assert_error(response, status, code, message, extra=None, head=False):
    assert_json(response, status, {"error": code, "message": message}, extra, head)
