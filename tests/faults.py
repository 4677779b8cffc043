"""The fault suite's harness: a redis-server the test owns, gq-worker processes, the count.

Shared by tests/test_faults.py. Everything is real: redis-server processes the test starts,
stops and restarts on a fixed port and directory, and ``gq-worker`` subprocesses
(``tests.fault_worker``) that record finished jobs in Redis (``tests.fault_handlers``).
The outcome of each scenario (jobs, lost, duplicates, the bound) is collected in
``OUTCOMES`` and rendered into tests/reliability_template.md by ``render`` when
``GQ_RELIABILITY_REPORT`` names the file.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import redis

import gq
from tests.helpers import NO_RETRY, RedisServer, free_port, redis_answers, wait_until

ROOT = Path(__file__).resolve().parent.parent
LAUNCHER = [sys.executable, "-m", "tests.fault_worker"]
HANDLER = "tests.fault_handlers:record"
#: Seconds of random kills and restarts; 0 (the default CI run) runs each scenario once.
SOAK_SECONDS = float(os.environ.get("GQ_SOAK_SECONDS") or 0)

# Timings far below production (the launcher lifts the floors): a killed worker's jobs are
# recovered after heartbeat 0.3 s + timeout 1 s. --job-max-recoveries is high because the
# kill scenarios recover innocent jobs several times; the poison scenario sets its own.
FAST = [
    "--concurrency", "20", "--buffer-size", "20", "--heartbeat-poll-interval", "0.3",
    "--custodian-consumer-timeout", "1", "--custodian-poll-interval", "0.2",
    "--poller-poll-duration", "0.5", "--scheduler-poll-interval", "0.2",
    "--job-max-backoff", "0.5", "--job-max-recoveries", "1000", "--stats-interval", "0",
]  # fmt: skip


@dataclass
class Outcome:
    scenario: str
    done: str
    seed: int | None
    jobs: int
    lost: int
    duplicates: int
    bound: str
    seconds: float


OUTCOMES: list[Outcome] = []


class Server:
    """A redis-server on a fixed port and directory, so that it can be restarted."""

    def __init__(self, workdir: Path, *config: str, appendonly: bool = False) -> None:
        self.workdir = workdir
        self.port = free_port()
        aof = ["--appendonly", "yes", "--appendfsync", "always"] if appendonly else []
        self.args = [shutil.which("redis-server") or "redis-server", "--port", str(self.port),
                     "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", *aof,
                     "--dir", str(workdir), "--logfile", str(workdir / "redis.log"),
                     *config]  # fmt: skip
        self.proc: subprocess.Popen[bytes] | None = None
        self.info = RedisServer("127.0.0.1", self.port)
        self.url = self.info.url

    def start(self) -> None:
        self.proc = subprocess.Popen(self.args, stdin=subprocess.DEVNULL)
        wait_until(lambda: redis_answers(self.info, 0.2), 20, message="redis-server up")

    def stop(self) -> None:
        """A clean shutdown (the AOF is flushed), as an orchestrator's restart does."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            self.proc.wait(20)

    def client(self) -> redis.Redis:
        return self.info.client(retry=NO_RETRY)


class Worker:
    """One ``gq-worker`` subprocess (through the test launcher); output to a file."""

    def __init__(self, fleet: Fleet, args: Sequence[str], env: dict[str, str]) -> None:
        self.log = fleet.workdir / f"worker-{uuid.uuid4().hex[:6]}.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [*LAUNCHER, HANDLER, "--queue", fleet.queue, "--url", fleet.server.url, *args],
                cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT,
            )  # fmt: skip

    @property
    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def consumer_id(self) -> str:
        found = wait_until(
            lambda: re.search(r"consumer=([0-9a-f-]{36})", self.output), 15, message="start"
        )
        return found.group(1)

    def alive(self) -> bool:
        return self.proc.poll() is None


