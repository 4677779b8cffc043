"""``gq-worker --processes N``: drain rate with 1 and 2 processes, and where the limit is.

Two workloads on a pre-filled queue, each drained by ``gq-worker HANDLER --processes P
--burst`` (concurrency 100, buffer 100) for P = 1 and 2, runs interleaved (1, 2, 1,
2...) so that both see the same machine; median of --repeat runs:

- noop: the handler does nothing: the cost is gq's and Redis's own;
- cpu: about 1 ms of pure Python per job (calibrated here), which one process cannot
  spread over two cores.

The script polls Redis every 5 ms. The measured window opens once every child has
registered (so that a child still starting does not charge its start-up to the others'
rate) and closes when the last message is acknowledged (``HLEN data`` reaches 0); the
jobs measured are those not yet acknowledged when it opened. It also reports the time
from launching the supervisor to the first fetch and to the last child's registration. Over that
window it reads Redis's own CPU (``INFO cpu`` used_cpu_user + used_cpu_sys) and the
children's CPU (psutil), so the table shows who used the cores. From the per-job costs
it estimates, on paper, the rate on 8 and 32 cores: one core for Redis, the others for
worker processes, capped by Redis's single thread.

usage: processes.py [--quick] [--repeat K]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
import uuid
from typing import Any

import psutil
import redis
from common import (
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    versions,
    write_json,
)
from gqbench import delete_queue, prefill

sys.path.insert(0, str(WORKERS))
from procs_handlers import spin  # noqa: E402

CONCURRENCY = 100
BUFFER = 100  # the buffer of the throughput sweep's best noop ratio to the ceiling (README)
POLL = 0.005


def calibrate(target_ms: float = 1.0) -> int:
    """Loops of ``spin`` that take about ``target_ms`` here (best of 5 timings)."""
    loops = 100_000
    best = min(_timed(spin, loops) for _ in range(5))
    return max(1, int(loops * target_ms / 1000 / best))


def _timed(fn: Any, arg: int) -> float:
    t0 = time.perf_counter()
    fn(arg)
    return time.perf_counter() - t0


def redis_cpu(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def children_cpu(proc: psutil.Process) -> float:
    total = 0.0
    for child in proc.children(recursive=True):
        try:
            times = child.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += times.user + times.system
    return total


def drain(url: str, handler: str, n: int, processes: int, env: dict[str, str]) -> dict[str, Any]:
    """Pre-fill ``n`` jobs, run the supervisor in burst mode, measure the drain window."""
    queue = f"bench-procs-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    client = redis.Redis.from_url(url)
    args = ["gq-worker", handler, "--queue", queue, "--url", url, "--processes",
            str(processes), "--burst", "--concurrency", str(CONCURRENCY), "--buffer-size",
            str(BUFFER), "--stats-interval", "0", "--log-level", "WARNING"]  # fmt: skip
    launched = time.perf_counter()
    proc = subprocess.Popen(
        [os.path.join(os.path.dirname(sys.executable), args[0]), *args[1:]],
        cwd=WORKERS, env={**os.environ, **env},
    )  # fmt: skip
    try:
        watched = psutil.Process(proc.pid)
        while client.llen(f"{queue}:active") == n:  # not one fetched yet
            time.sleep(POLL)
        first_job = time.perf_counter()
        # The window opens once every child has registered: a child still importing
        # would otherwise charge its start-up to the drain rate of the others.
        while client.zcard(f"{queue}:consumers") < processes:
            time.sleep(POLL)
        t0, cpu0, work0 = time.perf_counter(), redis_cpu(client), children_cpu(watched)
        left = client.hlen(f"{queue}:data")
        while client.hlen(f"{queue}:data") > 0:
            time.sleep(POLL)
        t1, cpu1, work1 = time.perf_counter(), redis_cpu(client), children_cpu(watched)
        code = proc.wait(120)
        if code != 0:
            raise RuntimeError(f"gq-worker --processes {processes} exited {code}")
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        delete_queue(url, queue)
    seconds = t1 - t0
    return {
        "processes": processes, "jobs": n, "measured_jobs": left, "seconds": seconds,
        "rate": left / seconds, "start_to_first_job_s": first_job - launched,
        "start_to_all_children_s": t0 - launched,
        "redis_cpu_s": cpu1 - cpu0, "redis_core_share": (cpu1 - cpu0) / seconds,
        "redis_cpu_us_per_job": (cpu1 - cpu0) / left * 1e6,
        "worker_cpu_us_per_job": (work1 - work0) / left * 1e6,
    }  # fmt: skip


def median_run(runs: list[dict[str, Any]]) -> dict[str, Any]:
    med = statistics.median(r["rate"] for r in runs)
    best = min(runs, key=lambda r: abs(r["rate"] - med))
    return {**best, "rate": med, "rates": sorted(r["rate"] for r in runs)}


def on_paper(by_p: dict[int, dict[str, Any]], cores: int) -> tuple[float, str]:
    """Expected jobs/s on ``cores`` cores: cores - 1 worker processes at the worker CPU
    per job of one process, capped by one Redis core at the higher Redis CPU per job
    of the two runs (smaller batches per consumer cost Redis more per job)."""
    per_process = 1e6 / by_p[1]["worker_cpu_us_per_job"]
    redis_cap = 1e6 / max(r["redis_cpu_us_per_job"] for r in by_p.values())
    workers = (cores - 1) * per_process
    return (min(workers, redis_cap), "Redis" if redis_cap < workers else "workers")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    args = ap.parse_args()
    repeat = args.repeat or (2 if args.quick else 3)
    loops = calibrate()
    workloads = {
        "noop": ("procs_handlers:noop", 200_000 if args.quick else 500_000),
        "cpu_1ms": ("procs_handlers:cpu", 3_000 if args.quick else 10_000),
    }
    env = {"BENCH_CPU_LOOPS": str(loops)}
    results: dict[str, dict[int, dict[str, Any]]] = {}
    with dedicated_redis() as url:
        info = machine(url)
        for name, (handler, n) in workloads.items():
            runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
            for _ in range(repeat):
                for processes in (1, 2):
                    runs[processes].append(drain(url, handler, n, processes, env))
                    print(name, runs[processes][-1], file=sys.stderr, flush=True)
            results[name] = {p: median_run(r) for p, r in runs.items()}
    rows, paper = [], []
    for name, by_p in results.items():
        base = by_p[1]["rate"]
        for p, r in by_p.items():
            rows.append([
                name, p, r["measured_jobs"], r["rate"], f"{r['rate'] / base:.2f}",
                f"{r['redis_core_share'] * 100:.0f}%", f"{r['redis_cpu_us_per_job']:.2f}",
                f"{r['worker_cpu_us_per_job']:.1f}", f"{r['start_to_first_job_s']:.2f}",
                f"{r['start_to_all_children_s']:.2f}",
            ])  # fmt: skip
        for cores in (8, 32):
            rate, limit = on_paper(by_p, cores)
            paper.append([name, cores, rate, limit])
    payload = {
        "workload": "drain with gq-worker --processes 1 and 2 (burst, concurrency 100, buffer 100)",
        "machine": info, "loadavg_at_end": os.getloadavg(), "command": command(),
        "repeat": repeat, "cpu_loops_per_job": loops,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "psutil"]),
        "results": {name: {str(p): r for p, r in by_p.items()} for name, by_p in results.items()},
        "on_paper": [dict(zip(["workload", "cores", "jobs_per_s", "limit"], p)) for p in paper],
    }  # fmt: skip
    write_json("processes", payload)
    print(markdown_table(
        ["workload", "processes", "jobs measured", "jobs/s (median)", "÷ 1 process",
         "Redis CPU (of one core)", "Redis CPU µs/job", "worker CPU µs/job",
         "start to first job s", "start to all children s"], rows))  # fmt: skip
    print()
    print(markdown_table(["workload", "cores", "expected jobs/s", "limited by"], paper))


if __name__ == "__main__":
    main()
