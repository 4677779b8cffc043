"""What metrics, facts and history cost: the noop drain with metrics off and on, in one run.

Off is every consumer's default (the no-op Recorder: outcome counters and per-minute
history bumped once per ack batch); on is what ``gq-worker --metrics-port`` adds (for the
histograms: one decrement per job in ``gq.job.decode``, and on the jobs it picks, about
``gq.metrics.SAMPLE_ABOVE`` a second, two clock reads and two bucket counts); counters is
``--metrics-port --no-metrics-histograms`` (nothing per job). Runs alternate modes so that
a change in the machine's load hits all alike; medians of --repeat runs. Also timed
in-process: the hooks of one timed job, one heartbeat's facts-and-history write, and one
queue exporter scrape.

With --before REV, gq as it was at git revision REV (extracted with `git archive` and put
first on PYTHONPATH) runs too, metrics off ("before") and on ("before on"), to compare
before and after a change in the same run.

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
from gq.options import ConsumerOptions
from gq.store.jobs import RedisQueue
from gq.worker.facts import Reporter
from gq.worker.recorder import Recorder

CONCURRENCY = 100
BUFFER = 100


@contextlib.contextmanager
def old_tree(rev: str | None) -> Iterator[str | None]:
    """gq's package as of ``rev``, extracted to a temporary folder (its path), or None."""
    if rev is None:
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="gq-before-") as tmp:
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", rev, "gq"], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", tmp], input=archive, check=True)
        yield tmp


def drains(url: str, n: int, repeat: int, before: str | None) -> dict[str, list[dict]]:
    envs = {"off": {}, "on": {"BENCH_METRICS": "1"}, "counters": {"BENCH_METRICS": "counters"}}
    if before is not None:
        path = {"PYTHONPATH": before + os.pathsep + os.environ.get("PYTHONPATH", "")}
        envs["before"] = path
        envs["before on"] = {**path, "BENCH_METRICS": "1"}
    modes = list(envs)
    runs: dict[str, list[dict]] = {mode: [] for mode in modes}
    for i in range(repeat):
        for mode in modes[i % len(modes) :] + modes[: i % len(modes)]:  # rotate the order
            result = gq_drain(url, n, CONCURRENCY, BUFFER, extra_env=envs[mode])
            runs[mode].append(strip(result))
            print(mode, f"{result['rate']:,.0f} jobs/s", file=sys.stderr, flush=True)
    return runs


def hot_path(before: str | None, repeat: int) -> dict[str, list[float]]:
    """CPU µs per job of decode + execute + release (workers/hot_path.py, each the best of
    its rounds), one value per mode and repetition, the modes one after the other."""
    envs = {"off": ("off", {}), "on": ("on", {}), "counters": ("counters", {})}
    if before is not None:
        envs["before"] = ("off", {"PYTHONPATH": before})
        envs["before on"] = ("on", {"PYTHONPATH": before})
    runs: dict[str, list[float]] = {name: [] for name in envs}
    for _ in range(repeat):
        for name, (mode, env) in envs.items():
            out = subprocess.run(
                [sys.executable, str(WORKERS / "hot_path.py"), mode],
                capture_output=True,
                text=True,
                check=True,
                env={**os.environ, **env},
            ).stdout
            runs[name].append(json.loads(out)["cpu_us_per_job"])
    return runs


def ratios(runs: dict[str, list[float]], top: str, bottom: str) -> float:
    """The median over repetitions of ``top`` ÷ ``bottom`` measured side by side."""
    return statistics.median(a / b for a, b in zip(runs[top], runs[bottom]))


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
    """The hooks (started + finished) of one timed job for each recorder, in µs."""
    recorders = (("off", Recorder("q")), ("on", metrics.PrometheusRecorder("q")))
    job = jobs.decode(jobs.encode(gq.Job("a", b"x"), ready_at=time.time()))  # picked: 1 in 1
    try:  # gq after the re-cut of issue #15: the sampler's Sample, not the Job, is timed
        from gq.worker.sampling import Sample

        timed: object = Sample(job, 1, time.time())
    except ImportError:
        timed = job
        assert job.sample_weight, "a new PrometheusRecorder times every job"
    out = {}
    for name, recorder in recorders:
        started, finished = recorder.started, recorder.finished
        out[name] = per_call(lambda: finished(timed, started(timed)), 200_000)  # noqa: B023
    return out


def heartbeat_write(url: str) -> float:
    """One heartbeat's facts + history pipeline (2 minutes of counts), in µs."""
    import redis

    queue = f"bench-facts-{uuid.uuid4().hex[:8]}"
    rq = RedisQueue(redis.Redis.from_url(url), queue)
    recorder = Recorder(queue)
    reporter = Reporter({queue: rq}, "c1", ConsumerOptions(), {queue: recorder}, "bench")

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
        micro = {
            "hot_path_us": hot_path(before, repeat),
            "hooks_us": hooks(),
            "heartbeat_write_us": heartbeat_write(url),
            "scrape_us": scrape(url, n),
        }
    med = {
        m: {k: statistics.median(r[k] for r in rs) for k in ("rate", "cpu_us_per_job")}
        for m, rs in runs.items()
    }
    ratio = med["on"]["rate"] / med["off"]["rate"]
    cpu_ratio = med["on"]["cpu_us_per_job"] / med["off"]["cpu_us_per_job"]
    hot = micro["hot_path_us"]
    hot_med = {m: statistics.median(v) for m, v in hot.items()}
    hot_ratios = {
        "on/off": ratios(hot, "on", "off"),
        "counters/off": ratios(hot, "counters", "off"),
    }
    if args.before:
        hot_ratios.update(
            {
                "off/before": ratios(hot, "off", "before"),
                "before on/before": ratios(hot, "before on", "before"),
            }
        )
    payload = {
        "workload": f"noop drain, concurrency {CONCURRENCY}, buffer {BUFFER}, metrics off vs on",
        "machine": info,
        "command": command(),
        "repeat": repeat,
        "n": n,
        "versions": versions(["gq", "redis", "hiredis", "gevent", "prometheus_client"]),
        "runs": runs,
        "medians": med,
        "on_over_off": ratio,
        "cpu_on_over_off": cpu_ratio,
        "before": args.before,
        **micro,
        "hot_path_median_us": hot_med,
        "hot_path_ratios": hot_ratios,
    }
    write_json("metrics_cost", payload)
    rows = [[m.replace("before", f"before ({args.before})"), n, med[m]["rate"],
             med[m]["cpu_us_per_job"], hot_med[m], ", ".join(f"{r['rate']:,.0f}" for r in runs[m])]
            for m in runs]  # fmt: skip
    print(
        markdown_table(
            [
                "metrics",
                "jobs",
                "jobs/s (median)",
                "drain CPU µs/job",
                "job path alone, CPU µs/job (median)",
                "drain runs",
            ],
            rows,
        )
    )
    print(
        "\njob path alone (decode + execute + release), medians of the ratios measured side "
        "by side: " + ", ".join(f"{k} {v:.3f}" for k, v in hot_ratios.items())
    )
    print(
        f"\non ÷ off: {ratio:.3f} (drain rate), CPU per job {cpu_ratio:.3f}; hooks of a timed "
        f"job: off {micro['hooks_us']['off']:.2f} µs, on {micro['hooks_us']['on']:.2f} µs; one "
        f"heartbeat's facts + history write: {micro['heartbeat_write_us']:.0f} µs; one "
        f"exporter scrape of a queue of {n:,} jobs: {micro['scrape_us']:.0f} µs"
    )


if __name__ == "__main__":
    main()
