#!/usr/bin/env python3
"""Load test of the local stack, then an audit of every answer against the table.

Starts scripts/local_stack.py on free ports (DynamoDB Local + the table + the
function under `cargo lambda watch`), sends a fixed number of requests from
many concurrent clients over real HTTP, and stops the stack again, whatever
happens. The mix is fixed by the seed: new plants, identical retries,
conflicting plants under a taken id, and bad requests (bad JSON, an unknown
field, a missing field, no token, a wrong token, a wrong content type).

Afterwards every response is checked against the contract and against the
table, read directly from DynamoDB Local:
  - no 5xx and no failed connection (no fault is injected here);
  - every bad request got its exact status and error code, and left no item;
  - per id, one body won: every request with it got 200 with the body's
    name and tag, every other body got 409 (40901);
  - the table holds exactly the winners, each one exactly (no lost write,
    no item that no 200 accounts for, no stray attribute).
Throughput and latency percentiles are printed. Exit code 0 when the audit
passes. Python 3.9+ standard library only.
"""

import argparse
import collections
import http.client
import json
import os
import queue
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_stack  # noqa: E402  (same folder: reuse its DynamoDB client and port checks)

ROOT = Path(__file__).resolve().parent.parent
STACK_READY_TIMEOUT = 900  # seconds; the first start may compile the function
REQUEST_TIMEOUT = 30


def log(message):
    print(f"load-test: {message}", flush=True)


class AuditFailure(Exception):
    pass


# ---- the plan -----------------------------------------------------------------

# (kind, weight). Bad kinds are answered before the store is reached.
MIX = [
    ("new", 50),
    ("retry", 20),
    ("conflict", 10),
    ("bad_json", 4),
    ("unknown_field", 4),
    ("missing_name", 3),
    ("no_token", 3),
    ("wrong_token", 3),
    ("wrong_content_type", 3),
]

# What each bad kind must get: status and error code.
EXPECTED_REJECTION = {
    "bad_json": (400, 40001),
    "unknown_field": (400, 40005),
    "missing_name": (400, 40002),
    "no_token": (401, 40101),
    "wrong_token": (401, 40102),
    "wrong_content_type": (415, 41501),
}

NAMES = ["Monstera", "Ficus lyrata", "Pilea peperomioides", "Aloe vera", "Calathea 🌿", "Fougère", "Sansevieria"]
TAGS = [None, "aroid", "succulent", "fern", "trailing", "🌱"]


def plan(count, seed):
    """The requests to send, in order: dicts with kind, id, body, headers."""
    rng = random.Random(seed)
    kinds = [kind for kind, _ in MIX]
    weights = [weight for _, weight in MIX]
    requests, created = [], []
    next_id = rng.randrange(1, 2**40)  # fresh ids, distinct between runs of other seeds
    for _ in range(count):
        kind = rng.choices(kinds, weights)[0]
        if kind in ("retry", "conflict") and not created:
            kind = "new"
        if kind == "retry":
            # Mostly recent plants, so that some retries race their original.
            plant = dict(created[-1 - min(len(created) - 1, int(rng.expovariate(0.1)))])
        elif kind == "conflict":
            plant = dict(rng.choice(created))
            plant["name"] = f"{plant['name']} (other {rng.randrange(10**6)})"
        else:
            next_id += 1
            plant = {"id": next_id, "name": f"{rng.choice(NAMES)} #{next_id % 10000}"}
            tag = rng.choice(TAGS)
            if tag is not None:
                plant["tag"] = tag
            if kind == "new":
                created.append(plant)
        body = json.dumps(plant, ensure_ascii=False)
        headers = {"Content-Type": "application/json", "Authorization": "Bearer {token}"}
        if kind == "bad_json":
            body = body[:-1]
        elif kind == "unknown_field":
            body = json.dumps({**plant, "colour": "green"}, ensure_ascii=False)
        elif kind == "missing_name":
            body = json.dumps({"id": plant["id"]})
        elif kind == "no_token":
            del headers["Authorization"]
        elif kind == "wrong_token":
            headers["Authorization"] = "Bearer not-the-token"
        elif kind == "wrong_content_type":
            headers["Content-Type"] = "text/plain"
        requests.append({"kind": kind, "plant": plant, "body": body.encode(), "headers": headers})
    return requests


# ---- sending ------------------------------------------------------------------


