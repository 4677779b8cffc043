"""``gq-worker --processes N``: the supervisor and its children, as real processes on a
real redis-server (SPEC sections 7 and 12).

Tests that need a child's jobs recovered within seconds, a fast crash loop or a quick
memory check start the supervisor through tests/supervised_worker.py (option floors
lifted, short backoff); the others run the real ``gq-worker`` command.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

import gq
from gq.cli.supervisor import (
    MAX_START_FAILURES,
    STABLE_SECONDS,
    START_SECONDS,
    Supervisor,
    describe,
)
from gq.cli.worker import supervises
from tests.cli_support import ROOT, WORKER, closed_port_url, env_for, log_lines, run
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.queue_sides import BothSides

pytestmark = pytest.mark.timeout(60)

LAUNCHER = [sys.executable, "-m", "tests.supervised_worker"]
# With the launcher: a SIGKILLed child's jobs are recovered after 0.3 + 1 s.
FAST = [
    "--heartbeat-poll-interval", "0.3", "--custodian-consumer-timeout", "1",
    "--custodian-poll-interval", "0.2", "--poller-poll-duration", "0.5",
    "--scheduler-poll-interval", "0.2", "--stats-interval", "0",
]  # fmt: skip
START_LINE = re.compile(
    r"\[slot=(\d+) pid=(\d+)\] gq-worker \S+ starting: queue=\S+ consumer=(\S+)"
)


class Supervised:
    """A supervisor subprocess (``command`` + ``args``) whose output goes to a file."""

    def __init__(self, tmp_path: Path, command: list[str], *args: str, env: dict[str, str],
                 new_session: bool = False) -> None:  # fmt: skip
        self.path = tmp_path / f"supervisor-{uuid.uuid4().hex[:6]}.log"
        with open(self.path, "wb") as out:
            self.proc = subprocess.Popen(
                [*command, *args],
                cwd=ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=new_session,
            )
        self.seen: set[int] = set()  # every child pid ever observed

    @property
    def output(self) -> str:
        return self.path.read_text(errors="replace")

    def children(self) -> list[int]:
        try:
            found = [p.pid for p in psutil.Process(self.proc.pid).children() if _alive(p.pid)]
        except psutil.NoSuchProcess:
            found = []
        self.seen.update(found)
        return sorted(found)

    def wait_children(self, count: int, timeout: float = 15) -> list[int]:
        return wait_until(
            lambda: len(self.children()) == count and self.children(),
            timeout,
            message=f"{count} children",
        )

    def consumers(self) -> dict[int, str]:
        """pid -> consumer id, from the children's start lines."""
        return {int(pid): consumer for _, pid, consumer in START_LINE.findall(self.output)}

    def wait(self, timeout: float = 30) -> int:
        return self.proc.wait(timeout=timeout)

    def stop(self) -> None:
        """Teardown: whatever the test did, no process of ours survives it."""
        self.children()
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pid in self.seen:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def none_alive(pids: set[int]) -> bool:
    return not any(_alive(pid) for pid in pids)


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_procs_{uuid.uuid4().hex[:8]}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.fixture
def rq(redis_server: RedisServer, queue: str) -> BothSides:
    return BothSides(redis_server.client(), queue)


@pytest.fixture
def start(tmp_path: Path, redis_server: RedisServer, queue: str) -> Iterator[Any]:
    """``start(*args, command=WORKER, new_session=False)``: a supervisor on ``queue``."""
    started: list[Supervised] = []
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)

    def start_(*args: str, command: list[str] = WORKER, new_session: bool = False) -> Supervised:
        started.append(Supervised(tmp_path, command, *args, env=env, new_session=new_session))
        return started[-1]

    yield start_
    for supervisor in started:
        supervisor.stop()


def recorded(rq: BothSides, what: str = "done") -> list[str]:
    return [i.decode() for i in rq.client.lrange(f"{rq.keys.name}:test:{what}", 0, -1)]


def enqueue(rq: BothSides, n: int, data: bytes = b"") -> list[str]:
    return gq.Producer(rq.keys.name, client=rq.client).perform_many([data] * n)


def where_else(rq: BothSides, missing: set[str], output: str) -> str:
    """Where the jobs neither done nor ready are (a failure's message)."""
    scheduled = {i for i, _, _ in rq.scheduled_jobs(10_000)} & missing
    dead = {i for i, _, _ in rq.dead_jobs(10_000)} & missing
    held = {
        key.decode(): sorted(m.decode() for m in rq.client.smembers(key))
        for key in rq.client.keys(f"{rq.keys.name}:*")
        if rq.client.type(key) == b"set"
    }
    return (f"missing {sorted(missing)}: scheduled {sorted(scheduled)}, dead {sorted(dead)}, "
            f"sets {held}, consumers {rq.consumers()}\n{output}")  # fmt: skip


