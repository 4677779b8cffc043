"""What a queue's job events cost (issue 34): the noop task drain with events on against
the same drain with them off, the instructions Redis runs per job either way, and the
memory each event takes.

1. Drains (as features.py's: N noop task jobs, one worker process, C = 100, buffer
   "auto", each on a redis-server of its own, started here, so Redis's CPU and commands
   over the drain are the drain's alone), alternated on / off --repeat times; the row's
   figure is the median of its pairs' rate ratios, with worker and Redis CPU per job.
   The stream is on at the default cap (gq.events.DEFAULT_MAXLEN) for the "on" drain;
   the enqueues' events are written at the fill, before the drain is measured.
2. Instructions (valgrind callgrind, as redis_instructions.py: immune to the machine's
   load): the fetch-and-acknowledge loop over --inst-n task jobs, events off and on.
   Events off against the tree before events: run redis_instructions.py with
   PYTHONPATH=<that tree> (the README gives both commands).
3. Bytes per event: MEMORY USAGE of the stream (SAMPLES 0: every node) / XLEN, after
   the "on" drain (enqueued, started and done for every job, trimmed to the cap).

usage: events.py [--n N] [--repeat K] [--inst-n M] [--skip-instructions]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import uuid
from typing import Any

import redis
from common import (
    command,
    dedicated_redis,
    machine,
    markdown_table,
    run_json,
    write_json,
)
from features import alternated, fill, redis_counts, worker
from redis_instructions import counted

import gq
from gq.events import DEFAULT_MAXLEN
from gq.store.keys import QueueKeys


def drain(events: bool, n: int) -> dict[str, Any]:
    """One noop task drain: rate, worker and Redis CPU and commands per job, and with
    events on the stream's bytes per event."""
    with dedicated_redis() as url:
        queue = f"bench-events-{uuid.uuid4().hex[:8]}"
        client = redis.Redis.from_url(url)
        if events:
            gq.Queue(queue, client=client).enable_events(maxlen=DEFAULT_MAXLEN)
        fill(url, queue, "task", n)
        cpu0, calls0 = redis_counts(client)
        cmd, env = worker(url, queue, "task")
        result = run_json(cmd, 900, {"BENCH_N": str(n), **env})
        cpu1, calls1 = redis_counts(client)
        stream = QueueKeys(queue).events
        length = client.xlen(stream)
        size = client.memory_usage(stream, samples=0) or 0
    done = result["n"]
    return {"rate": result["rate"], "worker_us": result["cpu_us_per_job"],
            "redis_us": (cpu1 - cpu0) / done * 1e6, "commands": (calls1 - calls0 - 2) / done,
            "events": length, "bytes_per_event": size / length if length else 0.0}  # fmt: skip


def pairs(n: int, repeat: int) -> list[dict[str, Any]]:
    return alternated(
        "events", ("on", "off"), lambda mode: drain(mode == "on", n), repeat, ("on", "off")
    )


def instructions(events: bool, n: int, out: str) -> float:
    """Redis's instructions per job of fetch.lua's fetch-and-acknowledge loop."""

    def prepare(client: redis.Redis, url: str) -> None:
        if events:
            gq.Queue("q", client=client).enable_events(maxlen=DEFAULT_MAXLEN)
        fill(url, "q", "task", n)

    return counted(prepare, 500, None, out)


def rows(runs: list[dict[str, Any]]) -> list[list[str]]:
    def med(side: str, key: str) -> float:
        return statistics.median(r[side][key] for r in runs)

    ratio = statistics.median(r["ratio"] for r in runs)
    pair_ratios = ", ".join(f"{r['ratio']:.2f}" for r in runs)
    return [["events on / off", f"**{ratio:.2f}** ({pair_ratios})",
             f"{statistics.median(r['cpu_ratio'] for r in runs):.2f}", ">= 0.8",
             f"{med('on', 'rate'):,.0f} / {med('off', 'rate'):,.0f}",
             f"{med('on', 'worker_us'):.1f} / {med('off', 'worker_us'):.1f}",
             f"{med('on', 'redis_us'):.1f} / {med('off', 'redis_us'):.1f}",
             f"{med('on', 'commands'):.3f} / {med('off', 'commands'):.3f}",
             f"{med('on', 'bytes_per_event'):.0f}"]]  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3, help="alternated pairs (3)")
    ap.add_argument("--inst-n", type=int, default=20_000)
    ap.add_argument("--skip-instructions", action="store_true")
    args = ap.parse_args()
    inst: dict[str, float] = {}
    if not args.skip_instructions:
        with tempfile.TemporaryDirectory() as tmp:
            for name, on in (("off", False), ("on", True)):
                inst[name] = instructions(on, args.inst_n, f"{tmp}/callgrind.{name}")
                print(f"instructions, events {name}: {inst[name]:,.0f}/job", file=sys.stderr)
    runs = pairs(args.n, args.repeat)
    write_json("events", {"command": command(), "machine": machine(None), "n": args.n,
                          "runs": runs, "instructions": inst})  # fmt: skip
    print(markdown_table(
        ["row", "ratio, median of pairs (pairs)", "CPU ratio", "target", "jobs/s",
         "worker CPU µs/job", "Redis CPU µs/job", "Redis commands/job", "bytes/event"],
        rows(runs)))  # fmt: skip
    if inst:
        print(markdown_table(["events", "Redis instructions/job (fetch + ack loop)"],
                             [[k, f"{v:,.0f}"] for k, v in inst.items()]))  # fmt: skip


if __name__ == "__main__":
    main()
