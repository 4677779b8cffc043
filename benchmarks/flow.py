"""Flow control (issue #11, SPEC section 9): what the queue-wide limits cost, and how
closely the rate limit is held. Runs on the real Redis (127.0.0.1:6379 unless --url),
each run on a queue of its own whose keys are deleted afterwards.

1. Overhead of a limit that never binds, on the noop drain of one gq worker process
   (``workers/gq_worker.py``, C=100, default settings: buffer "auto"): (a) no flow
   settings at all, (b) concurrency 1,000,000 and rate 10,000,000 per 1 s, (c) with
   --before REV (default 77e8806, gq before flow control) gq as of REV, extracted with
   `git archive` and put first on PYTHONPATH. Figure: b / a (target >= 0.95).
2. A concurrency limit equal to C (100) against no limit, on the drain of noop jobs and
   of short I/O jobs (handlers gevent.sleep(0.01)). Figure: limited / unlimited
   (target >= 0.85).
3. The rate limit held over 60 s (--quick: 10 s): a queue full of noop jobs, two worker
   processes (``workers/flow_worker.py``, C=100), rate 500 per 1 s. Figures: starts /
   elapsed against the limit (target within 2%), and the most starts in any 1 s window
   against the documented bound n + ceil(n/10).

Modes alternate run by run (the order rotates), so that a change in the machine's load
hits all alike; drain figures are medians of --repeat runs.

usage: flow.py [--quick] [--repeat K] [--before REV] [--url URL] [--rate N]
"""

from __future__ import annotations

import argparse
import bisect
import json
import math
import os
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
    run_json,
    versions,
    write_json,
)
from gqbench import PYTHON, delete_queue, prefill, strip
from metrics_cost import old_tree

import gq
from gq.store.jobs import RedisQueue

CONCURRENCY = 100
LOOSE = {"rate": (10_000_000, 1.0), "concurrency": 1_000_000}  # never binds
AT_C = {"concurrency": CONCURRENCY}


def forget(url: str, queue: str) -> None:
    """Delete every key of ``queue`` and its entry in the queue registry."""
    delete_queue(url, queue)
    redis.Redis.from_url(url).srem("gq:queues", queue)