class Fleet:
    """The workers of one queue, and what the test reads back from Redis."""

    def __init__(
        self,
        server: Server,
        workdir: Path,
        options: Sequence[str] = FAST,
        recorder: Server | None = None,
    ) -> None:
        self.server = server
        self.workdir = workdir
        self.queue = f"faults_{uuid.uuid4().hex[:8]}"
        self.options = list(options)
        self.workers: list[Worker] = []
        self.direct = server.client()
        # Where handlers record their runs: the queue's server unless that one is full.
        self.recorder = recorder or server

    def start(self, *extra: str, **env: str) -> Worker:
        environ = {**os.environ, "GQ_TEST_HANDLER_URL": self.recorder.url, "GQ_QUEUE": self.queue}
        environ.pop("GQ_REDIS_URL", None)
        worker = Worker(self, [*self.options, *extra], {**environ, **env})
        self.workers.append(worker)
        return worker

    def enqueue(self, count: int, data: bytes = b"", prefix: str = "j") -> list[str]:
        producer = gq.Producer(self.queue, url=self.server.url)
        try:
            ids = [f"{prefix}{i}" for i in range(count)]
            for start in range(0, count, 1000):
                producer.perform_many(gq.Job(id=i, data=data) for i in ids[start : start + 1000])
            return ids
        finally:
            producer.close()

    def done(self) -> Counter[str]:
        recorded = self.recorder.client().lrange(f"{self.queue}:test:done", 0, -1)
        runs = {x.decode() for x in recorded}
        return Counter(run.split(" ")[0] for run in runs)

    def wait_all_done(self, ids: Sequence[str], timeout: float = 60) -> Counter[str]:
        wanted = set(ids)
        try:
            wait_until(lambda: wanted <= set(self.done()), timeout, 0.05, "every job done")
        except AssertionError:
            print(self.describe(wanted - set(self.done())))
            raise
        return self.done()

    def describe(self, missing: set[str]) -> str:
        """Where the missing jobs are, and the workers' last words: for a failure report."""
        q, direct = self.queue, self.direct
        lines = [f"{len(missing)} missing, e.g. {sorted(missing)[:5]}",
                 f"active={direct.llen(f'{q}:active')} scheduled={direct.zcard(f'{q}:scheduled')}"
                 f" dead={direct.zcard(f'{q}:dead')}"]  # fmt: skip
        for key, score in direct.zrange(f"{q}:consumers", 0, -1, withscores=True):
            lines.append(f"{key.decode()} @{score:.1f}: {direct.scard(key)} in flight")
        for worker in self.workers:
            lines.append(f"-- {worker.log.name} alive={worker.alive()}")
            lines.extend(worker.output.splitlines()[-15:])
        return "\n".join(lines)

    def inflight(self, consumer_id: str) -> set[str]:
        members = self.direct.smembers(f"{self.queue}:inflight:{consumer_id}")
        return {m.decode() for m in members}

    def dead(self) -> set[str]:
        return {m.decode() for m in self.direct.zrange(f"{self.queue}:dead", 0, -1)}

    def close(self) -> None:
        for worker in self.workers:
            if worker.alive():
                worker.proc.kill()
            worker.proc.wait(10)


def count(ids: Sequence[str], done: Counter[str]) -> tuple[int, int]:
    """(lost, duplicates): ids never done, and extra runs of the ids done more than once."""
    lost = sum(1 for i in ids if done[i] == 0)
    return lost, sum(n - 1 for n in done.values() if n > 1)


def report(scenario: str, what: str, seed: int | None, ids: Sequence[str], done: Counter[str],
           bound: str, started: float) -> tuple[int, int]:  # fmt: skip
    lost, dups = count(ids, done)
    OUTCOMES.append(
        Outcome(scenario, what, seed, len(ids), lost, dups, bound, time.monotonic() - started)
    )
    print(f"{scenario}: seed={seed} jobs={len(ids)} lost={lost} duplicates={dups} ({bound})")
    return lost, dups


def stop_all(*procs: subprocess.Popen[bytes] | None) -> None:
    for proc in procs:
        if proc is not None and proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            proc.wait(10)


TEMPLATE = Path(__file__).with_name("reliability_template.md")  # {table} is filled in


def render(path: str) -> None:
    rows = []
    for o in sorted(OUTCOMES, key=lambda o: int(o.scenario.split(".")[0])):
        number, _, name = o.scenario.partition(". ")
        seed = "" if o.seed is None else str(o.seed)
        rows.append(f"| {number} | {name} | {o.done} | {seed} | {o.jobs} | {o.lost} | "
                    f"{o.duplicates} | {o.bound} | {o.seconds:.1f} |\n")  # fmt: skip
    Path(path).write_text(TEMPLATE.read_text().replace("{table}", "".join(rows)))
