"""Redis's instructions per job of a fetch and acknowledge loop (issue 36): the scripts'
cost as a count, which the wall clock and even Redis's CPU seconds cannot show on a
shared machine (both swing by a factor of two with the load).

A redis-server of its own runs under ``valgrind --tool=callgrind`` with instrumentation
off; the queue is filled (N byte jobs, ungrouped or spread round robin over --groups
groups, as groups.py does), then instrumentation goes on for the loop alone: fetch.lua
takes --batch jobs and acknowledges the previous batch, riding on the fetch as a worker's
acks do, until the queue is empty. Figures: the loop's instructions / N.

usage: redis_instructions.py [--n N] [--batch B] [--groups G]
                             [--modes bytes,groups,results,history_off]
Modes: ``bytes`` (plain acks), ``groups`` (jobs over --groups groups), ``results`` (each
ack keeps a noop task's result record for an hour, as ack_results.lua writes it).
(mode history_off: bytes with the history of finished jobs turned off)
(run with PYTHONPATH=<a tree> to count another tree's scripts)
"""

from __future__ import annotations

import argparse
import glob
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import msgpack
import redis
from common import free_port, markdown_table
from gqbench import prefill
from groups import prefill_groups

import gq
from gq.store.jobs import RedisQueue
from gq.tasks.outcome import Outcome

RESULT_TTL = 3600.0

TOTALS = re.compile(r"^(?:summary|totals): (\d+)", re.MULTILINE)


def control(pid: int, *args: str) -> None:
    subprocess.run(["callgrind_control", *args, str(pid)], capture_output=True, check=True)


def started(port: int) -> redis.Redis:
    client = redis.Redis(port=port)
    deadline = time.monotonic() + 60
    while True:
        try:
            client.ping()
            return client
        except redis.ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def drain(store: RedisQueue, batch: int, record: bytes | None = None) -> int:
    """Fetch ``batch`` at a time, each fetch acknowledging the previous batch (with a
    result ``record`` each, kept RESULT_TTL, unless None); the jobs."""
    acks: list[str] = []
    done = 0
    while True:
        if record is None:
            fetched = store.fetch("c1", batch, idle=False, acks=acks)
        else:
            outcomes = [(job_id, Outcome(record, RESULT_TTL)) for job_id in acks]
            fetched = store.fetch("c1", batch, idle=False, outcomes=outcomes)
        ids = [job_id for job_id, _ in fetched]
        if not ids and not acks:
            return done
        done, acks = done + len(acks), ids


def noop_record() -> bytes:
    """The record a noop task's success keeps (OwnFinisher's bytes for ``noop(7)``)."""
    record = {"status": "done", "task": "results_app.noop", "kwargs": {}, "args": [7],
              "started": time.time(), "attempt": 1, "value": None}  # fmt: skip
    return msgpack.packb(record)


def count(mode: str, n: int, batch: int, groups: int, out: str) -> float:
    """Redis's instructions per job of one drain of ``n`` jobs."""

    def prepare(client: redis.Redis, url: str) -> None:
        if mode == "groups":
            prefill_groups(url, "q", n, groups)
        else:
            prefill(url, "q", n)
        if mode == "history_off":  # (benchmarks/history.py: "bytes" has it on, the default)
            client.hset("q:finished:settings", "max", 0)

    return counted(prepare, batch, noop_record() if mode == "results" else None, out)


def counted(prepare: Callable[[redis.Redis, str], None], batch: int, record: bytes | None,
            out: str) -> float:  # fmt: skip
    """Redis's instructions per job of the fetch-and-acknowledge loop over queue "q" of a
    redis-server under callgrind, once ``prepare(client, url)`` has filled it (uncounted)."""
    port = free_port()
    proc = subprocess.Popen(
        ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
         "redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
         "--appendonly", "no"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        client = started(port)
        prepare(client, f"redis://127.0.0.1:{port}/0")
        store = RedisQueue(client, "q")
        store.register("c1")
        store.fetch("c1", 0, idle=False)  # the script loaded, outside the count
        control(proc.pid, "-i", "on")
        done = drain(store, batch, record)
        control(proc.pid, "-i", "off")
        control(proc.pid, "-d")
    finally:
        proc.terminate()
        proc.wait(60)
    (dump,) = glob.glob(out + ".*")
    return int(TOTALS.findall(Path(dump).read_text())[-1]) / done


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=500)
    ap.add_argument("--groups", type=int, default=1000)
    ap.add_argument("--modes", default="bytes,groups", type=lambda s: s.split(","))
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for mode in args.modes:
            per_job = count(mode, args.n, args.batch, args.groups, f"{tmp}/callgrind.{mode}")
            print(f"{mode}: {per_job:,.0f} instructions/job", file=sys.stderr, flush=True)
            rows.append([mode, f"{per_job:,.0f}"])
    print(f"gq {gq.__file__}, {args.n:,} jobs, fetches of {args.batch} (+ acks)")
    print(markdown_table(["mode", "Redis instructions/job"], rows))


if __name__ == "__main__":
    main()