def drain(
    url: str,
    n: int,
    sleep_ms: float,
    limits: dict[str, Any] | None,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Pre-fill ``n`` jobs on a new queue, set ``limits`` on it, and time one gq worker
    process (C=100, buffer auto) running them all (first start to N-th end)."""
    queue = f"bench-flow-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    try:
        if limits:
            gq.Queue(queue, url=url).set_limits(**limits)
        run_env = {"BENCH_N": str(n), "BENCH_SLEEP_MS": str(sleep_ms), **(env or {})}
        return strip(run_json([PYTHON, str(WORKERS / "gq_worker.py"), url, queue,
                               str(CONCURRENCY), "auto"], 300, run_env))  # fmt: skip
    finally:
        forget(url, queue)


def alternate(
    url: str,
    n: int,
    repeat: int,
    sleep_ms: float,
    modes: dict[str, tuple[dict[str, Any] | None, dict[str, str]]],
    label: str,
) -> dict[str, list[dict[str, Any]]]:
    """--repeat drains of each mode, the order rotated every round."""
    names = list(modes)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    for i in range(repeat):
        for name in names[i % len(names) :] + names[: i % len(names)]:
            limits, env = modes[name]
            result = drain(url, n, sleep_ms, limits, env)
            runs[name].append(result)
            print(f"{label} {name}: {result['rate']:,.0f} jobs/s", file=sys.stderr, flush=True)
    return runs


def medians(runs: dict[str, list[dict[str, Any]]]) -> dict[str, dict[str, float]]:
    return {
        name: {key: statistics.median(r[key] for r in rs) for key in ("rate", "cpu_us_per_job")}
        for name, rs in runs.items()
    }


def overhead(url: str, n: int, repeat: int, before: str | None) -> dict[str, Any]:
    """Part 1: no settings, a limit that never binds, and (with --before) old gq."""
    modes: dict[str, tuple[dict[str, Any] | None, dict[str, str]]] = {
        "none": (None, {}),
        "loose": (LOOSE, {}),
    }
    if before is not None:
        modes["before"] = (
            None,
            {"PYTHONPATH": before + os.pathsep + os.environ.get("PYTHONPATH", "")},
        )
    runs = alternate(url, n, repeat, 0, modes, "overhead")
    med = medians(runs)
    return {
        "runs": runs,
        "medians": med,
        "loose_over_none": med["loose"]["rate"] / med["none"]["rate"],
        "redis_script_us_per_job": script_cost(n, repeat),
    }


def script_cost(n: int, repeat: int) -> dict[str, float]:
    """Redis's own time (INFO commandstats) in the fetch and ack scripts per job, batches
    of 100, no settings against limits that never bind; on a private redis-server, so
    that nobody else's commands count. Best of ``repeat`` rounds per mode."""
    best: dict[str, float] = {}
    with dedicated_redis() as url:
        client = redis.Redis.from_url(url)
        for _ in range(repeat):
            for mode, limits in (("none", None), ("loose", LOOSE)):
                queue = f"bench-flow-cost-{uuid.uuid4().hex[:8]}"
                prefill(url, queue, n)
                if limits:
                    gq.Queue(queue, url=url).set_limits(**limits)
                rq = RedisQueue(client, queue)
                rq.register("c1")
                before = script_usec(client)
                while batch := rq.fetch("c1", 100):
                    rq.ack("c1", [job_id for job_id, _ in batch])
                per_job = (script_usec(client) - before) / n
                best[mode] = min(best.get(mode, per_job), per_job)
                forget(url, queue)
    return best


def script_usec(client: redis.Redis) -> float:
    stats = client.info("commandstats")
    return float(sum(stats.get(f"cmdstat_{c}", {}).get("usec", 0) for c in ("evalsha", "eval")))


def at_concurrency(url: str, n: int, n_io: int, repeat: int) -> dict[str, Any]:
    """Part 2: concurrency limit = C against no limit, noop, 10 ms and 100 ms jobs."""
    out: dict[str, Any] = {}
    modes: dict[str, tuple[dict[str, Any] | None, dict[str, str]]] = {
        "none": (None, {}),
        "limit_C": (AT_C, {}),
    }
    workloads = (("noop", n, 0.0), ("io_10ms", n_io, 10.0), ("io_100ms", n_io // 4, 100.0))
    for workload, jobs_n, sleep_ms in workloads:
        runs = alternate(url, jobs_n, repeat, sleep_ms, modes, workload)
        med = medians(runs)
        out[workload] = {
            "n": jobs_n,
            "runs": runs,
            "medians": med,
            "limit_over_none": med["limit_C"]["rate"] / med["none"]["rate"],
        }
    return out


def registered(client: redis.Redis, queue: str, count: int, deadline: float) -> None:
    while client.zcard(f"{queue}:consumers") < count:
        if time.monotonic() > deadline:
            raise RuntimeError("workers did not start")
        time.sleep(0.02)


def rate_held(url: str, rate: int, seconds: float) -> dict[str, Any]:
    """Part 3: two workers on a queue kept full, rate limit ``rate`` per 1 s, for
    ``seconds`` from the first start."""
    queue = f"bench-flow-rate-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, int(rate * (seconds + 5) * 1.2))  # more than can start in the run
    startup = 4.0  # the window starts at the first start; spawning takes less than this
    procs: list[subprocess.Popen[str]] = []
    try:
        gq.Queue(queue, url=url).set_limits(rate=(rate, 1.0))
        env = {**os.environ, "BENCH_UNTIL": str(time.time() + startup + seconds)}
        procs = [
            subprocess.Popen(
                [PYTHON, str(WORKERS / "flow_worker.py"), url, queue, str(CONCURRENCY)],
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )  # fmt: skip
            for _ in range(2)
        ]
        registered(redis.Redis.from_url(url), queue, 2, time.monotonic() + startup)
        outs = [proc.communicate(timeout=startup + seconds + 60) for proc in procs]
        for proc, (_, err) in zip(procs, outs):
            if proc.returncode != 0:
                raise RuntimeError(f"flow_worker failed ({proc.returncode}): {err[-2000:]}")
        results = [json.loads(out.strip().splitlines()[-1]) for out, _ in outs]
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
        forget(url, queue)
    figures = window_figures([r["starts"] for r in results], rate, seconds)
    figures["fetched_max_in_1s"] = fetched_most(results, figures["t0"], seconds)
    return figures


def fetched_most(results: list[dict[str, Any]], t0: float, seconds: float) -> int:
    """The most jobs fetched in any 1 s window within the run, a fetch counted at the time
    it was sent (the script ran after that, before its reply: jobs fetched up to one round
    trip after a window's end may count in it, never the other way)."""
    fetches = sorted((f[0], f[2]) for r in results for f in r["fetches"] if f[0] < t0 + seconds)
    times = [t for t, _ in fetches]
    counts = [0]
    for _, c in fetches:
        counts.append(counts[-1] + c)
    return max(counts[bisect.bisect_left(times, t + 1.0)] - counts[i] for i, t in enumerate(times))


def window_figures(per_worker: list[list[float]], rate: int, seconds: float) -> dict[str, Any]:
    starts = sorted(t for worker in per_worker for t in worker)
    t0 = starts[0]
    if starts[-1] < t0 + seconds - 1:
        raise RuntimeError("the workers stopped before the end of the window")
    inside = starts[: bisect.bisect_left(starts, t0 + seconds)]
    # The most starts in any window [t, t + 1 s): windows that begin at a start are enough.
    most = max(bisect.bisect_left(inside, t + 1.0, lo=i) - i for i, t in enumerate(inside))
    # After the first second (burst spent): the steady rate, and its busiest second.
    steady = [t for t in inside if t >= t0 + 1.0]
    most_steady = max(bisect.bisect_left(steady, t + 1.0, lo=i) - i for i, t in enumerate(steady))
    burst = max(1, math.ceil(rate / 10))
    return {
        "rate": rate,
        "seconds": seconds,
        "t0": t0,
        "started": len(inside),
        "achieved": len(inside) / seconds,
        "achieved_over_limit": len(inside) / seconds / rate,
        "steady": len(steady) / (seconds - 1.0),
        "max_in_1s": most,
        "max_in_1s_after_first": most_steady,
        "bound": rate + burst,
        "first_second": bisect.bisect_left(inside, t0 + 1.0),
        "per_worker": [sum(1 for t in w if t < t0 + seconds) for w in per_worker],
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="20,000-job drains, 10 s of rate limit")
    ap.add_argument("--repeat", type=int, default=None, help="drains per mode (7; --quick 5)")
    ap.add_argument(
        "--before",
        default="77e8806",
        metavar="REV",
        help='also drain gq as of REV (default 77e8806); "" to skip',
    )
    ap.add_argument("--url", default="redis://127.0.0.1:6379/0")
    ap.add_argument("--rate", type=int, default=500, help="part 3's limit, jobs per 1 s")
    ap.add_argument("--parts", default="123", help="which parts to run (default 123)")
    args = ap.parse_args()
    repeat = args.repeat or (5 if args.quick else 7)
    n, n_io = (20_000, 10_000) if args.quick else (50_000, 30_000)
    seconds = 10.0 if args.quick else 60.0
    with old_tree(args.before or None) as before:
        info = machine(args.url)
        part1 = overhead(args.url, n, repeat, before) if "1" in args.parts else None
        part2 = at_concurrency(args.url, n, n_io, repeat) if "2" in args.parts else None
        part3 = rate_held(args.url, args.rate, seconds) if "3" in args.parts else None
    payload = {"command": command(), "machine": info, "repeat": repeat, "before": args.before,
               "concurrency": CONCURRENCY, "buffer": "auto",
               "versions": versions(["redis", "hiredis", "gevent", "msgpack"]),
               "overhead": part1, "at_concurrency": part2, "rate_held": part3}  # fmt: skip
    write_json("flow", payload)
    report(part1, part2, part3, n, args.before)


def report(
    part1: dict[str, Any] | None,
    part2: dict[str, Any] | None,
    part3: dict[str, Any] | None,
    n: int,
    before: str,
) -> None:
    if part1:
        report_overhead(part1, n, before)
    if part2:
        report_at_concurrency(part2)
    if part3:
        report_rate(part3)


def report_overhead(part1: dict[str, Any], n: int, before: str) -> None:
    med, runs = part1["medians"], part1["runs"]
    names = {
        "none": "no flow settings",
        "loose": "limits that never bind",
        "before": f"gq before flow control ({before})",
    }
    print(
        markdown_table(
            ["noop drain, C=100", "jobs", "jobs/s (median)", "CPU µs/job", "÷ no settings", "runs"],
            [
                [
                    names[m],
                    n,
                    med[m]["rate"],
                    med[m]["cpu_us_per_job"],
                    f"{med[m]['rate'] / med['none']['rate']:.3f}",
                    ", ".join(f"{r['rate']:,.0f}" for r in runs[m]),
                ]
                for m in runs
            ],
        )
    )
    cost = part1["redis_script_us_per_job"]
    print(
        f"\nlimits that never bind ÷ no settings: {part1['loose_over_none']:.3f} (target >= 0.95)"
        f"; Redis time in fetch + ack scripts per job (batches of 100, private Redis, best of"
        f" runs): no settings {cost['none']:.2f} µs, limits that never bind"
        f" {cost['loose']:.2f} µs ({cost['loose'] / cost['none']:.3f}x)\n"
    )


def report_at_concurrency(part2: dict[str, Any]) -> None:
    rows = []
    for workload, part in part2.items():
        for mode in ("none", "limit_C"):
            m = part["medians"][mode]
            rows.append(
                [
                    workload,
                    "concurrency 100" if mode == "limit_C" else "none",
                    part["n"],
                    m["rate"],
                    m["cpu_us_per_job"],
                    f"{m['rate'] / part['medians']['none']['rate']:.3f}",
                    ", ".join(f"{r['rate']:,.0f}" for r in part["runs"][mode]),
                ]
            )
    print(
        markdown_table(
            ["jobs, C=100", "limit", "jobs", "jobs/s (median)", "CPU µs/job", "÷ no limit", "runs"],
            rows,
        )
    )
    print(
        "\nconcurrency 100 ÷ no limit: "
        + ", ".join(f"{w} {p2['limit_over_none']:.3f}" for w, p2 in part2.items())
        + " (target >= 0.85)\n"
    )


def report_rate(p: dict[str, Any]) -> None:
    print(
        markdown_table(
            [
                "rate limit",
                "window",
                "started",
                "achieved /s",
                "÷ limit",
                "after 1st s /s",
                "most in any 1 s",
                "bound n + ceil(n/10)",
                "most in any 1 s after the 1st",
                "most fetched in any 1 s",
                "per worker",
            ],
            [
                [
                    f"{p['rate']}/1 s",
                    f"{p['seconds']:.0f} s",
                    p["started"],
                    f"{p['achieved']:.1f}",
                    f"{p['achieved_over_limit']:.4f}",
                    f"{p['steady']:.1f}",
                    p["max_in_1s"],
                    p["bound"],
                    p["max_in_1s_after_first"],
                    p["fetched_max_in_1s"],
                    " / ".join(str(c) for c in p["per_worker"]),
                ]
            ],
        )
    )


if __name__ == "__main__":
    main()
