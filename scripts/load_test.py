#!/usr/bin/env python3
"""Load test of the local stack, then an audit of every answer against the table.

Starts scripts/local_stack.py on free ports and sends a fixed number of
requests from many concurrent clients over real HTTP, mixed by the seed: new
plants, identical retries, conflicting plants under a taken id, and the bad
requests of EXPECTED_REJECTION. Then every answer is checked against the
contract and the table (read from DynamoDB Local): no 5xx and no failed
connection (no fault is injected here); every bad request got its exact
status and error code and left no item; per id, one body won: every request
with it got 200 with its name and tag, every other body 409 (40901); the
table holds exactly the winners, each exactly (no lost write, no item no 200
accounts for, no stray attribute). Prints throughput and latency
percentiles; exit code 0 when the audit passes.
"""

import argparse
import collections
import contextlib
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


# (kind, weight). Bad kinds are answered before the store is reached.
MIX = {"new": 50, "retry": 20, "conflict": 10, "bad_json": 4, "unknown_field": 4, "missing_name": 3}
MIX |= {"no_token": 3, "wrong_token": 3, "wrong_content_type": 3}

# What each bad kind must get: status and error code; and how it spoils a good request.
EXPECTED_REJECTION = {
    "bad_json": (400, 40001, lambda r: r.update(body=r["body"][:-1])),
    "unknown_field": (400, 40005, lambda r: r.update(body=dumps({**r["plant"], "colour": "green"}))),
    "missing_name": (400, 40002, lambda r: r.update(body=dumps({"id": r["plant"]["id"]}))),
    "no_token": (401, 40101, lambda r: r["headers"].pop("Authorization")),
    "wrong_token": (401, 40102, lambda r: r["headers"].update(Authorization="Bearer not-the-token")),
    "wrong_content_type": (415, 41501, lambda r: r["headers"].update({"Content-Type": "text/plain"})),
}

NAMES = ["Monstera", "Ficus lyrata", "Pilea peperomioides", "Aloe vera", "Calathea 🌿", "Fougère", "Sansevieria"]
TAGS = [None, "aroid", "succulent", "fern", "trailing", "🌱"]


def dumps(value):
    return json.dumps(value, ensure_ascii=False)


def plan(count, seed):
    """The requests to send, in order: dicts with kind, plant, body, headers."""
    rng = random.Random(seed)
    planned, created = [], []
    next_id = rng.randrange(1, 2**40)  # fresh ids, distinct between runs of other seeds
    for _ in range(count):
        kind = rng.choices(list(MIX), list(MIX.values()))[0]
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
            if (tag := rng.choice(TAGS)) is not None:
                plant["tag"] = tag
            if kind == "new":
                created.append(plant)
        headers = {"Content-Type": "application/json", "Authorization": "Bearer {token}"}
        request = {"kind": kind, "plant": plant, "body": dumps(plant), "headers": headers}
        if kind in EXPECTED_REJECTION:
            EXPECTED_REJECTION[kind][2](request)
        planned.append(request)
    return planned


def run_load(url, token, planned, clients):
    """Send `planned` from `clients` threads, each on its own keep-alive connection."""
    local, sessions = threading.local(), []

    def connect():  # once per thread
        sessions.append(session := requests.Session())
        session.trust_env, local.session = False, session  # loopback only: no proxy, no netrc

    def send(request):
        headers = {name: value.format(token=token) for name, value in request["headers"].items()}
        started, outcome = time.perf_counter(), {"status": None, "body": None, "code": None, "error": None}
        try:
            response = local.session.post(url, data=request["body"].encode(), headers=headers, timeout=REQUEST_TIMEOUT)
            outcome["status"], outcome["body"] = response.status_code, response.text
            with contextlib.suppress(ValueError):
                outcome["body"] = response.json()
            outcome["code"] = outcome["body"].get("error") if isinstance(outcome["body"], dict) else None
        except requests.RequestException as err:
            outcome["error"] = f"{type(err).__name__}: {err}"
        return dict(outcome, latency=time.perf_counter() - started)

    started = time.perf_counter()
    with ThreadPoolExecutor(clients, initializer=connect) as pool:
        results = list(pool.map(send, planned))
    elapsed = time.perf_counter() - started
    for session in sessions:
        session.close()
    return results, elapsed


