"""A tenant at its limit after its worker is SIGKILLed and restarted 2 s later (issue 32,
item 1): how long until the tenant's next job starts.

One ``gq-worker`` (default settings but the stats log) serves a tenant whose group limit
is 5, with 40 jobs of 2 s each; once 5 run, the worker is SIGKILLed, and a new one starts
2 s later. The dead worker's 5 jobs hold the tenant's 5 slots until they are recovered.
Measured from the kill to the first job start recorded after the restart:

- same name: the new worker has the dead one's ``--name``: it takes its jobs back as it
  starts;
- another name: it has to wait for the dead worker's lease (5 s heartbeats + 20 s timeout)
  and its own custodian's next pass;
- curlyq's lease: another name, with curlyq's 60 s heartbeats + 60 s timeout, gq's
  defaults before issue 32 (the "124 s of zero deliveries" the issue measured).

usage: restart_recovery.py [--quick] [--repeat N]   (--quick: no curlyq's-lease row)
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

import redis
from common import (
    ROOT,
    WORKERS,
    command,
    dedicated_redis,
    machine,
    markdown_table,
    wait_for,
    write_json,
)
from gqbench import delete_queue

import gq
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue

LIMIT, JOBS, SLEEP, RESTART_AFTER = 5, 40, 2.0, 2.0
CURLYQ_LEASE = ["--heartbeat-poll-interval", "60", "--custodian-consumer-timeout", "60",
                "--custodian-poll-interval", "60"]  # fmt: skip
CASES = {"same name": ("web", "web", []), "another name": ("web", "web-new", []),
         "curlyq's lease": ("web", "web-new", CURLYQ_LEASE)}  # fmt: skip


def worker(url: str, queue: str, name: str, extra: list[str], log: Path) -> subprocess.Popen:
    env = {**os.environ, "BENCH_URL": url, "BENCH_QUEUE": queue, "BENCH_SLEEP_S": str(SLEEP),
           "PYTHONPATH": os.pathsep.join([str(WORKERS), str(ROOT)])}  # fmt: skip
    with open(log, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "gq.cli.worker", "restart_handler:start_and_sleep",
             "--queue", queue, "--url", url, "--name", name, "--stats-interval", "0", *extra],
            env=env, stdout=out, stderr=subprocess.STDOUT,
        )  # fmt: skip


def starts(client: redis.Redis, queue: str) -> list[float]:
    return [float(row.split()[1]) for row in client.lrange(f"{queue}:bench:started", 0, -1)]


def one_run(url: str, case: str, tmp: Path) -> dict[str, float]:
    first_name, second_name, extra = CASES[case]
    queue = f"bench-restart-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    gq.Queue(queue, client=client).set_group_limits(concurrency=LIMIT)
    entries = [(f"t-{i}", gq.job.encode(gq.Job(f"t-{i}", b"")), 0.0, "t") for i in range(JOBS)]
    push_group(RedisQueue(client, queue), "now", entries)
    log = tmp / f"{queue}.log"
    first = worker(url, queue, first_name, extra, log)
    second = None
    try:
        wait_for(lambda: len(starts(client, queue)) >= LIMIT, 60, "the tenant at its limit")
        first.send_signal(signal.SIGKILL)
        killed = time.time()
        first.wait(10)
        time.sleep(RESTART_AFTER)  # the restart delay being measured around, not a sync
        second = worker(url, queue, second_name, extra, log)
        restarted = time.time()
        wait_for(lambda: max(starts(client, queue)) > restarted, 300, "a start after the restart")
        resumed = min(t for t in starts(client, queue) if t > restarted)
        return {"kill_to_start_s": resumed - killed, "restart_to_start_s": resumed - restarted}
    finally:
        for proc in (first, second):
            if proc is not None and proc.poll() is None:
                proc.send_signal(signal.SIGKILL)
                proc.wait(10)
        delete_queue(url, queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="skip the curlyq's-lease row")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"gq-restart-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    cases = [c for c in CASES if not (args.quick and c == "curlyq's lease")]
    results: dict[str, list[dict[str, float]]] = {c: [] for c in cases}
    with dedicated_redis() as url:
        for _ in range(args.repeat):
            for case in cases:
                results[case].append(one_run(url, case, tmp))
                print(case, results[case][-1], flush=True)
        facts = machine(url)
    rows = [[case, statistics.median(r["kill_to_start_s"] for r in runs),
             statistics.median(r["restart_to_start_s"] for r in runs), len(runs)]
            for case, runs in results.items()]  # fmt: skip
    print(markdown_table(["restarted worker", "kill → tenant's next start (s, median)",
                          "restart → start (s)", "runs"], rows))  # fmt: skip
    write_json("restart_recovery", {"command": command(), "machine": facts, "runs": results})


if __name__ == "__main__":
    main()
