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
passes. Runs on the tool venv's Python (requests, boto3).
"""

import argparse
import collections
import json
import random
import signal
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import requests

sys.path.insert(0, str(Path(__file__).resolve().parent))
import local_stack  # noqa: E402  (same folder: the stack as a child process, DynamoDB Local's client)

STACK_READY_TIMEOUT = 900  # seconds; the first start may compile the function
REQUEST_TIMEOUT = 30


def log(message):
    print(f"load-test: {message}", flush=True)


# ---- the plan -----------------------------------------------------------------

# (kind, weight). Bad kinds are answered before the store is reached.
MIX = [("new", 50), ("retry", 20), ("conflict", 10), ("bad_json", 4), ("unknown_field", 4), ("missing_name", 3)]
MIX += [("no_token", 3), ("wrong_token", 3), ("wrong_content_type", 3)]

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
    planned, created = [], []
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
        planned.append({"kind": kind, "plant": plant, "body": body.encode(), "headers": headers})
    return planned


# ---- sending ------------------------------------------------------------------


def run_load(url, token, planned, clients):
    """Send `planned` from `clients` threads, each on its own keep-alive connection."""
    local, sessions = threading.local(), []

    def send(request):
        if not hasattr(local, "session"):
            local.session = requests.Session()
            local.session.trust_env = False  # loopback only: no proxy, no netrc
            sessions.append(local.session)
        headers = {name: value.format(token=token) for name, value in request["headers"].items()}
        started = time.perf_counter()
        outcome = {"status": None, "body": None, "error": None}
        try:
            response = local.session.post(url, data=request["body"], headers=headers, timeout=REQUEST_TIMEOUT)
            outcome["status"] = response.status_code
            try:
                outcome["body"] = response.json()
            except ValueError:
                outcome["body"] = response.text
        except requests.RequestException as err:
            outcome["error"] = f"{type(err).__name__}: {err}"
        return dict(outcome, latency=time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        results = list(pool.map(send, planned))
    elapsed = time.perf_counter() - started
    for session in sessions:
        session.close()
    return results, elapsed


# ---- the audit ----------------------------------------------------------------


def scan(port, table):
    pages = local_stack.dynamodb_client(port).get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
    return [item for page in pages for item in page["Items"]]


def expected_body(plant):
    return {key: plant[key] for key in ("name", "tag") if key in plant}


def audit(planned, results, items):
    """Every failed check as a line; empty when the audit passes."""
    failures = []

    def fail(index, message):
        request = planned[index]
        failures.append(f"#{index} {request['kind']} {request['body'][:120]!r}: {message}")

    by_id = {}
    for index, (request, result) in enumerate(zip(planned, results, strict=True)):
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
            key = json.dumps(expected_body(planned[index]["plant"]), sort_keys=True)
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


def report(planned, results, elapsed, clients, winners):
    statuses = collections.Counter(result["status"] if result["error"] is None else "error" for result in results)
    latencies = sorted(result["latency"] * 1000 for result in results)
    kinds = collections.Counter(request["kind"] for request in planned)
    log(f"{len(planned)} requests from {clients} clients in {elapsed:.2f} s: {len(planned) / elapsed:.0f} requests/s")
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

    token, table = local_stack.settings()
    planned = plan(args.requests, args.seed)
    stack = local_stack.Background(release=args.release, echo="")
    failures = []
    try:
        url = stack.wait_ready(STACK_READY_TIMEOUT)
        log(f"sending {args.requests} requests (seed {args.seed}) from {args.clients} clients to {url}")
        results, elapsed = run_load(url, token, planned, args.clients)
        items = scan(stack.dynamodb_port, table)
        failures, winners = audit(planned, results, items)
        report(planned, results, elapsed, args.clients, winners)
    except local_stack.StackError as err:
        failures.append(str(err))
    except KeyboardInterrupt:
        failures.append("interrupted")
    finally:
        failures += stack.stop(timeout=60)
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