def ready(rq: BothSides) -> list[str]:
    return [i.decode() for i in rq.client.lrange(rq.keys.active, 0, -1)]


# -- usage: checked once, before any child starts -----------------------------------------


@pytest.mark.parametrize(
    "args, reason",
    [
        (["no_such_module_xyz:handle"], "cannot import handler module 'no_such_module_xyz'"),
        (["tests.handlers:NOT_CALLABLE"], "is not callable (it is int)"),
        (["tests.handlers:record", "--concurrency", "0"], "processor_concurrency must be at"),
        (["tests.handlers:record", "--url", "fakeredis://"], "--processes needs a Redis server"),
        (["tests.handlers:record", "--processes", "0"], "must be at least 1"),
    ],
)
def test_a_usage_error_exits_2_before_any_child_starts(
    start: Any, args: list[str], reason: str
) -> None:
    supervisor = start(*args, "--processes", "2")
    assert supervisor.wait() == 2, supervisor.output
    assert reason in supervisor.output
    assert "Traceback" not in supervisor.output
    assert "started child" not in supervisor.output
    assert supervisor.children() == []


def test_unreachable_redis_exits_3_before_any_child_starts(queue: str) -> None:
    url = closed_port_url()
    args = ["--processes", "2", "--url", url, "--queue", queue]
    result = run(WORKER, "tests.handlers:record", *args)
    assert result.returncode == 3, result.stderr
    assert f"cannot use Redis at {url}" in result.stderr
    assert "started child" not in result.stderr


def test_recycling_flags_need_processes(redis_server: RedisServer, queue: str) -> None:
    for flag in ("--max-jobs-per-child", "--max-memory-per-child"):
        result = run(
            WORKER, "tests.handlers:record", flag, "5", env=env_for(redis_server.url, queue)
        )
        assert result.returncode == 2, result.stderr
        assert f"{flag} needs --processes N" in result.stderr


def test_help_shows_the_process_flags() -> None:
    result = run(WORKER, "--help")
    assert result.returncode == 0
    for flag in ("--processes", "--max-jobs-per-child", "--max-memory-per-child"):
        assert flag in result.stdout
    assert "--supervisor-pid" not in result.stdout  # the children's flags stay hidden


# -- stopping ---------------------------------------------------------------------------------


def test_sigterm_stops_every_child_gracefully_exit_0_nothing_lost(
    start: Any, rq: BothSides
) -> None:
    ids = enqueue(rq, 300, b"0.1")
    supervisor = start(
        "tests.handlers:record", "--processes", "2", "--concurrency", "10", "--buffer-size", "10"
    )
    children = supervisor.wait_children(2)
    wait_until(lambda: len(recorded(rq)) >= 30, 20, message="30 jobs done")
    supervisor.proc.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output
    assert none_alive(set(children))
    done, started = recorded(rq), recorded(rq, "started")
    assert len(done) < len(ids), "stopped too late to test anything"
    assert len(set(done)) == len(done)  # nothing ran twice
    assert sorted(started) == sorted(done)  # every started job finished
    # The buffers and any fetch the stop cut short went back: nothing left in flight.
    missing = set(ids) - set(done + ready(rq))
    assert sorted(done + ready(rq)) == sorted(ids), where_else(rq, missing, supervisor.output)
    assert rq.consumers() == []  # both deregistered
    # Each child's lines name it: slot, pid and consumer id on every line.
    consumers = supervisor.consumers()
    assert sorted(consumers) == children
    lines = log_lines(supervisor.output)
    for pid, consumer in consumers.items():
        own = [line for line in lines if re.search(rf"\[slot=\d pid={pid}[\] ]", line)]
        assert any("SIGTERM: stopping gracefully" in line for line in own)
        assert own and all(consumer in line for line in own), own


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_signal_to_the_whole_group_is_still_one_graceful_stop(
    start: Any, rq: BothSides, signum: int
) -> None:
    """Ctrl-C (SIGINT to the group) and systemd's default KillMode (SIGTERM to every
    process) reach the children directly *and* through the supervisor: still graceful."""
    ids = enqueue(rq, 40, b"0.5")
    supervisor = start(
        "tests.handlers:record", "--processes", "2", "--concurrency", "4", new_session=True
    )
    children = supervisor.wait_children(2)
    wait_until(lambda: len(recorded(rq, "started")) >= 8, 20, message="8 jobs running")
    os.killpg(supervisor.proc.pid, signum)
    assert supervisor.wait() == 0, supervisor.output
    assert none_alive(set(children))
    done = recorded(rq)
    assert sorted(recorded(rq, "started")) == sorted(done)  # none was cut short
    assert sorted(done + ready(rq)) == sorted(ids)
    assert "stopping now" not in supervisor.output


