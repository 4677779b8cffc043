"""What metrics, facts and history cost: the noop drain with metrics off and on, in one run.

Off is every consumer's default (the no-op Recorder: outcome counters and per-minute
history bumped once per ack batch); on is what ``gq-worker --metrics-port`` adds (two
clock reads and two list appends per job, for the histograms); counters is
``--metrics-port --no-metrics-histograms`` (nothing per job). Runs alternate off/on so that a change
in the machine's load hits both alike; medians of --repeat runs. Also timed in-process:
the hot-path hooks per job, one heartbeat's facts-and-history write, and one queue
exporter scrape.

With --before REV, a third mode runs gq as it was at git revision REV (extracted with
`git archive` and put first on PYTHONPATH), to show what the no-op hooks cost.

usage: metrics_cost.py [--quick] [--repeat K] [--before REV]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator

from common import (
    ROOT,
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    versions,
    write_json,
)
from gqbench import delete_queue, gq_drain, prefill, strip

import gq
from gq import job as jobs
from gq import metrics
from gq.facts import Reporter
from gq.options import ConsumerOptions
from gq.recorder import Recorder
from gq.redis_queue import RedisQueue

CONCURRENCY = 100
BUFFER = 100


@contextlib.contextmanager
def old_tree(rev: str | None) -> Iterator[str | None]:
    """gq's package as of ``rev``, extracted to a temporary folder (its path), or None."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gq-before-") as tmp:
        archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "gq"],
                                 check=True, capture_output=True).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield tmp


def drains(url: str, n: int, repeat: int, before: str | None) -> dict[str, list[dict]]:
    envs = {"off": {}, "on": {"BENCH_METRICS": "1"}, "counters": {"BENCH_METRICS": "counters"}}
    if before is not None:
        envs["before"] = {"PYTHONPATH": before + os.pathsep + os.environ.get("PYTHONPATH", "")}
    modes = list(envs)
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    for i in range(repeat):
        for mode in modes[i % len(modes):] + modes[:i % len(modes)]:  # rotate the order
            result = gq_drain(url, n, CONCURRENCY, BUFFER, extra_env=envs[mode])
            runs[mode].append(strip(result))
            print(mode, f"{result['rate']:,.0f} jobs/s", file=sys.stderr, flush=True)
    return runs


def hot_path(before: str | None, repeat: int) -> dict[str, float]:
    """CPU µs per job of decode + execute + release (workers/hot_path.py), best of runs."""
    envs = {"off": ("off", {}), "on": ("on", {}), "counters": ("counters", {})}
    if before is not None:
        envs["before"] = ("off", {"PYTHONPATH": before})
    best: dict[str, float] = {}
    for _ in range(repeat):
        for name, (mode, env) in envs.items():
            out = subprocess.run([sys.executable, str(WORKERS / "hot_path.py"), mode],
                                 capture_output=True, text=True, check=True,
                                 env={**os.environ, **env}).stdout
            value = json.loads(out)["cpu_us_per_job"]
            best[name] = min(best.get(name, value), value)
    return best


def per_call(fn, calls: int) -> float:
    """Microseconds per call of ``fn`` (best of 3)."""
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / calls * 1e6


def hooks() -> dict[str, float]:
    """The per-job hooks (started + finished) of each recorder, in µs."""
    job = jobs.decode(jobs.encode(gq.Job("a", b"x"), ready_at=time.time()))
    out = {}
    for name, recorder in (("off", Recorder("q")), ("on", metrics.PrometheusRecorder("q"))):
        started, finished = recorder.started, recorder.finished
        out[name] = per_call(lambda: finished(started(job)), 200_000)  # noqa: B023 - called here
    return out


def heartbeat_write(url: str) -> float:
    """One heartbeat's facts + history pipeline (2 minutes of counts), in µs."""
    import redis

    queue = f"bench-facts-{uuid.uuid4().hex[:8]}"
    rq = RedisQueue(redis.Redis.from_url(url), queue)
    recorder = Recorder(queue)
    reporter = Reporter(rq, "c1", ConsumerOptions(), recorder, "bench")

    def beat() -> None:
        recorder.history.pending = {(0, "done"): 5, (60, "done"): 7, (60, "failed"): 1}
        reporter.beat(time.time())

    try:
        return per_call(beat, 300)
    finally:
        delete_queue(url, queue)
        rq.client.srem("gq:queues", queue)


def scrape(url: str, n: int) -> float:
    """One queue exporter scrape of one queue holding ``n`` ready jobs, in µs."""
    import redis
    from prometheus_client import generate_latest

    queue = f"bench-scrape-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    registry = metrics.queue_metrics_registry(redis.Redis.from_url(url), [queue])
    try:
        return per_call(lambda: generate_latest(registry), 200)
    finally:
        delete_queue(url, queue)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--repeat", type=int, default=None)
    ap.add_argument("--before", metavar="REV", help="also run gq as of this git revision")
    args = ap.parse_args()
    repeat = args.repeat or (4 if args.quick else 8)
    n = 20_000 if args.quick else 50_000
    with dedicated_redis() as url, old_tree(args.before) as before:
        info = machine(url)
        runs = drains(url, n, repeat, before)
        micro = {"hot_path_us": hot_path(before, repeat), "hooks_us": hooks(),
                 "heartbeat_write_us": heartbeat_write(url),
                 "scrape_us": scrape(url, n)}
    med = {m: {k: statistics.median(r[k] for r in rs) for k in ("rate", "cpu_us_per_job")}
           for m, rs in runs.items()}
    ratio = med["on"]["rate"] / med["off"]["rate"]
    cpu_ratio = med["on"]["cpu_us_per_job"] / med["off"]["cpu_us_per_job"]
    payload = {
        "workload": f"noop drain, concurrency {CONCURRENCY}, buffer {BUFFER}, metrics off vs on",
        "machine": info, "command": command(), "repeat": repeat, "n": n,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "prometheus_client"]),
        "runs": runs, "medians": med, "on_over_off": ratio,
        "cpu_on_over_off": cpu_ratio, "before": args.before, **micro,
    }
    write_json("metrics_cost", payload)
    rows = [[m if m != "before" else f"before ({args.before})", n, med[m]["rate"],
             med[m]["cpu_us_per_job"], ", ".join(f"{r['rate']:,.0f}" for r in runs[m])]
            for m in runs]
    print(markdown_table(["metrics", "jobs", "jobs/s (median)", "CPU µs/job", "runs"], rows))
    hot = micro["hot_path_us"]
    print("\njob path alone (decode + execute + release, CPU µs/job, best of runs): "
          + ", ".join(f"{k} {v:.2f}" for k, v in hot.items())
          + f"; on ÷ off {hot['on'] / hot['off']:.3f}"
          + (f", off ÷ before {hot['off'] / hot['before']:.3f}" if "before" in hot else ""))
    print(f"\non ÷ off: {ratio:.3f} (drain rate), CPU per job {cpu_ratio:.3f}; hooks per job: off "
          f"{micro['hooks_us']['off']:.2f} µs, on {micro['hooks_us']['on']:.2f} µs; one "
          f"heartbeat's facts + history write: {micro['heartbeat_write_us']:.0f} µs; one "
          f"exporter scrape of a queue of {n:,} jobs: {micro['scrape_us']:.0f} µs")


if __name__ == "__main__":
    main()
