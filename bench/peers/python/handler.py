"""The plant-store handler in Python with boto3: the same routing, check
order, validation, conditional write and responses as the Rust function
(src/handler.rs, src/plant.rs, src/auth/, src/error.rs), written the way
a Python Lambda function is usually written: the client is built at import
time (the init phase) and reused."""

import base64
import binascii
import datetime
import hashlib
import hmac
import json
import os
import sys
import time

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError, HTTPClientError
from botocore.exceptions import ConnectionError as BotoConnectionError

MAX_BODY_BYTES = 16 * 1024
NAME_MAX_CHARS = 256
TAG_MAX_CHARS = 64
I64_MIN, I64_MAX = -(2**63), 2**63 - 1
# Unicode White_Space, as Rust's char::is_whitespace.
WHITE_SPACE = set("\t\n\x0b\x0c\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000") | {
    chr(c) for c in range(0x2000, 0x200B)
}
B64TOKEN = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-._~+/")
TRANSIENT_CODES = {
    "ProvisionedThroughputExceededException",
    "RequestLimitExceeded",
    "ThrottlingException",
    "InternalServerError",
    "TransactionConflictException",
    "ReplicatedWriteConflictException",
    "ServiceUnavailable",
    "ServiceUnavailableException",
    "Throttling",
    "InternalFailure",
}

TABLE = os.environ["TABLE_NAME"].strip()
DIGESTS = [bytes.fromhex(d.strip()) for d in os.environ.get("PLANTS_TOKEN_SHA256", "").split(",") if d.strip()]
if not DIGESTS:
    sys.exit("no way to verify bearer tokens: set PLANTS_TOKEN_SHA256")
# The same budgets as the Rust function: 2 s to connect, 2 s per attempt,
# at most 3 attempts.
DYNAMODB = boto3.client(
    "dynamodb",
    config=Config(connect_timeout=2, read_timeout=2, retries={"mode": "standard", "total_max_attempts": 3}),
)


class ApiError(Exception):
    def __init__(self, status, code, message, headers=None):
        super().__init__(message)
        self.status, self.code, self.message, self.headers = status, code, message, headers or {}


def body_error(code, message):
    return ApiError(400, code, message)


class _Number:
    """A JSON number kept as its literal text (so 1.0 and 1e3 are not 1)."""

    __slots__ = ("text", "integer")

    def __init__(self, text, integer):
        self.text, self.integer = text, integer


class _Members(list):
    """A JSON object's members in document order, duplicates kept."""


def _no_constants(name):
    raise ValueError(f"{name} is not JSON")


def parse_plant(body):
    if not body:
        raise body_error(40001, "request body is empty")
    try:
        document = json.loads(
            body.decode("utf-8"),
            object_pairs_hook=_Members,
            parse_int=lambda text: _Number(text, True),
            parse_float=lambda text: _Number(text, False),
            parse_constant=_no_constants,
        )
    except (UnicodeDecodeError, ValueError) as err:
        raise body_error(40001, f"request body is not valid JSON: {err}") from None
    if not isinstance(document, _Members):
        raise body_error(40001, "request body must be a JSON object")
    seen = set()
    for key, _ in document:
        if key in seen:
            raise body_error(40001, f"duplicate field `{key}`")
        seen.add(key)
    fields = {}
    for key, value in document:
        if key not in ("id", "name", "tag"):
            raise body_error(40005, f"unknown field `{key}`")
        fields[key] = value
    for key in ("id", "name"):
        if key not in fields:
            raise body_error(40002, f"missing required field `{key}`")
    raw_id = fields["id"]
    if not (isinstance(raw_id, _Number) and raw_id.integer):
        raise body_error(40003, "field `id` must be an integer")
    plant_id = int(raw_id.text)
    if not I64_MIN <= plant_id <= I64_MAX:
        raise body_error(40004, f"field `id` must be an integer from {I64_MIN} to {I64_MAX}")
    name = check_text("name", fields["name"], NAME_MAX_CHARS)
    tag = check_text("tag", fields["tag"], TAG_MAX_CHARS) if "tag" in fields else None
    return plant_id, name, tag


def check_text(field, value, max_chars):
    if not isinstance(value, str):
        raise body_error(40003, f"field `{field}` must be a string")
    if any("\ud800" <= c <= "\udfff" for c in value):
        # json.loads keeps an unpaired surrogate escape such as "\ud800";
        # the Rust function refuses it.
        raise body_error(40004, f"field `{field}` must not contain unpaired surrogate escapes")
    if not 1 <= len(value) <= max_chars:
        raise body_error(40004, f"field `{field}` must be 1 to {max_chars} characters")
    if any(c <= "\x1f" or c == "\x7f" for c in value):
        raise body_error(40004, f"field `{field}` must not contain control characters")
    if all(c in WHITE_SPACE for c in value):
        raise body_error(40004, f"field `{field}` must not be only whitespace")
    return value


def header_values(event, name):
    """Every value of a header, as lambda_http would see it."""
    multi = event.get("multiValueHeaders") or {}
    for key, values in multi.items():
        if key.lower() == name:
            return list(values or [])
    for key, value in (event.get("headers") or {}).items():
        if key.lower() == name:
            return [value]
    return []