def test_second_signal_stops_every_child_now_exit_1_jobs_stay_in_flight(
    start: Any, rq: BothSides
) -> None:
    ids = enqueue(rq, 6)  # each child runs 2 and holds at most 1 more
    supervisor = start(
        "tests.handlers:hang", "--processes", "2", "--concurrency", "2", "--buffer-size", "1"
    )
    children = supervisor.wait_children(2)
    wait_until(lambda: len(recorded(rq, "started")) == 4, 20, message="4 handlers running")
    supervisor.proc.send_signal(signal.SIGTERM)
    wait_until(
        lambda: supervisor.output.count("SIGTERM: stopping gracefully") == 2,
        10,
        message="both children stopping",
    )
    supervisor.proc.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 1, supervisor.output
    assert none_alive(set(children))
    assert "SIGQUIT: stopping now" in supervisor.output
    held = {consumer: count for consumer, _, count in rq.consumers()}
    assert sum(held.values()) == 4  # left in flight for another consumer's custodian
    assert sorted(recorded(rq, "started") + ready(rq)) == sorted(ids)  # the buffers went back


def test_a_killed_supervisor_leaves_no_child_behind(start: Any, rq: BothSides) -> None:
    supervisor = start("tests.handlers:record", "--processes", "2")
    children = supervisor.wait_children(2)
    wait_until(lambda: len(rq.consumers()) == 2, 10, message="2 consumers registered")
    supervisor.proc.kill()
    supervisor.wait()
    wait_until(lambda: none_alive(set(children)), 10, message="the children gone")
    assert rq.consumers() == []  # they stopped gracefully (PR_SET_PDEATHSIG: SIGTERM)


# -- a dead child ---------------------------------------------------------------------------


def test_a_sigkilled_child_is_replaced_and_its_jobs_recovered(start: Any, rq: BothSides) -> None:
    ids = enqueue(rq, 120, b"0.3")
    supervisor = start(
        "tests.handlers:record", "--processes", "2", "--concurrency", "5", *FAST,
        command=LAUNCHER,
    )  # fmt: skip
    first = supervisor.wait_children(2)
    wait_until(lambda: len(supervisor.consumers()) == 2, 10, message="2 start lines")
    victim = first[0]
    consumer = supervisor.consumers()[victim]
    wait_until(lambda: rq.client.scard(rq.keys.inflight(consumer)) > 0, 10, message="jobs held")
    os.kill(victim, signal.SIGKILL)
    after = wait_until(
        lambda: victim not in (kids := supervisor.children()) and len(kids) == 2 and kids,
        10,
        message="a replacement child",
    )
    assert first[1] in after  # the other child was left alone
    wait_until(lambda: set(recorded(rq)) == set(ids), 30, message="every job done")
    assert f"child pid={victim} killed by SIGKILL" in supervisor.output
    assert "recovered" in supervisor.output  # by a custodian: the victim held jobs
    assert consumer not in [c for c, _, _ in rq.consumers()]
    supervisor.proc.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output
    assert none_alive(supervisor.seen)


def test_children_dying_at_start_make_it_give_up_with_exit_1(start: Any, rq: BothSides) -> None:
    enqueue(rq, 20, b"poison")  # each kills the child that runs it, at once
    supervisor = start("tests.fault_handlers:record", "--processes", "1", *FAST, command=LAUNCHER)
    watched, cpu = psutil.Process(supervisor.proc.pid), [0.0]

    def ended() -> bool:
        with contextlib.suppress(psutil.NoSuchProcess):
            times = watched.cpu_times()  # still readable while it is a zombie
            cpu[0] = times.user + times.system
        return supervisor.proc.poll() is not None

    wait_until(ended, 40, interval=0.05, message="the supervisor giving up")
    assert supervisor.wait() == 1, supervisor.output
    # Its imports and checks cost a few tenths of a second; a loop spinning through the
    # backoffs would add the seconds they last.
    print(f"supervisor CPU: {cpu[0]:.2f} s")
    assert cpu[0] < 1.5
    output = supervisor.output
    assert output.count("started child") == 5  # then it gave up: no endless loop
    assert output.count("restarting in") == 4
    assert "5 children in a row died within 5 s of their start" in output
    assert none_alive(supervisor.seen)


# -- recycling ----------------------------------------------------------------------------------


def test_max_jobs_per_child_recycles_children_and_runs_each_job_once(
    start: Any, rq: BothSides
) -> None:
    ids = enqueue(rq, 80, b"0.05")
    supervisor = start(
        "tests.handlers:record", "--processes", "2", "--max-jobs-per-child", "10",
        "--concurrency", "5", "--burst",
    )  # fmt: skip
    assert supervisor.wait(45) == 0, supervisor.output  # burst: all children ran out of work
    done = recorded(rq)
    twice = [i for i, n in Counter(done).items() if n > 1]
    # A graceful recycle runs nothing twice and loses nothing.
    assert sorted(done) == sorted(ids), (twice, set(ids) - set(done), supervisor.output)
    lives = supervisor.consumers()
    # ~10 jobs a life (a few more: jobs already running when it noticed): 80 take several.
    assert len(lives) >= 5, supervisor.output
    assert supervisor.output.count("recycled (exit code 155)") >= 3
    assert rq.consumers() == [], supervisor.output


