"""Search and bulk actions by filter (issue 34): how fast a search returns its first page
over a dead set of 100,000 jobs, how long whole scans and bulk actions take, and the
longest single command each sends to Redis (its slow log, every command logged), on a
dedicated redis-server on a free port.

Phases, each on jobs written beforehand (not timed), every one a real task envelope:
1. search the dead set (100,000 jobs, 1,000 tenants, 1% with a "timeout" error): the first
   page (50) of a common filter, of a rare one (one tenant: 100 jobs), a whole scan that
   matches nothing, and ``gq jobs`` as a user runs it (a process: start included);
2. dead retry by filter (the 1% with "timeout"), dead delete by filter (half the set);
3. purge of 100,000 ready jobs, move of 100,000 ready jobs (one slot), move across slots
   (copy then delete) of 20,000, reschedule of 100,000 scheduled jobs.

usage: ops.py [--jobs N] [--renice]

--renice runs the dedicated redis-server at nice -10 (root): on a shared machine a script
descheduled by the kernel for a few ms shows in the slow log as a slow command; with it,
the log shows closer to what each command itself costs.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import redis
from common import ROOT, command, dedicated_redis, machine, markdown_table, write_json

import gq
from gq import bulk
from gq import job as jobs
from gq.jobfilter import JobFilter
from gq.tasks import envelope

QUEUE = "{ops}"


def fill(client: redis.Redis, n: int, where: str, queue: str = QUEUE) -> None:
    """``n`` task jobs of two tasks and 1,000 tenants, in the dead set, scheduled or ready."""
    pipe = client.pipeline(transaction=False)
    for start in range(0, n, 1000):
        ids = [f"{where}-{i:07d}" for i in range(start, min(n, start + 1000))]
        messages = {}
        for i, job_id in enumerate(ids, start):
            data = envelope.encode("app.send" if i % 2 else "app.other", [f"u{i}@x.io"],
                                   {"tenant": f"t{i % 1000}"})  # fmt: skip
            error = "SMTP timeout" if i % 100 == 0 else "ValueError: bad address"
            messages[job_id] = jobs.encode(jobs.Job(job_id, data, 3), error=error)
        pipe.hset(f"{queue}:data", mapping=messages)
        if where == "ready":
            pipe.rpush(f"{queue}:active", *ids)
        else:
            pipe.zadd(f"{queue}:{where}", {job_id: 1e9 + i for i, job_id in enumerate(ids, start)})
        pipe.execute()


def timed(client: redis.Redis, name: str, action: Callable[[], Any]) -> list[Any]:
    """Run ``action`` with every command in the slow log: wall time, the outcome, the
    longest command (µs) and which, and the commands over 1 ms."""
    client.slowlog_reset()
    cpu = _redis_cpu(client)
    start = time.perf_counter()
    outcome = action()
    wall = time.perf_counter() - start
    cpu = _redis_cpu(client) - cpu
    log = client.slowlog_get(client.slowlog_len())
    longest = max(log, key=lambda e: e["duration"], default={"duration": 0, "command": b"-"})
    slow = sum(1 for e in log if e["duration"] > 1000)
    what = longest["command"].decode(errors="replace").split(" ")[0]
    scripts = sorted(e["duration"] for e in log if e["command"].startswith(b"EVALSHA"))
    p50, p99 = (scripts[int(len(scripts) * q)] if scripts else 0 for q in (0.5, 0.99))
    # Redis's CPU (µs) per script call (per command for a search, whose only script is the
    # CLI's access check), on average: what one call holds the server for, whatever the
    # machine's load.
    per_call = round(cpu * 1e6 / (len(scripts) if len(scripts) > 10 else max(1, len(log))))
    return [name, round(wall, 3), _shown(outcome), longest["duration"], what, p50, p99, slow,
            len(log), round(cpu, 2), per_call]  # fmt: skip


def _redis_cpu(client: redis.Redis) -> float:
    """The Redis server's CPU seconds so far (user + system): what it spent, whatever the
    load of the machine (a descheduled script costs no CPU while it waits)."""
    info = client.info("cpu")
    return float(info["used_cpu_user"]) + float(info["used_cpu_sys"])


def _shown(outcome: Any) -> str:
    if isinstance(outcome, bulk.BulkResult):
        return f"{outcome.done or outcome.matched:,}"
    if isinstance(outcome, gq.jobsearch.SearchPage):
        return f"{len(outcome.jobs)} found"
    return str(outcome)


def cli_first_page(url: str) -> str:
    args = [sys.executable, "-m", "gq.cli.admin", "jobs", "--url", url, "--queue", QUEUE,
            "--state", "dead", "--task", "app.send", "--args", "tenant=t7", "--json"]  # fmt: skip
    done = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=60)
    return f"exit {done.returncode}"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--jobs", type=int, default=100_000)
    parser.add_argument("--renice", action="store_true")
    given = parser.parse_args()
    n = given.jobs
    rows = []
    with dedicated_redis() as url:
        client = redis.Redis.from_url(url)
        if given.renice:
            os.setpriority(os.PRIO_PROCESS, int(client.info("server")["process_id"]), -10)
        client.config_set("slowlog-log-slower-than", 0)
        client.config_set("slowlog-max-len", 1_000_000)
        q = gq.Queue(QUEUE, client=redis.Redis.from_url(url))
        fill(client, n, "dead")
        dead = JobFilter(states=("dead",))
        rows.append(timed(client, "first page, --task app.send", lambda: q.jobs(
            JobFilter(states=("dead",), task="app.send"))))  # fmt: skip
        rows.append(timed(client, "first page, --args tenant=t7", lambda: q.jobs(
            JobFilter(states=("dead",), args=(("tenant", "t7"),)))))  # fmt: skip
        rows.append(timed(client, "whole scan, nothing matches", lambda: q.jobs(
            JobFilter(states=("dead",), task="app.none"))))  # fmt: skip
        rows.append(timed(client, "gq jobs --args tenant=t7 (process)",
                          lambda: cli_first_page(url)))  # fmt: skip
        rows.append(timed(client, "dead retry --error timeout", lambda: q.retry_dead(
            JobFilter(error="timeout"))))  # fmt: skip
        rows.append(timed(client, "dead delete --task app.other", lambda: q.delete_dead(
            JobFilter(task="app.other"))))  # fmt: skip
        client.delete(f"{QUEUE}:dead", f"{QUEUE}:data", f"{QUEUE}:active")
        fill(client, n, "ready")
        rows.append(timed(client, f"move {n:,} ready (one slot)", lambda: q.move(dead.__class__(
            task="app.*"), to="{ops}-new")))  # fmt: skip
        rows.append(timed(client, f"purge {n:,} ready", lambda: gq.Queue("{ops}-new", client=client)
                          .purge(JobFilter(task="app.*"))))  # fmt: skip
        fill(client, n // 5, "ready", "{far}")
        bulk.bulk.same_slot = lambda *_: False  # type: ignore[assignment]
        far = gq.Queue("{far}", client=client)
        rows.append(timed(client, f"move {n // 5:,} ready across slots", lambda: far.move(
            JobFilter(task="app.*"), to="{ops}")))  # fmt: skip
        fill(client, n, "scheduled")
        rows.append(timed(client, f"reschedule {n:,} scheduled", lambda: q.reschedule(
            JobFilter(task="app.*"), after=600)))  # fmt: skip
        info = machine(url)
    headers = ["phase", "wall s", "outcome", "longest command µs", "which",
               "script p50 µs", "script p99 µs", "commands > 1 ms", "commands",
               "Redis CPU s", "CPU µs per call"]  # fmt: skip
    print(markdown_table(headers, rows))
    name = "ops_reniced" if given.renice else "ops"
    write_json(name, {"command": command(), "machine": info, "jobs": n, "rows": rows})


if __name__ == "__main__":
    main()
