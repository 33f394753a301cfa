"""What every measurement uses: the events sent, the checks of the answers, and one run's fixtures (`Run`)."""

import contextlib
import copy
import json
import os
import time

from ddb import DynamoDBLocal
from emulator import FunctionDied, FunctionProcess, ProtocolError, XrayDaemon
from issuer import Issuer
from proxy import Proxy, make_certificates
from quota import CGROUP_PERIOD_US
from subjects import REPO, fail

PLANT = {"name": "Monstera deliciosa", "tag": "aroid"}
BROKEN = (FunctionDied, TimeoutError, ProtocolError)  # how a function under test fails


class Events:
    """API Gateway HTTP API 2.0 envelopes, as events/create-http-api.json,
    each with a fresh plant id and request id."""

    def __init__(self, start):
        with open(os.path.join(REPO, "events", "create-http-api.json")) as f:
            self.template = json.load(f)
        self.next_id = start
        self.headers = {}  # on every event, before `create`'s own (`--jwt`: the Authorization)

    def create(self, body=None, plant_id=None, headers=(), method=None, **fields):
        if plant_id is None:
            plant_id, self.next_id = self.next_id, self.next_id + 1
        if body is None:
            body = json.dumps({"id": plant_id, **PLANT}, separators=(",", ":"))
        event = copy.deepcopy(self.template)
        event.update(body=body, **fields)
        event["headers"]["content-length"] = str(len(body.encode()))
        event["headers"].update(self.headers)
        event["headers"].update(headers)
        event["headers"] = {name: value for name, value in event["headers"].items() if value is not None}
        event["requestContext"]["requestId"] = f"bench-{plant_id}"
        event["requestContext"]["timeEpoch"] = int(time.time() * 1000)
        event["requestContext"]["http"]["method"] = method or event["requestContext"]["http"]["method"]
        return json.dumps(event).encode()


def created_problem(response, request_id=None):
    """What keeps `response` from being a created plant (that names its own
    `request_id`, when given), or None."""
    if response.get("statusCode") != 200 or json.loads(response.get("body") or "null") != PLANT:
        return f"{response.get('statusCode')} {response.get('body')!r}"
    if request_id is None:
        return None
    named = {k.lower(): v for k, v in (response.get("headers") or {}).items()}.get("x-request-id")
    return None if named == request_id else f"the answer names {named!r}"


def check_created(subject, response):
    if problem := created_problem(response):
        fail(f"{subject.name} answered {problem}")


def answer_problems(done, names_request=True):
    """Every concurrent answer: a created plant, naming its own request id
    (unless `names_request` is false: the floor's fixed answer)."""
    named = (i.request_id if names_request else None for i in done)
    return [
        f"{i.request_id}: {p}" for i, rid in zip(done, named, strict=True) if (p := created_problem(i.response, rid))
    ]


def check_answers(subject, done):
    if problems := answer_problems(done, subject.names_request):
        fail(f"{subject.name}: {problems[0]} (and {len(problems) - 1} more)")


class Run(contextlib.ExitStack):
    """The shared fixtures of one benchmark: DynamoDB Local, the TLS proxy,
    the certificates, the stores with a stated latency, a scratch folder for
    logs; all stopped on exit."""

    def __init__(self, scratch, transports, store_latency_ms=0.0):
        super().__init__()
        self.scratch, self.transports, self.store_latency_ms = scratch, transports, store_latency_ms
        self.stores, self.tables = {}, 0
        self.issuer = None

    def __enter__(self):
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def start(self):
        self.daemon = XrayDaemon()
        self.callback(self.daemon.close)
        self.ddb = self.enter_context(DynamoDBLocal(self.path("dynamodb-local.log")))
        self.certs = make_certificates(self.path("tls")) if "https" in self.transports else None
        self.proxy = (
            self.enter_context(Proxy(self.ddb.port, self.path("tls-proxy.log"), self.certs)) if self.certs else None
        )

    def path(self, name):
        return os.path.join(self.scratch, name)

    def start_issuer(self):
        """JWTs on (`--jwt`): a throw-away issuer over HTTPS, whose variables
        every function gets; returns the token its requests should carry."""
        if self.certs is None:
            self.certs = make_certificates(self.path("tls"))
        self.issuer = self.enter_context(Issuer(self.path("issuer"), self.certs))
        return self.issuer.token

    def store(self, transport):
        """The store with a stated latency: a proxy in front of DynamoDB
        Local that holds every request `store_latency_ms` and records each
        request's trace header (started on first use)."""
        if transport not in self.stores:
            if transport == "https" and self.certs is None:
                self.certs = make_certificates(self.path("tls"))
            certs = self.certs if transport == "https" else None
            log_path, record = self.path(f"store-{transport}.log"), self.path(f"store-{transport}.trace-ids")
            proxy = Proxy(self.ddb.port, log_path, certs, self.store_latency_ms, record)
            self.stores[transport] = self.enter_context(proxy)
        return self.stores[transport]

    def table(self, subject, transport):
        self.tables += 1
        name = f"bench-{subject.name}-{transport}-{self.tables}"
        self.ddb.create_table(name)
        return name

    @contextlib.contextmanager
    def function(self, subject, transport, what="", table=None, quota=None, concurrency=None):
        """A function process, stopped at the end; a function that breaks
        ends the benchmark, naming `subject`, `what` it was doing and its
        log. With `quota`, spawned inside that CPU quota's cgroup; with
        `concurrency`, told it may take that many invocations at once (as
        on Lambda Managed Instances) and pointed at the store with a
        stated latency."""
        if concurrency:
            endpoint = self.store(transport).endpoint
        else:
            endpoint = self.proxy.endpoint if transport == "https" else self.ddb.endpoint
        env = subject.environment(transport, endpoint, self.certs, table or self.table(subject, transport))
        if self.issuer:
            # The issuer's certificate is from the throwaway CA: the bundle
            # with it replaces the system's, one certificate larger.
            env |= self.issuer.environment() | {"SSL_CERT_FILE": self.certs["bundle"]}
        if subject.kind == "rust":
            # As Lambda sets it with Tracing: Active, whether or not an
            # invocation is sampled.
            env["AWS_XRAY_DAEMON_ADDRESS"] = self.daemon.address
        if concurrency:
            env["AWS_LAMBDA_MAX_CONCURRENCY"] = str(concurrency)
        if quota:
            env["AWS_LAMBDA_FUNCTION_MEMORY_SIZE"] = str(quota.memory_mb)
            # A quota is per period and the cgroup outlives its processes: let
            # one period pass, so that a new process never starts on the rest
            # of a budget its predecessor spent.
            time.sleep(CGROUP_PERIOD_US / 1e6)
        log_path = self.path(f"{subject.name}-{transport}.log")
        fn = FunctionProcess(subject.argv, env, log_path, quota and quota.spawning, subject.echo, subject.sampled)
        try:
            yield fn
        except BROKEN as err:
            fail(f"{subject.name}{what} over {transport}: {err}; see {fn.log_path}")
        finally:
            fn.stop()
