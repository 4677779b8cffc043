"""Tasks against bytes, side by side in one run (issue #16's cost targets):

- drain: a noop task (gq.App, @app.task) against a noop byte handler, one worker process,
  default settings, processor_concurrency 100; target >= 0.85x;
- enqueue: ``Task.enqueue_many`` against ``Producer.perform_many`` (batches of 1,000);
  target >= 0.8x.

Runs alternate (bytes, tasks, bytes, tasks...) so that the machine's drift hits both;
medians of --repeat runs.

usage: tasks.py [--quick] [--repeat K] [--n N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import uuid

from common import (
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    run_json,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue, gq_drain, strip

import gq

CONCURRENCY = 100
BATCH = 1000


def task_app(url: str, queue: str) -> tuple[gq.App, gq.Task[[int], None]]:
    app = gq.App(url=url, queue=queue)

    @app.task(name="noop")
    def noop(n: int) -> None: ...

    return app, noop


def task_drain(url: str, n: int) -> dict:
    queue = f"bench-task-{uuid.uuid4().hex[:8]}"
    _, noop = task_app(url, queue)
    for start in range(0, n, 10_000):
        noop.enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])
    try:
        return run_json([PYTHON, str(WORKERS / "task_worker.py"), url, queue, str(CONCURRENCY),
                         "auto"], 300, {"BENCH_N": str(n)})  # fmt: skip
    finally:
        delete_queue(url, queue)


def enqueue_rate(url: str, n: int, tasks: bool) -> float:
    queue = f"bench-enq-{uuid.uuid4().hex[:8]}"
    producer = gq.Producer(queue, url=url)
    _, noop = task_app(url, queue)
    calls = [(i,) for i in range(BATCH)]
    try:
        start = time.perf_counter()
        for _ in range(0, n, BATCH):
            if tasks:
                noop.enqueue_many(calls)
            else:
                producer.perform_many([b"x" * 16] * BATCH)
        return n / (time.perf_counter() - start)
    finally:
        delete_queue(url, queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    # 30,000 noop jobs drain in a quarter of a second here: a run that short is swayed by
    # whatever else the 2 cores do in it, so --quick keeps 100,000 and saves on --repeat.
    ap.add_argument("--n", type=int, default=None, help="jobs per run (default 100,000)")
    args = ap.parse_args()
    repeat = args.repeat or (3 if args.quick else 5)
    n = args.n or 100_000
    drains: dict[str, list[dict]] = {"bytes": [], "tasks": []}
    enqueues: dict[str, list[float]] = {"bytes": [], "tasks": []}
    with dedicated_redis() as url:
        info = machine(url)
        for _ in range(repeat):
            drains["bytes"].append(strip(gq_drain(url, n, CONCURRENCY, "auto")))
            drains["tasks"].append(strip(task_drain(url, n)))
            enqueues["bytes"].append(enqueue_rate(url, n, tasks=False))
            enqueues["tasks"].append(enqueue_rate(url, n, tasks=True))
            print({k: [round(r["rate"]) for r in v] for k, v in drains.items()},
                  {k: [round(r) for r in v] for k, v in enqueues.items()},
                  file=sys.stderr, flush=True)  # fmt: skip
    rate = {k: statistics.median(r["rate"] for r in v) for k, v in drains.items()}
    cpu = {k: statistics.median(r["cpu_us_per_job"] for r in v) for k, v in drains.items()}
    enq = {k: statistics.median(v) for k, v in enqueues.items()}
    rows = [
        ["drain, noop, C=100 (jobs/s)", rate["bytes"], rate["tasks"],
         f"{rate['tasks'] / rate['bytes']:.2f}", ">= 0.85"],
        ["drain CPU (µs/job)", cpu["bytes"], cpu["tasks"], f"{cpu['tasks'] / cpu['bytes']:.2f}",
         ""],
        ["enqueue, batches of 1,000 (jobs/s)", enq["bytes"], enq["tasks"],
         f"{enq['tasks'] / enq['bytes']:.2f}", ">= 0.8"],
    ]  # fmt: skip
    write_json("tasks", {
        "workload": "noop task vs noop byte job; enqueue_many vs perform_many",
        "machine": info, "command": command(), "repeat": repeat, "n": n,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "greenlet", "msgpack"]),
        "drains": drains, "enqueues": enqueues,
    })  # fmt: skip
    print(markdown_table(["workload", "bytes", "tasks", "tasks ÷ bytes", "target"], rows))


if __name__ == "__main__":
    main()
