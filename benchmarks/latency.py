"""Workload 3: enqueue-to-start latency of one gq worker process.

Idle: jobs sent one at a time (perform) to an idle worker, 2-5 ms apart. Under load: an
open-loop producer (perform_many every 5 ms, not waiting on completions) at 50% and 80% of
the noop drain rate measured at the start of this run. Each job's data is its enqueue time;
the handler records time.time() minus it (same host, same clock). The producer runs in
this process, sharing the 2 cores with Redis and the worker.

usage: latency.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
import uuid

from common import (
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    percentiles,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue, gq_drain

import gq


def run(url: str, n: int, send, buffer: str = "100") -> dict:
    queue = f"bench-lat-{uuid.uuid4().hex[:8]}"
    env = {**os.environ, "BENCH_N": str(n)}
    proc = subprocess.Popen([PYTHON, str(WORKERS / "gq_worker.py"), url, queue, "100", buffer,
                             "latency"], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "ready"
        time.sleep(1.0)  # let it register and block on the signal
        send(gq.Producer(queue, url=url), n)
        out, _ = proc.communicate(timeout=120)
        return json.loads(out.strip().splitlines()[-1])
    finally:
        if proc.poll() is None:
            proc.kill()
        delete_queue(url, queue)


def idle_sender(producer: gq.Producer, n: int) -> None:
    for _ in range(n):
        producer.perform(repr(time.time()).encode())
        time.sleep(random.uniform(0.002, 0.005))


def load_sender(rate: float):
    def send(producer: gq.Producer, n: int) -> None:
        start, sent = time.perf_counter(), 0
        while sent < n:
            due = min(n, int((time.perf_counter() - start) * rate)) - sent
            if due > 0:
                stamp = repr(time.time()).encode()
                producer.perform_many([stamp] * due)
                sent += due
            time.sleep(0.005)
    return send


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    args = ap.parse_args()
    n_idle = 300 if args.quick else 1000
    seconds = 2 if args.quick else 5
    rows, data = [], {}
    with dedicated_redis() as url:
        info = machine(url)
        max_rate = max(gq_drain(url, 50_000, 100, 100)["rate"] for _ in range(3))
        idle = run(url, n_idle, idle_sender)
        data["idle"] = {"n": n_idle, **percentiles([x * 1000 for x in idle["latencies"]])}
        rows.append(["idle, one at a time", n_idle, "-", *(
            data["idle"][k] for k in ("p50", "p99", "p99.9", "max"))])
        for share in (0.5, 0.8):
            rate = max_rate * share
            n = int(rate * seconds)
            res = run(url, n, load_sender(rate))
            key = f"load_{int(share * 100)}"
            data[key] = {"n": n, "offered_rate": rate, "achieved_rate": res["rate"],
                         **percentiles([x * 1000 for x in res["latencies"]])}
            rows.append([f"{share:.0%} of max ({rate:,.0f}/s)", n, res["rate"], *(
                data[key][k] for k in ("p50", "p99", "p99.9", "max"))])
            print(rows[-1], file=sys.stderr, flush=True)
    payload = {"workload": "enqueue-to-start latency (ms), concurrency 100, buffer 100",
               "machine": info, "command": command(), "max_rate": max_rate,
               "versions": versions(["gq", "redis", "hiredis", "gevent"]), "results": data}
    write_json("latency", payload)
    print(f"max noop drain rate measured first: {max_rate:,.0f} jobs/s\n")
    print(markdown_table(["load", "jobs", "worker jobs/s", "p50 ms", "p99 ms", "p99.9 ms",
                          "max ms"], rows))


if __name__ == "__main__":
    main()