def client(url, token, work, results):
    """One client: its own keep-alive connection, requests from the queue."""
    parts = urlsplit(url)
    connection = None
    while True:
        try:
            index, request = work.get_nowait()
        except queue.Empty:
            break
        headers = {name: value.format(token=token) for name, value in request["headers"].items()}
        started = time.perf_counter()
        outcome = {"status": None, "body": None, "error": None}
        try:
            if connection is None:
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=REQUEST_TIMEOUT)
            connection.request("POST", parts.path, body=request["body"], headers=headers)
            response = connection.getresponse()
            raw = response.read()
            outcome["status"] = response.status
            try:
                outcome["body"] = json.loads(raw)
            except ValueError:
                outcome["body"] = raw.decode(errors="replace")
            if response.will_close:
                connection.close()
                connection = None
        except (OSError, http.client.HTTPException) as err:
            outcome["error"] = f"{type(err).__name__}: {err}"
            if connection is not None:
                connection.close()
            connection = None
        outcome["latency"] = time.perf_counter() - started
        results[index] = outcome
    if connection is not None:
        connection.close()


def run_load(url, token, requests, clients):
    work = queue.Queue()
    for item in enumerate(requests):
        work.put(item)
    results = [None] * len(requests)
    threads = [threading.Thread(target=client, args=(url, token, work, results), daemon=True) for _ in range(clients)]
    started = time.perf_counter()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return results, time.perf_counter() - started


# ---- the audit ----------------------------------------------------------------


def scan(port, table):
    items, start = [], None
    while True:
        payload = {"TableName": table, "ConsistentRead": True}
        if start:
            payload["ExclusiveStartKey"] = start
        page = local_stack.dynamodb(port, "Scan", payload, timeout=30)
        items.extend(page.get("Items", []))
        start = page.get("LastEvaluatedKey")
        if not start:
            return items


def expected_body(plant):
    return {key: plant[key] for key in ("name", "tag") if key in plant}


def audit(requests, results, items):
    """Every failed check as a line; empty when the audit passes."""
    failures = []

    def fail(index, message):
        request = requests[index]
        failures.append(f"#{index} {request['kind']} {request['body'][:120]!r}: {message}")

    by_id = {}
    for index, (request, result) in enumerate(zip(requests, results)):
        kind, status = request["kind"], result["status"]
        if result["error"] is not None:
            fail(index, f"no answer: {result['error']}")
            continue
        if status >= 500:
            fail(index, f"got {status} {result['body']}")
            continue
        if kind in EXPECTED_REJECTION:
            want = EXPECTED_REJECTION[kind]
            got = (status, result["body"].get("error") if isinstance(result["body"], dict) else None)
            if got != want:
                fail(index, f"expected {want}, got {status} {result['body']}")
            continue
        by_id.setdefault(request["plant"]["id"], []).append(index)

    winners = {}
    for plant_id, indexes in by_id.items():
        bodies = {}
        for index in indexes:
            key = json.dumps(expected_body(requests[index]["plant"]), sort_keys=True)
            bodies.setdefault(key, []).append(index)
        won = [key for key, group in bodies.items() if any(results[i]["status"] == 200 for i in group)]
        if len(won) != 1:
            failures.append(f"id {plant_id}: {len(won)} different bodies got 200: {won}")
            continue
        winners[plant_id] = json.loads(won[0])
        for key, group in bodies.items():
            for index in group:
                result = results[index]
                if key == won[0]:
                    if (result["status"], result["body"]) != (200, winners[plant_id]):
                        fail(index, f"expected 200 {winners[plant_id]}, got {result['status']} {result['body']}")
                else:
                    body = result["body"] if isinstance(result["body"], dict) else {}
                    if (result["status"], body.get("error")) != (409, 40901):
                        fail(index, f"expected 409 (40901), got {result['status']} {result['body']}")

    stored = {}
    for item in items:
        keys = set(item)
        if not ({"id", "name", "created_at"} <= keys <= {"id", "name", "tag", "created_at"}):
            failures.append(f"item with unexpected attributes: {item}")
            continue
        plant = {"name": item["name"]["S"]}
        if "tag" in item:
            plant["tag"] = item["tag"]["S"]
        stored[int(item["id"]["N"])] = plant
    for plant_id, plant in winners.items():
        if plant_id not in stored:
            failures.append(f"lost write: id {plant_id} got 200 {plant} but is not in the table")
        elif stored[plant_id] != plant:
            failures.append(f"id {plant_id}: stored {stored[plant_id]}, but the 200 said {plant}")
    for plant_id in stored.keys() - winners.keys():
        failures.append(f"stray item: id {plant_id} {stored[plant_id]} is not accounted for by any 200")
    return failures, winners