def authenticate(event):
    values = header_values(event, "authorization")
    if not values:
        raise ApiError(401, 40101, "missing bearer token", {"www-authenticate": 'Bearer realm="plants"'})
    invalid = ApiError(
        401, 40102, "invalid bearer token", {"www-authenticate": 'Bearer realm="plants", error="invalid_token"'}
    )
    if len(values) > 1 or not all(" " <= c <= "~" or c == "\t" for c in values[0]):
        raise invalid
    scheme, _, token = values[0].partition(" ")
    token = token.lstrip(" ")
    if scheme.lower() != "bearer" or not token:
        raise ApiError(401, 40101, "missing bearer token", {"www-authenticate": 'Bearer realm="plants"'})
    core = token.rstrip("=")
    if not core or any(c not in B64TOKEN for c in core):
        raise invalid
    digest = hashlib.sha256(token.encode()).digest()
    matched = False
    for known in DIGESTS:
        matched |= hmac.compare_digest(known, digest)
    if not matched:
        raise invalid


def is_json(event):
    values = header_values(event, "content-type")
    if len(values) != 1:
        return False
    essence, *parameters = values[0].split(";")
    if essence.strip().lower() != "application/json":
        return False
    for parameter in parameters:
        name, sep, value = parameter.partition("=")
        if not sep:
            if parameter.strip():
                return False
        elif name.strip().lower() == "charset" and value.strip().strip('"').lower() != "utf-8":
            return False
    return True


def route(event):
    context = event.get("requestContext") or {}
    if event.get("version") == "2.0":
        path, method = event.get("rawPath") or "", (context.get("http") or {}).get("method", "")
    else:
        path, method = event.get("path") or "", event.get("httpMethod", "")
    stage = context.get("stage")
    if stage and stage != "$default" and path.startswith(f"/{stage}/"):
        path = path[len(stage) + 1 :]
    return path, method


def store(plant_id, name, tag):
    item = {
        "id": {"N": str(plant_id)},
        "name": {"S": name},
        "created_at": {"S": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")},
    }
    if tag is not None:
        item["tag"] = {"S": tag}
    try:
        DYNAMODB.put_item(
            TableName=TABLE,
            Item=item,
            ConditionExpression="attribute_not_exists(id)",
            ReturnValuesOnConditionCheckFailure="ALL_OLD",
        )
        return "inserted"
    except ClientError as err:
        code = err.response.get("Error", {}).get("Code")
        if code == "ConditionalCheckFailedException":
            stored = err.response.get("Item") or {}
            if stored.get("name", {}).get("S") == name and stored.get("tag", {}).get("S") == tag:
                return "replayed"
            raise ApiError(409, 40901, f"a different plant with id {plant_id} already exists") from None
        if code in TRANSIENT_CODES:
            raise ApiError(
                503, 50301, "the store is temporarily unavailable; retry later", {"retry-after": "1"}
            ) from err
        raise
    except (BotoConnectionError, HTTPClientError) as err:
        raise ApiError(503, 50301, "the store is temporarily unavailable; retry later", {"retry-after": "1"}) from err


def create_plant(event):
    path, method = route(event)
    if path != "/plants":
        raise ApiError(404, 40401, "no such resource")
    if method != "POST":
        raise ApiError(405, 40501, "method not allowed; use POST", {"allow": "POST"})
    authenticate(event)
    body = event.get("body") or ""
    try:
        body = base64.b64decode(body, validate=True) if event.get("isBase64Encoded") else body.encode()
    except binascii.Error:
        raise body_error(40001, "request body is not valid base64") from None
    if len(body) > MAX_BODY_BYTES:
        raise ApiError(413, 41301, f"request body exceeds {MAX_BODY_BYTES} bytes")
    if not is_json(event):
        raise ApiError(415, 41501, "Content-Type must be application/json")
    plant_id, name, tag = parse_plant(body)
    return plant_id, name, tag, store(plant_id, name, tag)


def handle(event, request_id):
    started = time.perf_counter()
    plant_id = outcome = None
    headers = {}
    try:
        plant_id, name, tag, outcome = create_plant(event)
        status, code = 200, None
        body = {"name": name} if tag is None else {"name": name, "tag": tag}
    except ApiError as err:
        status, code, headers = err.status, err.code, err.headers
        body = {"error": err.code, "message": err.message}
    except Exception as err:  # anything unexpected: 500, the cause to the log only
        status, code = 500, 50001
        body = {"error": 50001, "message": "internal error"}
        print(json.dumps({"level": "ERROR", "message": "request failed", "cause": repr(err)}), flush=True)
    path, method = route(event)
    print(
        json.dumps(
            {
                "level": "INFO",
                "message": "request",
                "request_id": request_id,
                "method": method,
                "path": path,
                "status": status,
                "error": code,
                "plant_id": plant_id,
                "outcome": outcome,
                "latency_ms": (time.perf_counter() - started) * 1e3,
            }
        ),
        flush=True,
    )
    response_headers = {
        "content-type": "application/json",
        "cache-control": "no-store",
        "x-content-type-options": "nosniff",
        "x-request-id": request_id,
        **headers,
    }
    return {
        "statusCode": status,
        "headers": response_headers,
        "multiValueHeaders": {},
        "body": json.dumps(body, ensure_ascii=False, separators=(",", ":")),
        "isBase64Encoded": False,
        "cookies": [],
    }