def audit(planned, results, items):
    """Every failed check as a line, and the body that won per id; no line when the audit passes."""
    failures, by_id = [], collections.defaultdict(list)

    def answer(index):  # what a request gets with a 200: its plant without the id
        return {key: value for key, value in planned[index]["plant"].items() if key != "id"}

    def fail(index, expected):
        request, result = planned[index], results[index]
        got = result["error"] or f"{result['status']} {result['body']}"
        failures.append(f"#{index} {request['kind']} {request['body'][:120]!r}: expected {expected}, got {got}")

    for index, (request, result) in enumerate(zip(planned, results, strict=True)):
        if result["error"] is not None:
            fail(index, "an answer")
        elif result["status"] >= 500:
            fail(index, "no 5xx")
        elif want := EXPECTED_REJECTION.get(request["kind"]):
            if (result["status"], result["code"]) != want[:2]:
                fail(index, f"{want[0]} ({want[1]})")
        else:
            by_id[request["plant"]["id"]].append(index)

    winners = {}
    for plant_id, indexes in by_id.items():  # one body won: 200 with it, 409 (40901) for every other
        won = {dumps(answer(index)) for index in indexes if results[index]["status"] == 200}
        if len(won) != 1:
            failures.append(f"id {plant_id}: {len(won)} different bodies got 200: {sorted(won)}")
            continue
        winners[plant_id] = winner = json.loads(won.pop())
        for index in indexes:
            want = (200, winner) if answer(index) == winner else (409, 40901)
            if (results[index]["status"], results[index]["body" if want[0] == 200 else "code"]) != want:
                fail(index, f"{want[0]} {want[1]}")

    stored = {}
    for item in items:
        if not ({"id", "name", "created_at"} <= set(item) <= {"id", "name", "tag", "created_at"}):
            failures.append(f"item with unexpected attributes: {item}")
            continue
        stored[int(item["id"]["N"])] = {key: item[key]["S"] for key in ("name", "tag") if key in item}
    for plant_id, plant in winners.items():
        if plant_id not in stored:
            failures.append(f"lost write: id {plant_id} got 200 {plant} but is not in the table")
        elif stored[plant_id] != plant:
            failures.append(f"id {plant_id}: stored {stored[plant_id]}, but the 200 said {plant}")
    for plant_id in stored.keys() - winners.keys():
        failures.append(f"stray item: id {plant_id} {stored[plant_id]} is not accounted for by any 200")
    return failures, winners


def report(planned, results, elapsed, clients, winners):
    statuses = collections.Counter(result["status"] if result["error"] is None else "error" for result in results)
    latencies = sorted(result["latency"] * 1000 for result in results)
    kinds = collections.Counter(request["kind"] for request in planned)
    log(f"{len(planned)} requests from {clients} clients in {elapsed:.2f} s: {len(planned) / elapsed:.0f} requests/s")
    ranks = {"p50": 0.5, "p90": 0.9, "p99": 0.99, "max": 1.0}  # nearest rank
    ms = {name: latencies[max(0, round(rank * len(latencies)) - 1)] for name, rank in ranks.items()}
    log("latency ms: " + ", ".join(f"{name} {value:.1f}" for name, value in ms.items()))
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

    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, local_stack.on_signal)

    token, table = local_stack.settings()
    planned = plan(args.requests, args.seed)
    log_path = local_stack.ROOT / "target" / "tmp" / "load-test-stack.log"  # beside the Rust tests' logs
    log_path.parent.mkdir(parents=True, exist_ok=True)
    stack = local_stack.Background(log_path, release=args.release)
    failures = []
    try:
        url = stack.wait_ready(STACK_READY_TIMEOUT, echo="")
        log(f"sending {args.requests} requests (seed {args.seed}) from {args.clients} clients to {url}")
        results, elapsed = run_load(url, token, planned, args.clients)
        scan = local_stack.dynamodb_client(stack.dynamodb_port).get_paginator("scan")
        items = [item for page in scan.paginate(TableName=table, ConsistentRead=True) for item in page["Items"]]
        failures, winners = audit(planned, results, items)
        report(planned, results, elapsed, args.clients, winners)
    except local_stack.StackError as err:
        failures.append(str(err))
    except KeyboardInterrupt:
        failures.append("interrupted")
    finally:
        failures += stack.stop()
    if failures:
        for failure in failures[:50]:
            log(f"FAIL {failure}")
        if len(failures) > 50:
            log(f"... and {len(failures) - 50} more")
        log(f"audit failed: {len(failures)} problem(s); the stack's whole output: {stack.log_path}")
        return 1
    log("audit passed: no 5xx, no lost write, no stray item, every answer as the contract says")
    return 0


if __name__ == "__main__":
    sys.exit(main())
