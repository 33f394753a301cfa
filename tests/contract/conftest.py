"""Contract tests: the real local stack, driven over real HTTP.

One session starts scripts/local_stack.py on free ports, with the static
token (DEV_TOKEN) and JWT verification against a throw-away issuer on
loopback. schemathesis runs after the HTTP tests, and the stack's stop, its
ports and its EMF documents are checked last (the `phase` marker).
Options: --examples (default CONTRACT_EXAMPLES), --seed.
"""

import os
import re
import shutil
import signal
import tempfile

import pytest
from helpers import JWT_AUDIENCE, TABLE, TOKEN, Api, Issuer, local_stack

READY_TIMEOUT = 1200  # seconds: a cold build is slow
WORKDIR, STACK_LOG = pytest.StashKey[str](), pytest.StashKey[str]()


def pytest_addoption(parser):
    group = parser.getgroup("contract")
    examples = int(os.environ.get("CONTRACT_EXAMPLES") or 500)
    group.addoption("--examples", type=int, default=examples, help="schemathesis --max-examples per phase")
    group.addoption("--seed", type=int, default=42, help="schemathesis seed (default 42)")


def pytest_configure(config):
    config.addinivalue_line("markers", "phase(n): run after every test of a lower phase (0 by default)")

    # SIGTERM and SIGHUP stop the run as Ctrl-C does: the fixtures then stop the stack.
    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)


def pytest_collection_modifyitems(items):
    def phase(item):
        marker = item.get_closest_marker("phase")
        return marker.args[0] if marker else 0

    items.sort(key=phase)  # stable: the file order stays within a phase


@pytest.fixture(scope="session")
def workdir(request):
    """The stack's log and schemathesis's files, outside the crate (watch must
    not see them); removed when everything passed."""
    path = tempfile.mkdtemp(prefix="plant-store-contract-")
    request.config.stash[WORKDIR] = path
    yield path
    if request.session.testsfailed == 0:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def issuer():
    issuer = Issuer()
    yield issuer
    issuer.close()


@pytest.fixture(scope="session")
def stack(workdir, issuer, request):
    env = {k: v for k, v in os.environ.items() if not k.startswith("PLANTS_JWT_")}
    env.update(DEV_TOKEN=TOKEN, TABLE_NAME=TABLE, PLANTS_JWT_ISSUER=issuer.url, PLANTS_JWT_AUDIENCE=JWT_AUDIENCE)
    log_path = os.path.join(workdir, "local_stack.log")
    request.config.stash[STACK_LOG] = log_path
    stack = local_stack.Background(env=env, log_path=log_path)
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
    if exitstatus == 0 or not log_path or not os.path.exists(log_path):
        return
    with open(log_path, encoding="utf-8", errors="replace") as f:
        kept = [
            line.rstrip("\n")
            for line in f
            if not re.search(r" INFO .*\brequest request_id=.* status=[1-4]", line) and '{"_aws":' not in line
        ]
    terminalreporter.section("the local stack's last lines (routine request lines left out)")
    for line in kept[-40:]:
        terminalreporter.write_line(line)
    terminalreporter.write_line(f"kept for a look: {config.stash[WORKDIR]} (the stack's whole output: local_stack.log)")