def test_max_memory_per_child_recycles_a_leaking_child(start: Any, rq: BothSides) -> None:
    baseline = _child_rss_mib(start)
    ids = enqueue(rq, 6, b"40")  # 40 MiB kept per job
    supervisor = start(
        "tests.procs_handlers:leak", "--processes", "1", "--concurrency", "1",
        "--max-memory-per-child", str(baseline + 100), *FAST, command=LAUNCHER,
    )  # fmt: skip
    wait_until(lambda: set(recorded(rq)) == set(ids), 30, message="every job done")
    wait_until(lambda: "recycled (exit code 155)" in supervisor.output, 10, message="a recycle")
    assert "recycling: resident memory" in supervisor.output
    assert len(supervisor.consumers()) >= 2  # a new child took the slot
    assert sorted(recorded(rq)) == sorted(ids)  # each job once
    supervisor.proc.send_signal(signal.SIGTERM)
    assert supervisor.wait() == 0, supervisor.output
    assert none_alive(supervisor.seen)


def _child_rss_mib(start: Any) -> int:
    """Resident memory of an idle child, in MiB, to set a limit relative to it."""
    probe = start("tests.procs_handlers:leak", "--processes", "1", command=LAUNCHER)
    [pid] = probe.wait_children(1)
    wait_until(lambda: probe.consumers(), 10, message="the child started")
    rss = psutil.Process(pid).memory_info().rss
    probe.proc.send_signal(signal.SIGTERM)
    assert probe.wait() == 0, probe.output
    return int(rss / 1024 / 1024)


# -- the supervisor's bookkeeping, without processes ------------------------------------------


def test_only_processes_without_a_supervisor_pid_routes_to_the_supervisor() -> None:
    assert supervises(["h:f", "--processes", "2"])
    assert supervises(["h:f", "--processes=2"])
    assert not supervises(["h:f", "--processes", "2", "--supervisor-pid", "7"])  # a child
    assert not supervises(["h:f", "--concurrency", "2"])


def test_restart_backoff_grows_with_young_deaths_and_gives_up_at_the_limit() -> None:
    boss = Supervisor(["h:f"], processes=1, burst=False)
    slot = boss.slots[0]
    delays = []
    for _ in range(MAX_START_FAILURES - 1):
        boss._crashed(slot, ran=0.5)
        assert slot.restart_at is not None and boss.fatal is None
        delays.append(slot.restart_at - time.monotonic())
    # backoff(attempt) lies in [2**attempt / 2, 2**attempt): 0.5-1 s, 1-2 s, 2-4 s, 4-8 s.
    for attempt, delay in enumerate(delays):
        assert 2**attempt / 2 - 0.1 <= delay <= 2**attempt
    boss._crashed(slot, ran=0.5)
    assert boss.fatal == 1 and boss.stopping and slot.restart_at is None
    assert boss.finished()


def test_a_child_that_lived_resets_the_give_up_count_and_one_that_lived_long_the_backoff() -> None:
    boss = Supervisor(["h:f"], processes=1, burst=False)
    slot = boss.slots[0]
    for _ in range(MAX_START_FAILURES - 1):
        boss._crashed(slot, ran=0.5)
    boss._crashed(slot, ran=START_SECONDS + 1)  # it started, then died
    assert slot.young_deaths == 0 and slot.failures == MAX_START_FAILURES
    assert boss.fatal is None
    boss._crashed(slot, ran=STABLE_SECONDS + 1)  # it ran for a while
    assert slot.failures == 1 and slot.restart_at is not None
    assert slot.restart_at - time.monotonic() <= 1.0


@pytest.mark.parametrize(
    "codes, expected",
    [([0, 0], 0), ([0, 155], 0), ([0, 1], 1), ([-9, 0], 1), ([None, 0], 1)],
)
def test_exit_code_is_0_only_when_every_child_stopped_cleanly(
    codes: list[int | None], expected: int
) -> None:
    boss = Supervisor(["h:f"], processes=len(codes), burst=False)
    for slot, code in zip(boss.slots, codes):
        slot.last_code = code
    assert boss.exit_code() == expected


def test_exits_are_described_in_words() -> None:
    assert describe(0) == "exited with code 0"
    assert describe(155) == "recycled (exit code 155)"
    assert describe(-signal.SIGKILL) == "killed by SIGKILL"