def percentile(sorted_values, fraction):
    index = min(len(sorted_values) - 1, max(0, round(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


def report(requests, results, elapsed, clients, winners):
    statuses = {}
    for request, result in zip(requests, results):
        key = result["status"] if result["error"] is None else "error"
        statuses[key] = statuses.get(key, 0) + 1
    latencies = sorted(result["latency"] * 1000 for result in results)
    kinds = {}
    for request in requests:
        kinds[request["kind"]] = kinds.get(request["kind"], 0) + 1
    log(f"{len(requests)} requests from {clients} clients in {elapsed:.2f} s: {len(requests) / elapsed:.0f} requests/s")
    log(
        "latency ms: "
        + ", ".join(
            f"{name} {percentile(latencies, fraction):.1f}"
            for name, fraction in (("p50", 0.50), ("p90", 0.90), ("p99", 0.99), ("max", 1.0))
        )
    )
    log("sent: " + ", ".join(f"{kind} {count}" for kind, count in sorted(kinds.items())))
    log("answers: " + ", ".join(f"{status}: {count}" for status, count in sorted(statuses.items(), key=str)))
    log(f"plants stored: {len(winners)}")


# ---- the stack ------------------------------------------------------------------


class StackProcess:
    """scripts/local_stack.py on free ports, stopped with SIGTERM like Ctrl-C."""

    def __init__(self, release):
        env = dict(os.environ, PORT="0", DYNAMODB_PORT="0")
        argv = [sys.executable, str(ROOT / "scripts" / "local_stack.py")] + (["--release"] if release else [])
        self.process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, text=True, bufsize=1
        )
        self.lines = queue.Queue()
        self.recent = collections.deque(maxlen=40)  # the stack's last words, for a failure
        threading.Thread(target=self._pump, daemon=True).start()
        self.url = self.dynamodb_port = None

    def _pump(self):
        for line in self.process.stdout:
            self.recent.append(line)
            if self.url is None:
                self.lines.put(line)
        self.lines.put(None)

    def output(self):
        return "".join(self.recent)

    def wait_ready(self):
        deadline = time.monotonic() + STACK_READY_TIMEOUT
        while self.url is None:
            try:
                line = self.lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                raise AuditFailure(f"the local stack was not ready within {STACK_READY_TIMEOUT} s") from None
            if line is None:
                print(self.output(), end="", file=sys.stderr)
                raise AuditFailure(f"the local stack exited with code {self.process.wait()} before it was ready")
            if line.startswith("local-stack:"):
                print(line, end="", flush=True)
            if line.startswith("DYNAMODB "):
                self.dynamodb_port = urlsplit(line.split()[1]).port
            elif line.startswith("READY "):
                self.url = line.split()[1]
        if self.dynamodb_port is None:
            raise AuditFailure("the local stack did not say where DynamoDB Local listens")
        return self.url

    def stop(self):
        """Stops the stack and checks that both ports are free again."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                log("the local stack did not stop within 60 s: killing it")
                self.process.kill()
                self.process.wait()
        busy = []
        for port in (self.dynamodb_port, urlsplit(self.url).port if self.url else None):
            if port is not None and not local_stack.wait_port_free(port, 10):
                busy.append(port)
        if busy:
            raise AuditFailure(f"ports still in use after the stack stopped: {busy}")
        return self.process.returncode


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=5000, help="requests to send (default 5000)")
    parser.add_argument("--clients", type=int, default=32, help="concurrent clients (default 32)")
    parser.add_argument("--seed", type=int, default=20260522, help="seed of the request mix")
    parser.add_argument("--release", action="store_true", help="serve a release build of the function")
    args = parser.parse_args()
    if args.requests < 1 or args.clients < 1:
        parser.error("--requests and --clients must be at least 1")

    def on_signal(signum, _frame):
        raise KeyboardInterrupt(signal.Signals(signum).name)

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, on_signal)

    token = os.environ.get("DEV_TOKEN", "") or local_stack.DEFAULT_TOKEN
    table = os.environ.get("TABLE_NAME", "").strip() or "plants"
    requests = plan(args.requests, args.seed)
    stack = StackProcess(args.release)
    failures = []
    try:
        url = stack.wait_ready()
        log(f"sending {args.requests} requests (seed {args.seed}) from {args.clients} clients to {url}")
        results, elapsed = run_load(url, token, requests, args.clients)
        items = scan(stack.dynamodb_port, table)
        failures, winners = audit(requests, results, items)
        report(requests, results, elapsed, args.clients, winners)
    except AuditFailure as err:
        failures.append(str(err))
    except KeyboardInterrupt:
        failures.append("interrupted")
    finally:
        try:
            stack.stop()
        except AuditFailure as err:
            failures.append(str(err))
    if failures:
        for failure in failures[:50]:
            log(f"FAIL {failure}")
        if len(failures) > 50:
            log(f"... and {len(failures) - 50} more")
        log(f"audit failed: {len(failures)} problem(s)")
        return 1
    log("audit passed: no 5xx, no lost write, no stray item, every answer as the contract says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
