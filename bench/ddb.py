"""DynamoDB Local for the benchmark, started as `make run` starts it (scripts/local_stack.py), and the
few calls the benchmark makes itself through boto3 (tables, JVM warm-up, counts)."""

import os
import sys
from subprocess import STDOUT

from botocore.exceptions import BotoCoreError, ClientError

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from local_stack import dynamodb_client, pick_free_port, start_dynamodb_local, wait_until  # noqa: E402


class DynamoDBLocal:
    """Amazon's DynamoDB Local on a free port, in memory, stopped on exit (and if the benchmark dies)."""

    def __init__(self, log_path):
        self.port, self.log_path = pick_free_port(), log_path
        self.endpoint = f"http://localhost:{self.port}"
        with open(log_path, "wb") as log:
            self.child = start_dynamodb_local(self.port, stdout=log, stderr=STDOUT)
        self.ddb = dynamodb_client(self.port)
        if not wait_until(self.answers, 60):
            self.child.stop()
            raise SystemExit("error: DynamoDB Local did not answer within 60 s")

    def answers(self):
        if not self.child.alive():
            raise SystemExit(f"error: DynamoDB Local exited at start; see {self.log_path}")
        try:
            self.ddb.list_tables()
        except (BotoCoreError, ClientError):
            return False
        return True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.child.stop()

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
