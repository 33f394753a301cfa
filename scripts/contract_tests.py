#!/usr/bin/env python3
"""Contract tests: the real local stack, driven over real HTTP.

Starts scripts/local_stack.py (DynamoDB Local, the table, the function under
`cargo lambda watch`) on free ports, then:

1. runs the HTTP contract tests below (stdlib `unittest` + `http.client`):
   every main flow, with the exact status, the headers every response
   carries, the exact JSON body, the challenge/Allow headers, and the item
   read back from DynamoDB Local;
2. runs schemathesis against openapi.yaml with a valid token, every check
   on, a bounded number of examples and a fixed seed;

and always stops the stack, then checks that both ports are free again.
Exits non-zero when anything failed. Python 3.9+ standard library only (the
schemathesis CLI is found next to this interpreter, i.e. in the tool venv).

The function is configured with a static token (DEV_TOKEN, default
plant-store-dev-token) and with JWT verification against a throw-away
issuer this script serves on loopback (a fresh RSA key per run), so that
the 403 of a token without the scope is tested over HTTP too.

Usage: .tools/venv/bin/python scripts/contract_tests.py [--examples N]
Run `cargo build --bin plant-store` first: the stack waits for the build.
"""

import argparse
import base64
import hashlib
import http.client
import http.server
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from datetime import datetime, timedelta, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOCAL_STACK = ROOT / "scripts" / "local_stack.py"
HOOKS = ROOT / "scripts" / "schemathesis_hooks.py"
OPENAPI = ROOT / "openapi.yaml"
EMF_SCHEMA = ROOT / "tests" / "schemas" / "emf.schema.json"
HOST = "127.0.0.1"
FUNCTION_NAME = "plant-store"  # the binary: the name watch's invoke API knows

DEFAULT_TOKEN = "plant-store-dev-token"
DEFAULT_TABLE = "plants"
JWT_AUDIENCE = "plant-store-contract-tests"
JWT_SCOPE = "plants:write"  # the function's default PLANTS_JWT_SCOPE
JWT_KID = "contract-tests-1"

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
MAX_BODY_BYTES = 16384
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
ID_MESSAGE_INT64 = f"field `id` must be an integer from {I64_MIN} to {I64_MAX}"


def say(message=""):
    print(f"contract-tests: {message}" if message else "", flush=True)


