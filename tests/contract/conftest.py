"""Contract tests: the real local stack, driven over real HTTP.

One session starts scripts/local_stack.py on free ports, with the static
token (DEV_TOKEN) and JWT verification against a throw-away issuer on
loopback. schemathesis runs after the HTTP tests, and the stack's stop, its
ports and its EMF documents are checked last (the `phase` marker).
"""

import os
import re
import signal
from pathlib import Path

import pytest
from helpers import JWT_AUDIENCE, TABLE, TOKEN, Api, Issuer, local_stack

READY_TIMEOUT = 1200  # seconds: a cold build is slow
STACK_LOG = pytest.StashKey[Path]()


def pytest_configure(config):
    config.addinivalue_line("markers", "phase(n): run after every test of a lower phase (0 by default)")
    # SIGTERM and SIGHUP stop the run as Ctrl-C does: the fixtures then stop the stack.
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, local_stack.on_signal)


def pytest_collection_modifyitems(items):
    # Stable: the file order stays within a phase.
    items.sort(key=lambda item: marker.args[0] if (marker := item.get_closest_marker("phase")) else 0)


@pytest.fixture(scope="session")
def workdir(tmp_path_factory):
    """The stack's log and schemathesis's files, outside the crate (watch must
    not see them); pytest keeps the last three runs'."""
    return tmp_path_factory.mktemp("contract")


@pytest.fixture(scope="session")
def issuer():
    issuer = Issuer()
    yield issuer
    issuer.close()


@pytest.fixture(scope="session")
def stack(workdir, issuer, request):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANTS_JWT_")}
    env.update(DEV_TOKEN=TOKEN, TABLE_NAME=TABLE, PLANTS_JWT_ISSUER=issuer.url, PLANTS_JWT_AUDIENCE=JWT_AUDIENCE)
    request.config.stash[STACK_LOG] = log_path = workdir / "local_stack.log"
    stack = local_stack.Background(log_path, env=env)
    try:
        stack.wait_ready(READY_TIMEOUT)
        print(f"stack ready: {stack.url}, DynamoDB Local on port {stack.dynamodb_port}, JWT issuer {issuer.url}")
        yield stack
    finally:
        stack.stop()  # again after test_after_the_stack_stops.py: then a no-op


@pytest.fixture(scope="session")
def api(stack):
    return Api(stack)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """On a failure: the stack's last lines (less the routine request lines) and where its log is."""
    log_path = config.stash.get(STACK_LOG, None)
    if exitstatus == 0 or not log_path or not log_path.exists():
        return
    routine = re.compile(r' INFO .*\brequest request_id=.* status=[1-4]|\{"_aws":')
    with open(log_path, encoding="utf-8", errors="replace") as f:
        kept = [line.rstrip("\n") for line in f if not routine.search(line)]
    terminalreporter.section("the local stack's last lines (routine request lines left out)")
    for line in kept[-40:]:
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"the stack's whole output: {log_path}")
