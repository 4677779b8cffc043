"""What the task layer's features cost (issue 36): the four rows of SPEC 14-17 side by side,
each with the worker's CPU and Redis's CPU per job next to its rate.

Rows (feature / base): a noop task / a noop byte job (target >= 0.85); results kept /
not kept (the noop task with and without result_ttl, >= 0.85); jobs spread round robin
over 1,000 groups / no groups (byte jobs, no limit binding, >= 0.8); an async noop / a
sync noop (byte jobs, >= 0.5). Each drain: N noop jobs (100,000 by default), one worker
process, C = 100, buffer "auto", on a redis-server of its own (started here, no
persistence), so that Redis's CPU (``INFO cpu``, user + sys) and its commands (``INFO
commandstats``, calls) over the drain are this drain's alone. Each pair is run
alternated (feature, base, then base, feature, ...) --repeat times; a row's figure is
the median of its pairs' ratios.

usage: features.py [--n N] [--repeat K] [--rows tasks,results,groups,async]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import uuid
from collections.abc import Callable
from typing import Any

import redis
from common import WORKERS, command, dedicated_redis, machine, markdown_table, run_json, write_json
from gqbench import PYTHON, prefill
from groups import prefill_groups

sys.path.insert(0, str(WORKERS))
from results_app import build  # noqa: E402

CONCURRENCY = 100
RESULT_TTL = 3600.0
# row: (feature mode, base mode, target)
ROWS = {
    "tasks": ("task", "bytes", 0.85),
    "results": ("results", "task", 0.85),
    "groups": ("groups_1000", "bytes", 0.8),
    "async": ("async", "bytes", 0.5),
}


def fill(url: str, queue: str, mode: str, n: int) -> None:
    if mode in ("bytes", "async"):
        prefill(url, queue, n)
    elif mode == "groups_1000":
        prefill_groups(url, queue, n, 1000)
    else:
        app = build(queue, RESULT_TTL if mode == "results" else 0)
        app.connect(url)
        for start in range(0, n, 10_000):
            app.tasks["noop"].enqueue_many([(i,) for i in range(start, min(n, start + 10_000))])


def worker(url: str, queue: str, mode: str) -> tuple[list[str], dict[str, str]]:
    if mode in ("task", "results"):
        ttl = str(RESULT_TTL if mode == "results" else 0)
        return [PYTHON, str(WORKERS / "results_worker.py"), url, queue, str(CONCURRENCY),
                ttl, "auto"], {}  # fmt: skip
    env = {"BENCH_ASYNC": "1"} if mode == "async" else {}
    return [PYTHON, str(WORKERS / "gq_worker.py"), url, queue, str(CONCURRENCY), "auto"], env


def redis_counts(client: redis.Redis) -> tuple[float, int]:
    """Redis's CPU seconds so far and the commands it ran."""
    cpu = client.info("cpu")
    stats = client.info("commandstats")
    calls = sum(int(v.get("calls", 0)) for v in stats.values())
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"]), calls


def drain(mode: str, n: int) -> dict[str, Any]:
    """One drain on a redis-server of its own: rate, worker and Redis CPU per job."""
    with dedicated_redis() as url:
        queue = f"bench-features-{uuid.uuid4().hex[:8]}"
        fill(url, queue, mode, n)
        client = redis.Redis.from_url(url)
        cpu0, calls0 = redis_counts(client)
        cmd, env = worker(url, queue, mode)
        result = run_json(cmd, 900, {"BENCH_N": str(n), **env})
        cpu1, calls1 = redis_counts(client)
    done = result["n"]
    return {"rate": result["rate"], "worker_us": result["cpu_us_per_job"],
            "redis_us": (cpu1 - cpu0) / done * 1e6,
            "commands": (calls1 - calls0 - 2) / done}  # fmt: skip


def cpu(run: dict[str, Any]) -> float:
    """The worker's and Redis's CPU per job together: what a loaded machine pays."""
    return float(run["worker_us"] + run["redis_us"])


def pairs(row: str, n: int, repeat: int) -> list[dict[str, Any]]:
    feature, base, _ = ROWS[row]
    return alternated(row, (feature, base), lambda mode: drain(mode, n), repeat)


def alternated(
    label: str,
    modes: tuple[str, str],
    run: Callable[[str], dict[str, Any]],
    repeat: int,
    sides: tuple[str, str] = ("feature", "base"),
) -> list[dict[str, Any]]:
    """``repeat`` pairs of ``run(feature)`` and ``run(base)`` (``modes``), each pair in the
    other order than the one before: {sides[0]: the feature's run, sides[1]: the base's,
    "ratio": their rates', "cpu_ratio": the base's CPU per job over the feature's}."""
    feature, base = modes
    out = []
    for i in range(repeat):
        runs = {}
        for mode in [feature, base] if i % 2 == 0 else [base, feature]:
            runs[mode] = run(mode)
            print(f"{label} {mode}: {runs[mode]['rate']:,.0f} jobs/s, worker "
                  f"{runs[mode]['worker_us']:.1f} µs, Redis {runs[mode]['redis_us']:.1f} µs "
                  "per job", file=sys.stderr, flush=True)  # fmt: skip
        out.append({sides[0]: runs[feature], sides[1]: runs[base],
                    "ratio": runs[feature]["rate"] / runs[base]["rate"],
                    "cpu_ratio": cpu(runs[base]) / cpu(runs[feature])})  # fmt: skip
    return out


def summary(row: str, runs: list[dict[str, Any]]) -> list[str]:
    feature, base, target = ROWS[row]

    def med(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in runs)

    ratio = statistics.median(r["ratio"] for r in runs)
    pair_ratios = ", ".join(f"{r['ratio']:.2f}" for r in runs)
    cpu_ratio = statistics.median(r["cpu_ratio"] for r in runs)
    return [f"{feature} / {base}", f"**{ratio:.2f}** ({pair_ratios})", f"{cpu_ratio:.2f}",
            f">= {target}",
            f"{med('feature', 'rate'):,.0f} / {med('base', 'rate'):,.0f}",
            f"{med('feature', 'worker_us'):.1f} / {med('base', 'worker_us'):.1f}",
            f"{med('feature', 'redis_us'):.1f} / {med('base', 'redis_us'):.1f}",
            f"{med('feature', 'commands'):.3f} / {med('base', 'commands'):.3f}"]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="alternated pairs per row (3)")
    ap.add_argument("--rows", default="groups,tasks,results,async", type=lambda s: s.split(","))
    args = ap.parse_args()
    runs = {row: pairs(row, args.n, args.repeat) for row in args.rows}
    write_json("features", {"command": command(), "machine": machine(None), "n": args.n,
                            "concurrency": CONCURRENCY, "runs": runs})  # fmt: skip
    print(markdown_table(
        ["row", "ratio, median of pairs (pairs)", "CPU ratio", "target", "jobs/s",
         "worker CPU µs/job", "Redis CPU µs/job", "Redis commands/job"],
        [summary(row, r) for row, r in runs.items()]))  # fmt: skip


if __name__ == "__main__":
    main()
