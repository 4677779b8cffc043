"""What the history of finished jobs costs (issue 34): the noop task drain with the
history on at its defaults (10,000 entries, one day) against the same drain with it off
(``history_max`` 0), each with the worker's CPU and Redis's CPU per job next to its rate,
and the bytes one entry takes (MEMORY USAGE of <queue>:finished / its entries).

Each drain is benchmarks/features.py's (N noop tasks, one worker process, C = 100, on a
redis-server of its own); the two are run alternated --repeat times and a figure is the
median of the pairs' ratios (target: rate on / off >= 0.9).

usage: history.py [--n N] [--repeat K]
"""

from __future__ import annotations

import argparse
import statistics
import uuid
from typing import Any

import redis
from common import command, dedicated_redis, machine, markdown_table, run_json, write_json
from features import alternated, fill, redis_counts, worker

TARGET = 0.9


def drain(history_on: bool, n: int) -> dict[str, Any]:
    with dedicated_redis() as url:
        queue = f"bench-history-{uuid.uuid4().hex[:8]}"
        fill(url, queue, "task", n)
        client = redis.Redis.from_url(url)
        if not history_on:
            client.hset(f"{queue}:finished:settings", "max", 0)
        cpu0, calls0 = redis_counts(client)
        cmd, env = worker(url, queue, "task")
        result = run_json(cmd, 900, {"BENCH_N": str(n), **env})
        cpu1, calls1 = redis_counts(client)
        entries = int(client.llen(f"{queue}:finished"))
        used = int(client.memory_usage(f"{queue}:finished", samples=0) or 0)
    done = result["n"]
    return {"rate": result["rate"], "worker_us": result["cpu_us_per_job"],
            "redis_us": (cpu1 - cpu0) / done * 1e6, "commands": (calls1 - calls0 - 2) / done,
            "entries": entries, "bytes_per_entry": used / entries if entries else 0.0}  # fmt: skip


def pairs(n: int, repeat: int) -> list[dict[str, Any]]:
    return alternated(
        "history", ("on", "off"), lambda mode: drain(mode == "on", n), repeat, ("on", "off")
    )


def summary(runs: list[dict[str, Any]]) -> list[str]:
    def med(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in runs)

    ratio = statistics.median(r["ratio"] for r in runs)
    each = ", ".join(f"{r['ratio']:.2f}" for r in runs)
    return [f"**{ratio:.2f}** ({each})",
            f"{statistics.median(r['cpu_ratio'] for r in runs):.2f}", f">= {TARGET}",
            f"{med('on', 'rate'):,.0f} / {med('off', 'rate'):,.0f}",
            f"{med('on', 'worker_us'):.1f} / {med('off', 'worker_us'):.1f}",
            f"{med('on', 'redis_us'):.1f} / {med('off', 'redis_us'):.1f}",
            f"{med('on', 'commands'):.3f} / {med('off', 'commands'):.3f}",
            f"{med('on', 'bytes_per_entry'):.0f} ({med('on', 'entries'):,.0f})"]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="alternated pairs (3)")
    args = ap.parse_args()
    runs = pairs(args.n, args.repeat)
    write_json("history", {"command": command(), "machine": machine(None), "n": args.n,
                           "runs": runs})  # fmt: skip
    print(markdown_table(
        ["rate on / off, median of pairs (pairs)", "CPU ratio", "target", "jobs/s on / off",
         "worker CPU µs/job", "Redis CPU µs/job", "Redis commands/job", "bytes per entry"],
        [summary(runs)]))  # fmt: skip


if __name__ == "__main__":
    main()
