"""Results and workflows (issue #18's cost targets), side by side in one run:

- drain: a noop task with results off (no result_ttl: the plain ack, carried on fetches)
  against the same task with result_ttl (ack_results.lua writes each result); one worker
  process, processor_concurrency 100; target: results on >= 0.85x off;
- wake-up: get() on a job, from the outcome's write (the server time ack_results.lua
  stamps it with) to get() returning; p50 / p99 over sequential jobs; target p99 <= 10 ms;
  and the Redis commands one caller waiting 5 s for an outcome that never comes costs;
- a chain of 3 noop steps, and a group of 1,000 members with a callback, against the
  same jobs enqueued flat (each kept, all awaited);
- memory: bytes per kept result (used_memory over 10,000 kept results).

Runs alternate (off, on, off, on...) so that the machine's drift hits both; medians of
--repeat runs.

usage: results.py [--quick] [--repeat K] [--parts drain,wake,workflows,memory] [--buffer B]

--parts runs only the parts named (all by default): ``--parts drain`` is the fast loop
for the drain's ratio. --buffer sets the drain worker's poller_buffer_size (default
"auto", gq's default; a tuned figure sits next to it in benchmarks/README.md).
"""

from __future__ import annotations

import argparse
import contextlib
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import redis
from common import (
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    percentiles,
    run_json,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue, strip

import gq
from gq.store.outcomes import read_state
from gq.store.tasks import TaskQueue

sys.path.insert(0, str(WORKERS))
from results_app import build  # noqa: E402

CONCURRENCY = 100


def drain(url: str, n: int, ttl: float, buffer: str = "auto") -> dict[str, Any]:
    queue = f"bench-res-{uuid.uuid4().hex[:8]}"
    app = build(queue, ttl)
    app.connect(url)
    for start in range(0, n, 10_000):
        app.tasks["noop"].enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])
    direct = redis.Redis.from_url(url)
    before = _redis_cpu(direct)
    try:
        worker = [PYTHON, str(WORKERS / "results_worker.py"), url, queue, str(CONCURRENCY),
                  str(ttl), buffer]  # fmt: skip
        result = run_json(worker, 300, {"BENCH_N": str(n)})
        result["redis_cpu_us_per_job"] = (_redis_cpu(direct) - before) / n * 1e6
        return result
    finally:
        delete_queue(url, queue)


def _redis_cpu(client: redis.Redis) -> float:
    """The Redis server's own CPU seconds so far (user + system)."""
    cpu = client.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


