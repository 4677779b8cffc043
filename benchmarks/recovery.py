"""Recovery after a crash (issue #9, scenario 1): how long the jobs of a SIGKILLed worker
take once they are recovered, against the same number of jobs with no crash.

Two ``gq-worker`` processes (concurrency 100, buffer 100, heartbeat 15 s and consumer
timeout 5 s, the floors: a 20 s lease; custodian every 1 s) drain 1,200 jobs that sleep
0.3 s. One is SIGKILLed while it holds about 200. Measured, on the Redis clock of this host:

- lease: from the kill to the moment its in-flight set is empty (the survivor's
  custodian recovered every job);
- recovered run: from then to the last recovered job done;
- baseline (same run): one idle worker with the same settings runs as many 0.3 s jobs,
  from enqueue to the last done.

Before issue #9 every recovered job ran alone: 200 jobs took 200 x 0.3 s = 60 s after the
lease. The ratio "recovered run / baseline" is the figure: about 1 means full speed.

usage: recovery.py [--quick] [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import re
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

SLEEP = 0.3
OPTIONS = ["--concurrency", "100", "--buffer-size", "100", "--heartbeat-poll-interval", "15",
           "--custodian-consumer-timeout", "5", "--custodian-poll-interval", "1",
           "--stats-interval", "0"]  # fmt: skip


class Worker:
    def __init__(self, url: str, queue: str, log: Path) -> None:
        env = {**os.environ, "BENCH_URL": url, "BENCH_QUEUE": queue,
               "BENCH_SLEEP_S": str(SLEEP),
               "PYTHONPATH": os.pathsep.join([str(WORKERS), str(ROOT)])}  # fmt: skip
        self.log = log
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "gq.cli.worker", "recovery_handler:sleep_and_record",
                 "--queue", queue, "--url", url, *OPTIONS],
                env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    def consumer_id(self) -> str:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            found = re.search(r"consumer=([0-9a-f-]{36})", self.log.read_text(errors="replace"))
            if found:
                return found.group(1)
            time.sleep(0.05)
        raise RuntimeError(f"worker did not start: {self.log.read_text()}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)


def finished(client: redis.Redis, queue: str) -> dict[str, float]:
    rows = client.lrange(f"{queue}:bench:done", 0, -1)
    return {job_id: float(at) for job_id, at in (row.decode().split() for row in rows)}


def crash_run(url: str, jobs: int, hold: int, tmp: Path) -> dict[str, float]:
    queue = f"bench-rec-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    gq.Producer(queue, url=url).perform_many([gq.Job(id=f"j{i}") for i in range(jobs)])
    victim, survivor = Worker(url, queue, tmp / "victim.log"), Worker(url, queue, tmp / "s.log")
    try:
        inflight = f"{queue}:inflight:{victim.consumer_id()}"
        survivor.consumer_id()
        wait_for(lambda: client.scard(inflight) >= hold, 60, "the victim to hold jobs")
        victim.proc.send_signal(signal.SIGKILL)
        killed = time.time()
        victim.proc.wait(10)
        held = {m.decode() for m in client.smembers(inflight)}
        wait_for(lambda: client.scard(inflight) == 0, 120, "the recovery")
        recovered = time.time()
        wait_for(lambda: len(finished(client, queue)) >= jobs, 300, "every job done")
        ends = finished(client, queue)
        return {"held": len(held), "lease_s": recovered - killed,
                "recovered_run_s": max(ends[i] for i in held) - recovered,
                "kill_to_last_s": max(ends[i] for i in held) - killed}  # fmt: skip
    finally:
        victim.stop()
        survivor.stop()
        delete_queue(url, queue)


def baseline_run(url: str, jobs: int, tmp: Path) -> float:
    queue = f"bench-rec-{uuid.uuid4().hex[:8]}"
    client = redis.Redis.from_url(url)
    worker = Worker(url, queue, tmp / "baseline.log")
    try:
        worker.consumer_id()
        time.sleep(1.0)  # let it register and wait on the signal
        started = time.time()
        gq.Producer(queue, url=url).perform_many([gq.Job(id=f"b{i}") for i in range(jobs)])
        wait_for(lambda: len(finished(client, queue)) >= jobs, 300, "the baseline")
        return max(finished(client, queue).values()) - started
    finally:
        worker.stop()
        delete_queue(url, queue)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="one run instead of three")
    parser.add_argument("--repeat", type=int, default=None)
    args = parser.parse_args()
    repeat = args.repeat or (1 if args.quick else 3)
    tmp = Path(os.environ.get("TMPDIR", "/tmp")) / f"gq-recovery-{uuid.uuid4().hex[:6]}"
    tmp.mkdir(parents=True)
    runs = []
    with dedicated_redis() as url:
        for _ in range(repeat):
            crash = crash_run(url, 1200, 200, tmp)
            crash["baseline_s"] = baseline_run(url, crash["held"], tmp)
            crash["ratio"] = crash["recovered_run_s"] / crash["baseline_s"]
            crash["one_at_a_time_s"] = crash["held"] * SLEEP
            runs.append(crash)
            print(crash, flush=True)
        facts = machine(url)
    ratio = statistics.median(r["ratio"] for r in runs)
    rows = [[r["held"], r["lease_s"], r["recovered_run_s"], r["baseline_s"], r["ratio"],
             r["one_at_a_time_s"]] for r in runs]  # fmt: skip
    print(markdown_table(["jobs recovered", "lease (s)", "recovered run (s)", "baseline (s)",
                          "recovered ÷ baseline", "one at a time (s)"], rows))  # fmt: skip
    print(f"median ratio {ratio:.2f}")
    write_json("recovery", {"command": command(), "machine": facts, "options": OPTIONS,
                            "runs": runs, "median_ratio": ratio})  # fmt: skip


if __name__ == "__main__":
    main()