class Interrupted(KeyboardInterrupt):
    """A stop signal. A KeyboardInterrupt, so that unittest lets it through
    instead of recording it as one test's error."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)


# ---- ports ------------------------------------------------------------------


def port_free(port):
    """True when nothing listens on `port` on any local address."""
    for family, addr in ((socket.AF_INET, "0.0.0.0"), (socket.AF_INET6, "::")):
        try:
            sock = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue
        with sock:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                sock.bind((addr, port))
            except OSError:
                if family == socket.AF_INET:
                    return False
    return True


def wait_port_free(port, timeout):
    deadline = time.monotonic() + timeout
    while not port_free(port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


# ---- a throw-away OpenID Connect issuer: RS256 with the standard library -------

# DER prefix of the DigestInfo for SHA-256 (RFC 8017 section 9.2, note 1).
SHA256_DIGEST_INFO = bytes.fromhex("3031300d060960864801650304020105000420")


def _probably_prime(n, rounds=40):
    for p in (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47):
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for _ in range(rounds):
        x = pow(secrets.randbelow(n - 3) + 2, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = pow(x, 2, n)
            if x == n - 1:
                break
        else:
            return False
    return True


def _prime(bits):
    while True:
        # The top two bits set make p*q exactly 2*bits long.
        candidate = secrets.randbits(bits) | (3 << (bits - 2)) | 1
        if _probably_prime(candidate):
            return candidate


def b64url(data):
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class RsaKey:
    """A 2048-bit RSA key that signs RS256 (RSASSA-PKCS1-v1_5 with SHA-256)."""

    def __init__(self, bits=2048):
        e = 65537
        while True:
            p, q = _prime(bits // 2), _prime(bits // 2)
            phi = (p - 1) * (q - 1)
            if p != q and math.gcd(e, phi) == 1:
                break
        self.n, self.e, self.d = p * q, e, pow(e, -1, phi)
        self.size = (self.n.bit_length() + 7) // 8

    def sign(self, message):
        t = SHA256_DIGEST_INFO + hashlib.sha256(message).digest()
        em = b"\x00\x01" + b"\xff" * (self.size - len(t) - 3) + b"\x00" + t
        return pow(int.from_bytes(em, "big"), self.d, self.n).to_bytes(self.size, "big")

    def jwk(self, kid):
        n = self.n.to_bytes(self.size, "big")
        e = self.e.to_bytes((self.e.bit_length() + 7) // 8, "big")
        return {"kty": "RSA", "use": "sig", "alg": "RS256", "kid": kid, "n": b64url(n), "e": b64url(e)}


class Issuer:
    """Serves a discovery document and a JWKS on loopback; mints tokens."""

    def __init__(self):
        self.key = RsaKey()
        issuer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                documents = {
                    "/.well-known/openid-configuration": {
                        "issuer": issuer.url,
                        "jwks_uri": f"{issuer.url}/jwks.json",
                    },
                    "/jwks.json": {"keys": [issuer.key.jwk(JWT_KID)]},
                }
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

        self.server = http.server.ThreadingHTTPServer((HOST, 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://{HOST}:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def token(self, scope=JWT_SCOPE, expires_in=300, **overrides):
        now = int(time.time())
        claims = {
            "iss": self.url,
            "sub": "contract-tests",
            "aud": JWT_AUDIENCE,
            "iat": now,
            "nbf": now,
            "exp": now + expires_in,
            "scope": scope,
        }
        claims.update(overrides)
        header = {"alg": "RS256", "typ": "at+jwt", "kid": JWT_KID}
        signing_input = f"{b64url(json.dumps(header).encode())}.{b64url(json.dumps(claims).encode())}"
        return f"{signing_input}.{b64url(self.key.sign(signing_input.encode()))}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


# ---- the stack --------------------------------------------------------------


class Stack:
    """scripts/local_stack.py in a session of its own, its output in a log file."""

    def __init__(self, log_path, token, table, issuer):
        self.log_path = log_path
        self.token = token
        self.table = table
        self.issuer = issuer
        self.process = None
        self.plants_url = None
        self.port = None
        self.dynamodb_port = None
        self.ready = threading.Event()
        self._reader = None

    def start(self):
        env = {k: v for k, v in os.environ.items() if not k.startswith("PLANTS_JWT_")}
        env.update(
            {
                "PORT": "0",
                "DYNAMODB_PORT": "0",
                "DEV_TOKEN": self.token,
                "TABLE_NAME": self.table,
                "PLANTS_JWT_ISSUER": self.issuer.url,
                "PLANTS_JWT_AUDIENCE": JWT_AUDIENCE,
                "PYTHONUNBUFFERED": "1",
            }
        )
        say(f"starting the local stack (its output: {self.log_path})")
        self.process = subprocess.Popen(
            [sys.executable, str(LOCAL_STACK)],
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # no terminal signals: we stop it ourselves
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        with open(self.log_path, "ab") as log:
            for raw in self.process.stdout:
                log.write(raw)
                log.flush()
                line = raw.decode(errors="replace").rstrip("\n")
                if line.startswith("local-stack:") and not self.ready.is_set():
                    print(f"  | {line}", flush=True)
                # The ports, as early as local_stack.py names them, so that
                # they are checked after a stop even when READY never came.
                match = re.match(
                    r"^(?:DYNAMODB http://127\.0\.0\.1:|local-stack: starting DynamoDB Local on port )(\d+)", line
                )
                if match:
                    self.dynamodb_port = int(match.group(1))
                match = re.match(r"^local-stack: starting cargo lambda watch on 127\.0\.0\.1:(\d+)", line)
                if match:
                    self.port = int(match.group(1))
                match = re.match(r"^READY (http://127\.0\.0\.1:(\d+)/plants)$", line)
                if match:
                    self.plants_url, self.port = match.group(1), int(match.group(2))
                    self.ready.set()

    def wait_ready(self, timeout):
        deadline = time.monotonic() + timeout
        while not self.ready.wait(0.5):
            if self.process.poll() is not None:
                self._reader.join(5)
                raise RuntimeError(f"local_stack.py exited with code {self.process.returncode} before READY")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the stack was not READY within {timeout} s")
        if self.dynamodb_port is None:
            raise RuntimeError("local_stack.py printed READY but never the DynamoDB Local port")

    def stop(self):
        """Stop local_stack.py (it stops what it started) and check the ports.
        Returns a list of problems, empty when all is well."""
        problems = []
        if self.process is not None and self.process.poll() is None:
            say("stopping the local stack")
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(90)
            except subprocess.TimeoutExpired:
                problems.append("local_stack.py did not stop within 90 s of SIGTERM: killed it")
                # Its children get a signal of their own (PR_SET_PDEATHSIG).
                self.process.kill()
                self.process.wait(10)
        if self._reader is not None:
            self._reader.join(10)
        for name, port in (("function", self.port), ("DynamoDB Local", self.dynamodb_port)):
            if port is not None and not wait_port_free(port, 20):
                problems.append(f"port {port} ({name}) is still in use after the stack stopped")
        return problems

    def log_tail(self, lines=40):
        """The stack's last lines, less the function's routine request lines."""
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                kept = [
                    line
                    for line in f
                    if not re.search(r" INFO .*: request request_id=.* status=[1-4]", line) and '{"_aws":' not in line
                ]
            return "".join(kept[-lines:])
        except OSError:
            return ""


# ---- HTTP and DynamoDB helpers for the tests -----------------------------------

STACK = None  # set by main() before the tests run
ISSUER = None


class Response:
    def __init__(self, status, headers, body):
        self.status = status
        self.headers = headers  # lower-case name -> [values]
        self.body = body

    def header(self, name):
        values = self.headers.get(name.lower(), [])
        return values[0] if len(values) == 1 else (None if not values else values)

    def json(self):
        def no_duplicates(pairs):
            keys = [key for key, _ in pairs]
            if len(keys) != len(set(keys)):
                raise AssertionError(f"duplicate keys in {self.body!r}")
            return dict(pairs)

        return json.loads(self.body, object_pairs_hook=no_duplicates)

    def __repr__(self):
        return f"<{self.status} {self.headers} {self.body[:300]!r}>"


VALID = object()  # the stack's static token


def call(method="POST", path="/plants", body=None, headers=None, token=VALID, content_type="application/json"):
    """One request on a fresh connection. `token=None` sends no Authorization;
    `content_type=None` sends no Content-Type."""
    sent = {}
    if token is not None:
        sent["Authorization"] = f"Bearer {STACK.token if token is VALID else token}"
    if content_type is not None:
        sent["Content-Type"] = content_type
    sent.update(headers or {})
    if isinstance(body, (dict, list)):
        body = json.dumps(body, ensure_ascii=False).encode()
    elif isinstance(body, str):
        body = body.encode()
    connection = http.client.HTTPConnection(HOST, STACK.port, timeout=60)
    try:
        connection.request(method, path, body=body, headers=sent)
        response = connection.getresponse()
        received = {}
        for name, value in response.getheaders():
            received.setdefault(name.lower(), []).append(value)
        return Response(response.status, received, response.read())
    finally:
        connection.close()


def dynamodb(action, payload):
    """One DynamoDB API call to DynamoDB Local; it checks no signature, so a
    well-formed dummy Authorization header does."""
    connection = http.client.HTTPConnection(HOST, STACK.dynamodb_port, timeout=30)
    try:
        connection.request(
            "POST",
            "/",
            body=json.dumps(payload).encode(),
            headers={
                "Content-Type": "application/x-amz-json-1.0",
                "X-Amz-Target": f"DynamoDB_20120810.{action}",
                "Authorization": "AWS4-HMAC-SHA256 Credential=local/20250101/us-east-1/dynamodb/aws4_request, "
                "SignedHeaders=host, Signature=0",
            },
        )
        response = connection.getresponse()
        body = json.loads(response.read() or b"{}")
        if response.status != 200:
            raise AssertionError(f"DynamoDB {action} failed: HTTP {response.status} {body}")
        return body
    finally:
        connection.close()


def stored_item(plant_id):
    """The item stored under `plant_id` (strongly consistent read), or None."""
    result = dynamodb(
        "GetItem",
        {"TableName": STACK.table, "Key": {"id": {"N": str(plant_id)}}, "ConsistentRead": True},
    )
    return result.get("Item")


_used_ids = set()


def fresh_id():
    """An id no other test (and, in practice, no generated case) uses."""
    while True:
        plant_id = secrets.randbelow(2**62) + 2**40
        if plant_id not in _used_ids:
            _used_ids.add(plant_id)
            return plant_id


RFC3339_UTC = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?Z$")


def parse_created_at(text):
    whole, _, fraction = text[:-1].partition(".")
    moment = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=timezone.utc)
    return moment + timedelta(microseconds=int((fraction or "0")[:6].ljust(6, "0")))


def canonical(value):
    return json.dumps(value, sort_keys=True, ensure_ascii=False)


EXTRA_HEADERS = ("www-authenticate", "allow", "retry-after")


class ContractTest(unittest.TestCase):
    maxDiff = None

    def assert_common_headers(self, response):
        self.assertEqual(response.headers.get("content-type"), ["application/json"], response)
        self.assertEqual(response.headers.get("cache-control"), ["no-store"], response)
        self.assertEqual(response.headers.get("x-content-type-options"), ["nosniff"], response)
        request_id = response.headers.get("x-request-id", [])
        self.assertTrue(len(request_id) == 1 and request_id[0].strip(), f"one non-empty X-Request-Id: {response}")

    def assert_extra_headers(self, response, expected):
        """WWW-Authenticate, Allow and Retry-After: exactly `expected`, no other."""
        for name in EXTRA_HEADERS:
            want = [expected[name]] if name in expected else None
            self.assertEqual(response.headers.get(name), want, f"{name}: {response}")

    def assert_json(self, response, status, body, extra=None, head=False):
        self.assertEqual(response.status, status, response)
        self.assert_common_headers(response)
        self.assert_extra_headers(response, extra or {})
        if head:
            self.assertEqual(response.body, b"", response)
        else:
            # Compared as canonical JSON text, so that types count too
            # (Python's 40001.0 == 40001, but the contract's int32 is not 40001.0).
            self.assertEqual(canonical(response.json()), canonical(body), response)

    def assert_error(self, response, status, code, message, extra=None, head=False):
        self.assert_json(response, status, {"error": code, "message": message}, extra, head)

    def assert_stored(self, plant_id, name, tag=None, after=None):
        item = stored_item(plant_id)
        self.assertIsNotNone(item, f"nothing stored under id {plant_id}")
        created_at = item.get("created_at", {}).get("S", "")
        expected = {"id": {"N": str(plant_id)}, "name": {"S": name}, "created_at": {"S": created_at}}
        if tag is not None:
            expected["tag"] = {"S": tag}
        self.assertEqual(item, expected)
        self.assertRegex(created_at, RFC3339_UTC)
        moment = parse_created_at(created_at)
        now = datetime.now(timezone.utc)
        lower = (after or now - timedelta(minutes=5)) - timedelta(seconds=5)
        self.assertTrue(lower <= moment <= now + timedelta(seconds=5), f"created_at {created_at} is not now")
        return item

    def assert_nothing_stored(self, *plant_ids):
        for plant_id in plant_ids:
            self.assertIsNone(stored_item(plant_id), f"id {plant_id} must not be stored")


# ---- the tests -----------------------------------------------------------------


class Create(ContractTest):
    def test_a_new_plant_with_a_tag_is_stored_and_answered_without_its_id(self):
        plant_id, started = fresh_id(), datetime.now(timezone.utc)
        response = call(body={"id": plant_id, "name": "Monstera deliciosa", "tag": "aroid"})
        self.assert_json(response, 200, {"name": "Monstera deliciosa", "tag": "aroid"})
        self.assertEqual(response.body, b'{"name":"Monstera deliciosa","tag":"aroid"}')
        self.assert_stored(plant_id, "Monstera deliciosa", "aroid", after=started)

    def test_a_new_plant_without_a_tag_has_no_tag_in_the_answer_or_the_item(self):
        plant_id = fresh_id()
        response = call(body={"id": plant_id, "name": "Boston fern"})
        self.assert_json(response, 200, {"name": "Boston fern"})
        self.assert_stored(plant_id, "Boston fern")

    def test_a_retry_with_the_same_body_answers_the_same_200_and_writes_nothing(self):
        plant_id = fresh_id()
        body = {"id": plant_id, "name": "Aloe vera", "tag": "succulent"}
        first = call(body=body)
        self.assert_json(first, 200, {"name": "Aloe vera", "tag": "succulent"})
        item = self.assert_stored(plant_id, "Aloe vera", "succulent")
        for _ in range(2):
            again = call(body=body)
            self.assert_json(again, 200, {"name": "Aloe vera", "tag": "succulent"})
            self.assertEqual(again.body, first.body)
            self.assertNotEqual(again.header("x-request-id"), first.header("x-request-id"))
            self.assertEqual(stored_item(plant_id), item, "a retry must not write (created_at changed)")
        # The same plant without a tag, retried.
        plant_id = fresh_id()
        self.assert_json(call(body={"id": plant_id, "name": "Fern"}), 200, {"name": "Fern"})
        item = stored_item(plant_id)
        self.assert_json(call(body={"id": plant_id, "name": "Fern"}), 200, {"name": "Fern"})
        self.assertEqual(stored_item(plant_id), item)

    def test_the_same_id_with_different_content_is_a_409_and_the_stored_plant_is_unchanged(self):
        cases = [
            ("another name", {"name": "Monstera", "tag": "aroid"}, {"name": "Philodendron", "tag": "aroid"}),
            ("another tag", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera", "tag": "climber"}),
            ("the tag left out", {"name": "Monstera", "tag": "aroid"}, {"name": "Monstera"}),
            ("a tag added", {"name": "Monstera"}, {"name": "Monstera", "tag": "aroid"}),
            ("a name differing only in case", {"name": "Monstera"}, {"name": "monstera"}),
            ("a name with a trailing space", {"name": "Monstera"}, {"name": "Monstera "}),
        ]
        for label, stored, sent in cases:
            with self.subTest(label):
                plant_id = fresh_id()
                self.assertEqual(call(body={"id": plant_id, **stored}).status, 200)
                item = stored_item(plant_id)
                response = call(body={"id": plant_id, **sent})
                self.assert_error(response, 409, 40901, f"a different plant with id {plant_id} already exists")
                self.assertEqual(stored_item(plant_id), item, "the stored plant must not change")

    def test_names_and_tags_are_stored_exactly_as_sent(self):
        cases = [
            ("Unicode and emoji", "🌱 Sämling", "多肉植物"),
            ("spaces around the name are kept", "  Fern  ", " x "),
            ("256 characters of 4 bytes each", "🌿" * 256, "🌵" * 64),
            ("a single character", "a", "b"),
            ("C1 controls and NBSP inside text are allowed", "a\u0085b\u00a0c", "d\u0080e"),
            ("quotes and backslashes", 'say "hi" \\ bye', "a/b"),
        ]
        for label, name, tag in cases:
            with self.subTest(label):
                plant_id = fresh_id()
                response = call(body={"id": plant_id, "name": name, "tag": tag})
                self.assert_json(response, 200, {"name": name, "tag": tag})
                self.assert_stored(plant_id, name, tag)

    def test_the_extreme_int64_ids_are_accepted(self):
        # The largest id as in openapi.yaml's example `largestId`, so that
        # schemathesis's example later is an idempotent retry.
        for plant_id, name in ((I64_MAX, "🌱 Sämling"), (I64_MIN, "Most negative")):
            with self.subTest(plant_id):
                response = call(body=f'{{"id": {plant_id}, "name": {json.dumps(name)}}}')
                self.assert_json(response, 200, {"name": name})
                self.assert_stored(plant_id, name)

    def test_a_json_content_type_with_parameters_is_accepted(self):
        for content_type in ("application/json; charset=utf-8", "Application/JSON;charset=UTF-8"):
            with self.subTest(content_type):
                plant_id = fresh_id()
                response = call(body={"id": plant_id, "name": "Ivy"}, content_type=content_type)
                self.assert_json(response, 200, {"name": "Ivy"})
                self.assert_stored(plant_id, "Ivy")

    def test_a_body_of_exactly_16384_bytes_is_accepted(self):
        plant_id = fresh_id()
        body = json.dumps({"id": plant_id, "name": "Cactus"}).encode()
        body = body[:-1] + b" " * (MAX_BODY_BYTES - len(body)) + b"}"  # JSON whitespace
        self.assertEqual(len(body), MAX_BODY_BYTES)
        self.assert_json(call(body=body), 200, {"name": "Cactus"})
        self.assert_stored(plant_id, "Cactus")


CHALLENGE = 'Bearer realm="plants"'
INVALID_TOKEN = 'Bearer realm="plants", error="invalid_token"'
INSUFFICIENT_SCOPE = f'Bearer realm="plants", error="insufficient_scope", scope="{JWT_SCOPE}"'


class Authentication(ContractTest):
    def assert_refused(self, headers, status, code, message, challenge, body=None):
        plant_id = fresh_id()
        response = call(body=body or {"id": plant_id, "name": "Fern"}, headers=headers, token=None)
        self.assert_error(response, status, code, message, {"www-authenticate": challenge})
        self.assert_nothing_stored(plant_id)

    def test_no_authorization_header_is_a_401_40101(self):
        self.assert_refused({}, 401, 40101, "missing bearer token", CHALLENGE)

    def test_another_scheme_or_an_empty_bearer_is_a_401_40101(self):
        for value in ("Basic cGxhbnQ6c3RvcmU=", "Token plant-store-dev-token", "Bearer", "Bearer ", "bearer"):
            with self.subTest(value):
                self.assert_refused({"Authorization": value}, 401, 40101, "missing bearer token", CHALLENGE)

    def test_a_token_that_is_not_accepted_is_a_401_40102(self):
        for value in (
            "Bearer not-the-dev-token",
            f"Bearer {STACK.token}x",
            "Bearer plant store",  # not RFC 6750 b64token syntax
            "Bearer a.b.c",  # JWT-shaped garbage
        ):
            with self.subTest(value):
                self.assert_refused({"Authorization": value}, 401, 40102, "invalid bearer token", INVALID_TOKEN)

    def test_the_scheme_name_is_case_insensitive(self):
        for scheme in ("bearer", "BEARER", "BeArEr"):
            with self.subTest(scheme):
                plant_id = fresh_id()
                response = call(
                    body={"id": plant_id, "name": "Fern"},
                    token=None,
                    headers={"Authorization": f"{scheme} {STACK.token}"},
                )
                self.assert_json(response, 200, {"name": "Fern"})
                self.assert_stored(plant_id, "Fern")

    def test_authentication_comes_before_anything_about_the_body(self):
        plant_id = fresh_id()
        for label, body, content_type in (
            ("invalid JSON", b"{", "application/json"),
            ("a wrong type", {"id": "1", "name": None}, "application/json"),
            ("an oversized body", b"x" * (MAX_BODY_BYTES + 1), "application/json"),
            ("a wrong content type", {"id": plant_id, "name": "Fern"}, "text/plain"),
            ("no content type", {"id": plant_id, "name": "Fern"}, None),
        ):
            with self.subTest(label):
                response = call(body=body, token=None, content_type=content_type)
                self.assert_error(response, 401, 40101, "missing bearer token", {"www-authenticate": CHALLENGE})
        self.assert_nothing_stored(plant_id)

    def test_a_jwt_from_the_issuer_with_the_scope_is_accepted(self):
        plant_id = fresh_id()
        response = call(body={"id": plant_id, "name": "Orchid"}, token=ISSUER.token())
        self.assert_json(response, 200, {"name": "Orchid"})
        self.assert_stored(plant_id, "Orchid")

    def test_a_jwt_without_the_scope_is_a_403_40301(self):
        for scope in ("plants:read", "plants:write-all openid", ""):
            with self.subTest(scope=scope):
                self.assert_refused(
                    {"Authorization": f"Bearer {ISSUER.token(scope=scope)}"},
                    403,
                    40301,
                    f"token lacks the required scope `{JWT_SCOPE}`",
                    INSUFFICIENT_SCOPE,
                )

    def test_an_expired_forged_or_foreign_jwt_is_a_401_40102(self):
        good = ISSUER.token()
        head, claims, signature = good.split(".")
        forged = bytearray(base64.urlsafe_b64decode(signature + "=="))
        forged[-1] ^= 1
        for label, token in (
            ("expired", ISSUER.token(expires_in=-3600)),
            ("bad signature", f"{head}.{claims}.{b64url(bytes(forged))}"),
            ("another audience", ISSUER.token(aud="someone-else")),
            ("another issuer", ISSUER.token(iss="http://127.0.0.1:1")),
        ):
            with self.subTest(label):
                self.assert_refused(
                    {"Authorization": f"Bearer {token}"}, 401, 40102, "invalid bearer token", INVALID_TOKEN
                )


class Bodies(ContractTest):
    def test_bad_bodies_are_a_400_with_their_code_and_nothing_is_written(self):
        i = fresh_id()
        long_name, long_tag = "n" * 257, "t" * 65
        cases = [
            # (label, body, code, message)
            ("empty", b"", 40001, "request body is empty"),
            (
                "only whitespace",
                b"  \n",
                40001,
                "request body is not valid JSON: EOF while parsing a value at line 2 column 0",
            ),
            (
                "a missing comma",
                f'{{"id": {i} "name": "Fern"}}',
                40001,
                f"request body is not valid JSON: expected `,` or `}}` at line 1 column {9 + len(str(i))}",
            ),
            (
                "trailing garbage",
                f'{{"id": {i}, "name": "Fern"}} x',
                40001,
                f"request body is not valid JSON: trailing characters at line 1 column {26 + len(str(i))}",
            ),
            ("an array", b"[1, 2]", 40001, "request body must be a JSON object"),
            ("a string", b'"plant"', 40001, "request body must be a JSON object"),
            ("null", b"null", 40001, "request body must be a JSON object"),
            ("a duplicate field", f'{{"id": {i}, "name": "a", "name": "b"}}', 40001, "duplicate field `name`"),
            ("a duplicate id", f'{{"id": {i}, "id": {i}, "name": "a"}}', 40001, "duplicate field `id`"),
            ("an unknown field", {"id": i, "name": "Fern", "colour": "green"}, 40005, "unknown field `colour`"),
            ("an unknown field before a missing one", {"id": i, "Name": "Fern"}, 40005, "unknown field `Name`"),
            ("no name", {"id": i}, 40002, "missing required field `name`"),
            ("no id", {"name": "Fern"}, 40002, "missing required field `id`"),
            ("an empty object", {}, 40002, "missing required field `id`"),
            ("id 1.0", f'{{"id": {i}.0, "name": "Fern"}}', 40003, "field `id` must be an integer"),
            ("id 1e3", f'{{"id": {i}e0, "name": "Fern"}}', 40003, "field `id` must be an integer"),
            ("id 1E+2", '{"id": 1E+2, "name": "Fern"}', 40003, "field `id` must be an integer"),
            ("id -0.0", '{"id": -0.0, "name": "Fern"}', 40003, "field `id` must be an integer"),
            ("id as a string", {"id": str(i), "name": "Fern"}, 40003, "field `id` must be an integer"),
            ("id null", {"id": None, "name": "Fern"}, 40003, "field `id` must be an integer"),
            ("id true", {"id": True, "name": "Fern"}, 40003, "field `id` must be an integer"),
            ("id above int64", {"id": I64_MAX + 1, "name": "Fern"}, 40004, ID_MESSAGE_INT64),
            ("id below int64", {"id": I64_MIN - 1, "name": "Fern"}, 40004, ID_MESSAGE_INT64),
            ("name null", {"id": i, "name": None}, 40003, "field `name` must be a string"),
            ("name a number", {"id": i, "name": 5}, 40003, "field `name` must be a string"),
            ("name an array", {"id": i, "name": ["Fern"]}, 40003, "field `name` must be a string"),
            ("name empty", {"id": i, "name": ""}, 40004, "field `name` must be 1 to 256 characters"),
            ("name 257 characters", {"id": i, "name": long_name}, 40004, "field `name` must be 1 to 256 characters"),
            ("name only spaces", {"id": i, "name": "   "}, 40004, "field `name` must not be only whitespace"),
            (
                "name only Unicode whitespace",
                {"id": i, "name": "\u3000\u2003"},
                40004,
                "field `name` must not be only whitespace",
            ),
            ("name with NUL", {"id": i, "name": "a\u0000b"}, 40004, "field `name` must not contain control characters"),
            (
                "name with a newline",
                {"id": i, "name": "a\nb"},
                40004,
                "field `name` must not contain control characters",
            ),
            ("name with DEL", {"id": i, "name": "a\u007f"}, 40004, "field `name` must not contain control characters"),
            ("tag null", {"id": i, "name": "Fern", "tag": None}, 40003, "field `tag` must be a string"),
            ("tag a number", {"id": i, "name": "Fern", "tag": 1}, 40003, "field `tag` must be a string"),
            ("tag empty", {"id": i, "name": "Fern", "tag": ""}, 40004, "field `tag` must be 1 to 64 characters"),
            (
                "tag 65 characters",
                {"id": i, "name": "Fern", "tag": long_tag},
                40004,
                "field `tag` must be 1 to 64 characters",
            ),
            (
                "tag only whitespace",
                {"id": i, "name": "Fern", "tag": " "},
                40004,
                "field `tag` must not be only whitespace",
            ),
            (
                "tag with a tab",
                {"id": i, "name": "Fern", "tag": "a\tb"},
                40004,
                "field `tag` must not contain control characters",
            ),
            ("id checked before name", {"id": "x", "name": ""}, 40003, "field `id` must be an integer"),
            (
                "name checked before tag",
                {"id": i, "name": "", "tag": ""},
                40004,
                "field `name` must be 1 to 256 characters",
            ),
        ]
        for label, body, code, message in cases:
            with self.subTest(label):
                self.assert_error(call(body=body), 400, code, message)
        self.assert_nothing_stored(i, 0, 100)

    def test_a_non_utf8_body_gets_40001_from_the_function_itself(self):
        # Sent as a base64 event straight to the function through the Lambda
        # invoke API that `cargo lambda watch` emulates: what API Gateway
        # does with a body it does not treat as text.
        plant_id = fresh_id()
        raw = f'{{"id":{plant_id},"name":"\xff"}}'.encode("latin-1")
        event = {
            "version": "2.0",
            "routeKey": "$default",
            "rawPath": "/plants",
            "rawQueryString": "",
            "headers": {
                "authorization": f"Bearer {STACK.token}",
                "content-type": "application/json",
                "content-length": str(len(raw)),
            },
            "requestContext": {
                "accountId": "123456789012",
                "apiId": "contract",
                "domainName": "contract.example",
                "domainPrefix": "contract",
                "http": {
                    "method": "POST",
                    "path": "/plants",
                    "protocol": "HTTP/1.1",
                    "sourceIp": "127.0.0.1",
                    "userAgent": "contract-tests",
                },
                "requestId": "contract-non-utf8",
                "routeKey": "$default",
                "stage": "$default",
                "time": "01/Jan/2025:00:00:00 +0000",
                "timeEpoch": 1735689600000,
            },
            "body": base64.b64encode(raw).decode(),
            "isBase64Encoded": True,
        }
        connection = http.client.HTTPConnection(HOST, STACK.port, timeout=60)
        try:
            connection.request(
                "POST",
                f"/2015-03-31/functions/{FUNCTION_NAME}/invocations",
                body=json.dumps(event).encode(),
                headers={"Content-Type": "application/json"},
            )
            response = connection.getresponse()
            status, answer = response.status, json.loads(response.read())
        finally:
            connection.close()
        self.assertEqual(status, 200, answer)
        self.assertEqual(answer["statusCode"], 400, answer)
        headers = {k.lower(): v for k, v in answer["headers"].items()}
        self.assertEqual(headers.get("content-type"), "application/json", answer)
        self.assertEqual(headers.get("cache-control"), "no-store", answer)
        body = json.loads(answer["body"])
        self.assertEqual(
            body,
            {
                "error": 40001,
                "message": "request body is not valid JSON: invalid unicode code point "
                f"at line 1 column {len(raw) - 2}",
            },
        )
        self.assert_nothing_stored(plant_id)

    def test_a_non_utf8_body_over_http_gets_the_emulators_own_500(self):
        # `cargo lambda watch` cannot put these bytes in an event and answers
        # 500 itself; the function is never invoked (no X-Request-Id, not our
        # content type). This is why scripts/schemathesis_hooks.py keeps
        # non-UTF-8 bodies out of the schemathesis run. If this test fails
        # because the emulator now passes them on, expect 400/40001 here
        # and remove that filter.
        plant_id = fresh_id()
        response = call(body=f'{{"id":{plant_id},"name":"\xff"}}'.encode("latin-1"))
        self.assertEqual(response.status, 500, response)
        self.assertNotIn("x-request-id", response.headers, response)
        self.assertNotEqual(response.headers.get("content-type"), ["application/json"], response)
        self.assert_nothing_stored(plant_id)


class Routing(ContractTest):
    def test_a_path_other_than_plants_is_a_404_before_anything_else(self):
        for method, path in (
            ("POST", "/plant"),
            ("POST", "/plants/"),
            ("POST", "/plants/1"),
            ("GET", "/"),
            ("POST", "/PLANTS"),
            ("DELETE", "/anything"),
        ):
            for token in (VALID, None):
                with self.subTest(method=method, path=path, token=bool(token)):
                    plant_id = fresh_id()
                    response = call(method, path, body={"id": plant_id, "name": "Fern"}, token=token)
                    self.assert_error(response, 404, 40401, "no such resource")
                    self.assert_nothing_stored(plant_id)

    def test_the_query_string_does_not_change_the_route(self):
        plant_id = fresh_id()
        response = call(path="/plants?dry_run=1", body={"id": plant_id, "name": "Fern"})
        self.assert_json(response, 200, {"name": "Fern"})
        self.assert_stored(plant_id, "Fern")

    def test_a_method_other_than_post_is_a_405_with_allow_before_authentication(self):
        for method in ("GET", "PUT", "PATCH", "DELETE", "TRACE", "OPTIONS"):
            for token in (VALID, None):
                with self.subTest(method=method, token=bool(token)):
                    plant_id = fresh_id()
                    response = call(method, body={"id": plant_id, "name": "Fern"}, token=token)
                    self.assert_error(response, 405, 40501, "method not allowed; use POST", {"allow": "POST"})
                    self.assert_nothing_stored(plant_id)

    def test_head_is_a_405_with_the_headers_and_no_body(self):
        response = call("HEAD", body=None, content_type=None)
        self.assert_error(response, 405, 40501, "method not allowed; use POST", {"allow": "POST"}, head=True)

    def test_a_body_over_16384_bytes_is_a_413_before_parsing(self):
        plant_id = fresh_id()
        body = json.dumps({"id": plant_id, "name": "Cactus"}).encode()
        body = body[:-1] + b" " * (MAX_BODY_BYTES + 1 - len(body)) + b"}"
        self.assertEqual(len(body), MAX_BODY_BYTES + 1)
        for label, payload, content_type in (
            ("valid JSON", body, "application/json"),
            ("not JSON", b"x" * (MAX_BODY_BYTES * 4), "application/json"),
            ("a wrong content type", body, "text/plain"),
        ):
            with self.subTest(label):
                self.assert_error(
                    call(body=payload, content_type=content_type), 413, 41301, "request body exceeds 16384 bytes"
                )
        self.assert_nothing_stored(plant_id)

    def test_a_content_type_other_than_json_is_a_415(self):
        plant_id = fresh_id()
        for content_type in (
            None,
            "text/plain",
            "application/x-www-form-urlencoded",
            "application/jsonx",
            "application/json-patch+json",
            "application/json; charset=iso-8859-1",
            "application/json; charset=utf-16",
            "",
        ):
            with self.subTest(content_type=content_type):
                response = call(body={"id": plant_id, "name": "Fern"}, content_type=content_type)
                self.assert_error(response, 415, 41501, "Content-Type must be application/json")
        self.assert_nothing_stored(plant_id)


def run_http_tests():
    suite = unittest.defaultTestLoader.loadTestsFromModule(sys.modules[__name__])
    result = unittest.TextTestRunner(stream=sys.stdout, verbosity=2).run(suite)
    return result


# ---- schemathesis --------------------------------------------------------------


def find_schemathesis():
    here = Path(sys.executable).parent / "st"
    if here.exists():
        return str(here)
    return shutil.which("st")


def run_schemathesis(st, examples, seed, workdir, children):
    """Run the schemathesis CLI from `workdir` (outside the crate: it writes
    files there, and watch must not see them). Returns (exit code, summary)."""
    options = {
        "--url": f"http://{HOST}:{STACK.port}",
        "--header": f"Authorization: Bearer {STACK.token}",
        "--checks": "all",
        "--max-examples": str(examples),
        "--seed": str(seed),
        "--generation-database": "none",  # every run starts from the seed alone
        "--request-timeout": "30",
        "--workers": "1",  # watch runs one function instance anyway
    }
    argv = [st, "run", str(OPENAPI), "--continue-on-failure", "--no-color"]
    for option, value in options.items():
        argv += [option, value]
    shown = ["st"] + [("'Authorization: Bearer ***'" if a.startswith("Authorization:") else a) for a in argv[1:]]
    say("running " + " ".join(shown))
    env = dict(os.environ, SCHEMATHESIS_HOOKS=str(HOOKS), NO_COLOR="1")
    process = subprocess.Popen(
        argv,
        cwd=workdir,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    children.append(process)
    summary = []
    for raw in process.stdout:
        line = raw.decode(errors="replace").rstrip("\n")
        print(f"  st | {line}", flush=True)
        if re.search(r"\d+ generated|No issues found|failures? in|errors? in", line):
            summary.append(line.strip(" ="))
    process.wait()
    children.remove(process)
    return process.returncode, "; ".join(summary)


def stop_children(children):
    for process in list(children):
        if process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait(10)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass


# ---- main ------------------------------------------------------------------------


def check_emf(log_path):
    """Every EMF document the function wrote while the tests ran, against
    tests/schemas/emf.schema.json and the EMF specification's
    cross-references, and one document per request line. Returns (ok, detail)."""
    import jsonschema  # in the tool venv, with schemathesis

    validator = jsonschema.Draft202012Validator(json.loads(EMF_SCHEMA.read_text(encoding="utf-8")))
    requests, documents, problems = 0, 0, []
    with open(log_path, encoding="utf-8", errors="replace") as f:
        for line in f:
            line = re.sub(r"\x1b\[[0-9;]*m", "", line)  # colours, if the log has them
            if re.search(r"\bINFO\b.*\brequest request_id=", line):
                requests += 1
            start = line.find('{"_aws":')
            if start < 0:
                continue
            documents += 1
            try:
                document = json.loads(line[start:])
            except ValueError as err:
                problems.append(f"not one JSON object ({err}): {line.strip()[:200]}")
                continue
            problems.extend(f"{error.json_path}: {error.message}" for error in validator.iter_errors(document))
            # What JSON Schema cannot say: every dimension is a string member,
            # every metric a number member (the specification's target members).
            for directive in document.get("_aws", {}).get("CloudWatchMetrics", []):
                for dimension in (d for dimensions in directive.get("Dimensions", []) for d in dimensions):
                    if not isinstance(document.get(dimension), str):
                        problems.append(f"dimension {dimension} is not a string member")
                for metric in directive.get("Metrics", []):
                    value = document.get(metric.get("Name"))
                    if isinstance(value, bool) or not isinstance(value, (int, float)):
                        problems.append(f"metric {metric.get('Name')} has no number member: {value!r}")
            undeclared = {
                name
                for name, value in document.items()
                if isinstance(value, (int, float)) and not isinstance(value, bool)
            } - {m.get("Name") for d in document["_aws"]["CloudWatchMetrics"] for m in d.get("Metrics", [])}
            if undeclared:
                problems.append(f"numbers not declared as metrics: {sorted(undeclared)}")
    if documents != requests:
        problems.append(f"{documents} EMF documents for {requests} request lines")
    if requests == 0:
        problems.append("no request line in the stack's output")
    detail = f"{documents} documents for {requests} requests"
    return not problems, "; ".join(sorted(set(problems))[:5]) + f" ({detail})" if problems else detail


def main():
    global STACK, ISSUER
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--examples",
        type=int,
        default=int(os.environ.get("CONTRACT_EXAMPLES", "500")),
        help="schemathesis --max-examples per phase (default 500, or CONTRACT_EXAMPLES)",
    )
    parser.add_argument("--seed", type=int, default=42, help="schemathesis seed (default 42)")
    parser.add_argument(
        "--ready-timeout",
        type=int,
        default=1200,
        help="seconds to wait for the stack's READY line (default 1200: a cold build is slow)",
    )
    parser.add_argument("--skip-schemathesis", action="store_true", help="run only the HTTP contract tests")
    args = parser.parse_args()
    sys.stdout.reconfigure(line_buffering=True)

    st = None
    if not args.skip_schemathesis:
        st = find_schemathesis()
        if st is None:
            say("error: schemathesis (`st`) not found next to this Python or on PATH: run `make tools-contract`")
            return 2

    def on_signal(signum, _frame):
        raise Interrupted(signum)

    for sig in STOP_SIGNALS:
        signal.signal(sig, on_signal)

    token = os.environ.get("DEV_TOKEN", "") or DEFAULT_TOKEN
    table = os.environ.get("TABLE_NAME", "").strip() or DEFAULT_TABLE
    workdir = tempfile.mkdtemp(prefix="plant-store-contract-")
    results = []  # (name, ok, detail)
    children = []
    stack = issuer = None
    started = time.monotonic()
    try:
        say("generating a throw-away RS256 key for the loopback JWT issuer")
        issuer = ISSUER = Issuer()
        stack = STACK = Stack(os.path.join(workdir, "local_stack.log"), token, table, issuer)
        stack.start()
        stack.wait_ready(args.ready_timeout)
        ready = time.monotonic()
        say(
            f"stack ready in {ready - started:.0f} s: {stack.plants_url}, DynamoDB Local on port "
            f"{stack.dynamodb_port}, JWT issuer {issuer.url}"
        )

        result = run_http_tests()
        failed = len(result.failures) + len(result.errors)
        results.append(
            (
                "HTTP contract tests",
                failed == 0 and result.testsRun > 0,
                f"{result.testsRun} tests, {failed} failed, in {time.monotonic() - ready:.0f} s",
            )
        )

        if st is not None:
            begun = time.monotonic()
            code, summary = run_schemathesis(st, args.examples, args.seed, workdir, children)
            results.append(
                (
                    f"schemathesis (--max-examples {args.examples}, --seed {args.seed})",
                    code == 0,
                    f"{summary or 'no summary'}; exit code {code}, in {time.monotonic() - begun:.0f} s",
                )
            )
    except Interrupted as stop:
        results.append(("run", False, f"interrupted by {stop}"))
    except Exception as err:  # any failure here is a failed run, reported below
        results.append(("run", False, f"{type(err).__name__}: {err}"))
    finally:
        for sig in STOP_SIGNALS:
            signal.signal(sig, signal.SIG_IGN)  # the cleanup must not be interrupted
        stop_children(children)
        if stack is not None:
            problems = stack.stop()
            ports = [str(port) for port in (stack.port, stack.dynamodb_port) if port is not None]
            results.append(
                (
                    "stack stopped, ports free",
                    not problems,
                    "; ".join(problems)
                    or (f"port(s) {' and '.join(ports)} free" if ports else "no port was opened yet"),
                )
            )
            if stack.ready.is_set():
                ok, detail = check_emf(stack.log_path)
                results.append(("EMF documents against tests/schemas/emf.schema.json", ok, detail))
        if issuer is not None:
            issuer.close()
        if all(ok for _, ok, _ in results):
            shutil.rmtree(workdir, ignore_errors=True)
        else:
            if stack is not None:
                print("\n---- the local stack's last lines (routine request lines left out) ----", flush=True)
                print(stack.log_tail(), flush=True)
            say(f"kept for a look: {workdir} (the stack's whole output is local_stack.log)")

    print(flush=True)
    say(f"summary ({time.monotonic() - started:.0f} s in all):")
    for name, ok, detail in results:
        print(f"  {'ok  ' if ok else 'FAIL'} {name}: {detail}", flush=True)
    passed = sum(1 for _, ok, _ in results if ok)
    print(f"contract: {passed} passed, {len(results) - passed} failed", flush=True)
    return 0 if passed == len(results) else 1


if __name__ == "__main__":
    sys.exit(main())