class Serving:
    """A results_worker.py serving ``queue`` until the block ends."""

    def __init__(self, url: str, queue: str) -> None:
        self.proc = subprocess.Popen(
            [PYTHON, str(WORKERS / "results_worker.py"), url, queue, str(CONCURRENCY), "3600"],
            stdout=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert self.proc.stdout is not None and self.proc.stdout.readline().strip() == "ready"

    def __enter__(self) -> Serving:
        return self

    def __exit__(self, *exc: object) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def wake_ups(url: str, count: int) -> dict[str, float]:
    """Milliseconds from the outcome's write to get() returning, over ``count`` jobs."""
    queue = f"bench-wake-{uuid.uuid4().hex[:8]}"
    app = build(queue, 3600)
    app.connect(url)
    store = TaskQueue(redis.Redis.from_url(url), queue)
    step = app.tasks["step"]
    late: list[float] = []
    with Serving(url, queue):
        step.enqueue().get(timeout=30)  # the subscription is made, the worker is up
        for _ in range(count):
            r = step.enqueue()
            r.get(timeout=30)
            returned = time.time()
            record = read_state(store, r.id).record
            at = 0.0 if record is None or record.at is None else record.at
            late.append((returned - at) * 1000)
    delete_queue(url, queue)
    return percentiles(late, (50, 99))


def waiting_cost(url: str, seconds: float = 5.0) -> float:
    """Redis commands per second one caller of get() costs while nothing comes."""
    queue = f"bench-idle-{uuid.uuid4().hex[:8]}"
    app = build(queue, 3600)
    app.connect(url)
    direct = redis.Redis.from_url(url)
    r = app.tasks["step"].enqueue()
    before = int(direct.info("stats")["total_commands_processed"])
    with contextlib.suppress(TimeoutError):
        r.get(timeout=seconds)
    after = int(direct.info("stats")["total_commands_processed"])
    delete_queue(url, queue)
    return (after - before - 2) / seconds  # (the two INFO calls)


def workflows(url: str, chains: int, members: int) -> dict[str, float]:
    """Seconds for ``chains`` chains of 3 steps against 3 x ``chains`` flat jobs, and a
    group of ``members`` with a callback against ``members`` + 1 flat jobs; every job
    kept; from the first enqueue to the last job's get() (the last one enqueued: with
    FIFO queues it ends about last), so that both sides pay one get()."""
    queue = f"bench-wf-{uuid.uuid4().hex[:8]}"
    app = build(queue, 3600)
    app.connect(url)
    step, total = app.tasks["step"], app.tasks["total"]
    out: dict[str, float] = {}
    with Serving(url, queue):
        step.enqueue().get(timeout=30)
        start = time.perf_counter()
        step.enqueue_many([() for _ in range(3 * chains)])[-1].get(timeout=120)
        out["flat_3x"] = time.perf_counter() - start
        start = time.perf_counter()
        handles = [gq.chain(step.s(), step.s(), step.s()).enqueue() for _ in range(chains)]
        handles[-1].get(timeout=120)
        out["chains"] = time.perf_counter() - start
        start = time.perf_counter()
        step.enqueue_many([() for _ in range(members + 1)])[-1].get(timeout=120)
        out["flat_group"] = time.perf_counter() - start
        start = time.perf_counter()
        gq.group(step.s() for _ in range(members)).then(total.s()).enqueue().get(timeout=120)
        out["group"] = time.perf_counter() - start
    delete_queue(url, queue)
    return out


def bytes_per_result(url: str, n: int = 10_000) -> dict[str, float]:
    """used_memory per kept result of a noop task (None) and of one returning 100 bytes:
    n jobs acknowledged with their results against n acknowledged plainly (an ack frees
    the job's message either way)."""
    from gq import job as jobs
    from gq.store.outcomes import finish
    from gq.store.tasks import TaskQueue
    from gq.tasks import envelope
    from gq.tasks.outcome import finisher

    queue = f"bench-mem-{uuid.uuid4().hex[:8]}"
    direct = redis.Redis.from_url(url)
    store = TaskQueue(direct, queue)
    store.register("mem")
    data = envelope.encode("noop", [1], {}, {"result_ttl": 3600})
    env = envelope.fields(data)

    def grown(label: str, ack: Any) -> float:
        batch = [gq.Job(f"{label}-{i}", data) for i in range(n)]
        store.push([(j.id, jobs.encode(j)) for j in batch])
        assert sum(len(store.fetch("mem", 1000)) for _ in range(0, n, 1000)) == n
        before = int(direct.info("memory")["used_memory"])
        ack(batch)
        return int(direct.info("memory")["used_memory"]) - before

    plain = grown("plain", lambda batch: store.ack("mem", [j.id for j in batch]))
    sizes: dict[str, float] = {}
    for label, value in (("None", None), ("100-byte str", "x" * 100)):

        def keep(batch: list[gq.Job], value: Any = value) -> None:
            outcomes = [finisher(j, env) for j in batch]
            finish(store, "mem", [(j.id, f.done(value)) for j, f in zip(batch, outcomes) if f])

        kept = grown(label, keep)
        sizes[label] = (kept - plain) / n
    delete_queue(url, queue)
    return sizes


PARTS = ("drain", "wake", "workflows", "memory")


def run_parts(
    url: str, parts: set[str], repeat: int, n: int, quick: bool, buffer: str = "auto"
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if "drain" in parts:
        drains: dict[str, list[dict[str, Any]]] = {"off": [], "on": []}
        for _ in range(repeat):
            drains["off"].append(strip(drain(url, n, 0, buffer)))
            drains["on"].append(strip(drain(url, n, 3600, buffer)))
            print({k: [round(r["rate"]) for r in v] for k, v in drains.items()}, file=sys.stderr,
                  flush=True)  # fmt: skip
        out["drains"] = drains
    if "wake" in parts:
        out["wake_ms"] = wake_ups(url, 200 if quick else 1000)
        out["waiting_commands_per_s"] = waiting_cost(url)
    if "workflows" in parts:
        out["workflows_s"] = workflows(url, 300 if quick else 1000, 1000)
    if "memory" in parts:
        out["bytes_per_result"] = bytes_per_result(url)
    return out


def drain_rows(drains: dict[str, list[dict[str, Any]]]) -> list[list[str]]:
    rate = {k: statistics.median(r["rate"] for r in v) for k, v in drains.items()}
    cpu = {k: statistics.median(r["cpu_us_per_job"] for r in v) for k, v in drains.items()}
    rcpu = {k: statistics.median(r["redis_cpu_us_per_job"] for r in v) for k, v in drains.items()}
    return [
        ["drain, noop task, C=100 (jobs/s)", f"{rate['off']:.0f}", f"{rate['on']:.0f}",
         f"{rate['on'] / rate['off']:.2f}", ">= 0.85"],
        ["drain CPU, worker (µs/job)", f"{cpu['off']:.1f}", f"{cpu['on']:.1f}",
         f"{cpu['on'] / cpu['off']:.2f}", ""],
        ["drain CPU, Redis (µs/job)", f"{rcpu['off']:.1f}", f"{rcpu['on']:.1f}",
         f"{rcpu['on'] / rcpu['off']:.2f}", ""],
    ]  # fmt: skip


def other_rows(out: dict[str, Any], quick: bool) -> list[list[str]]:
    rows: list[list[str]] = []
    if "wake_ms" in out:
        wake, idle = out["wake_ms"], out["waiting_commands_per_s"]
        rows += [
            ["get() wake-up after the outcome (ms)", "",
             f"p50 {wake['p50']:.2f}, p99 {wake['p99']:.2f}", "", "p99 <= 10"],
            ["one caller waiting, nothing comes (Redis commands/s)", "", f"{idle:.1f}", "",
             "a few"],
        ]  # fmt: skip
    if "workflows_s" in out:
        flows = out["workflows_s"]
        rows += [
            [f"{300 if quick else 1000} chains of 3 steps vs the jobs flat (s)",
             f"{flows['flat_3x']:.2f}", f"{flows['chains']:.2f}",
             f"{flows['chains'] / flows['flat_3x']:.2f}", ""],
            ["group of 1,000 + callback vs 1,001 flat (s)", f"{flows['flat_group']:.2f}",
             f"{flows['group']:.2f}", f"{flows['group'] / flows['flat_group']:.2f}", ""],
        ]  # fmt: skip
    if "bytes_per_result" in out:
        memory = out["bytes_per_result"]
        rows.append(["bytes per kept result (None / 100-byte str)", "",
                     f"{memory['None']:.0f} / {memory['100-byte str']:.0f}", "", ""])  # fmt: skip
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--parts", default=",".join(PARTS),
                    help="comma-separated parts to run: " + ", ".join(PARTS))  # fmt: skip
    ap.add_argument("--buffer", default="auto", help="the drain's poller_buffer_size")
    args = ap.parse_args()
    parts = set(args.parts.split(","))
    unknown = parts - set(PARTS)
    if unknown:
        ap.error(f"unknown part(s): {', '.join(sorted(unknown))}")
    repeat = args.repeat or (3 if args.quick else 5)
    n = 30_000 if args.quick else 100_000
    with dedicated_redis() as url:
        info = machine(url)
        out = run_parts(url, parts, repeat, n, args.quick, args.buffer)
    rows = drain_rows(out["drains"]) if "drains" in out else []
    rows += other_rows(out, args.quick)
    if parts == set(PARTS) and args.buffer == "auto":  # (a partial or tuned run: not recorded)
        write_json("results", {
            "workload": "results off vs on; get() wake-up; chains and groups vs flat; memory",
            "machine": info, "command": command(), "repeat": repeat, "n": n, **out,
            "versions": versions(["gq", "redis", "hiredis", "gevent", "greenlet", "msgpack"]),
        })  # fmt: skip
    print(markdown_table(["workload", "off / flat", "on / workflow", "ratio", "target"], rows))


if __name__ == "__main__":
    main()
