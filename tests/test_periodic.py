"""Periodic jobs (SPEC section 11, issue 13): every occurrence enqueued exactly once over
any number of consumers, decided on the Redis clock, missed ones not replayed (but the
most recent), cron rules across DST changes, and the command line."""

from __future__ import annotations

import json
import logging
import math
import signal
import time
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Callable

import gevent
import pytest
import redis
from fakeredis.commands_mixins import server_mixin

import gq
from gq import job as jobs
from gq.periodic import Periodic, describe
from gq.store.jobs import PeriodicOccurrence
from gq.worker import periodic_runner
from gq.worker.periodic_runner import PeriodicRunner
from tests.cli_support import ADMIN, WORKER, Worker, closed_port_url, env_for, run
from tests.helpers import Backend, FakeBackend, RedisServer, delete_keys, wait_until
from tests.queue_sides import BothSides

UTC = timezone.utc


def utc(*parts: int) -> int:
    return int(datetime(*parts, tzinfo=UTC).timestamp())  # type: ignore[misc]


def occurrence_of(job_id: str) -> int:
    prefix, _, at = job_id.rpartition(":")
    assert prefix.startswith("periodic:"), job_id
    return int(at)


def assert_consecutive(ids: list[str], step: int = 1) -> list[int]:
    """Each id once, and no occurrence missing between the first and the last."""
    assert len(set(ids)) == len(ids), f"an occurrence ran twice: {ids}"
    times = sorted(occurrence_of(i) for i in ids)
    assert times == list(range(times[0], times[-1] + step, step)), f"one was skipped: {times}"
    return times


def queued(backend: Backend) -> list[str]:
    """The ids waiting in the queue, in order."""
    return [i.decode() for i in backend.direct().lrange(f"{backend.queue}:active", 0, -1)]


# ============================================================================ Periodic


@pytest.mark.parametrize(
    "kwargs, reason",
    [
        ({}, "exactly one of cron= and every="),
        ({"cron": "* * * * *", "every": 5}, "exactly one of cron= and every="),
        ({"cron": "61 3 * * *"}, "bad cron rule '61 3 \\* \\* \\*': Bad minute"),
        ({"cron": "0 3 * *"}, "bad cron rule"),
        ({"cron": "0 3 * * *", "tz": "Mars/Olympus"}, "unknown time zone 'Mars/Olympus'"),
        ({"cron": "0 3 30 2 *"}, "Bad day-of-month"),  # February 30th
        ({"every": 0}, "whole number of seconds >= 1"),
        ({"every": -5}, "whole number of seconds >= 1"),
        ({"every": 1.5}, "whole number of seconds >= 1"),
        ({"every": True}, "seconds or a timedelta"),
        ({"every": "30"}, "seconds or a timedelta"),
        ({"every": 30, "tz": "Europe/Paris"}, "tz applies to cron rules only"),
        ({"every": 30, "data": "text"}, "data must be bytes"),
    ],
)
def test_a_bad_schedule_is_a_configuration_error_with_the_reason(
    kwargs: dict[str, Any], reason: str
) -> None:
    with pytest.raises(gq.ConfigurationError, match=reason):
        Periodic("job", **kwargs)


@pytest.mark.parametrize("name", ["", "two words", "tab\tname", "x" * 201, 42])
def test_a_schedule_name_must_be_printable_without_spaces(name: Any) -> None:
    with pytest.raises(gq.ConfigurationError, match="Periodic name"):
        Periodic(name, every=5)


def test_every_takes_seconds_or_a_timedelta_counted_from_the_epoch() -> None:
    schedule = Periodic("tick", every=timedelta(minutes=1))
    assert schedule.period == 60 and schedule.every == 60
    assert schedule.latest(1_800_000_059.9) == 1_800_000_000
    assert schedule.latest(1_800_000_060) == 1_800_000_060  # at its instant, it is due
    assert schedule.next_after(1_800_000_060) == 1_800_000_120
    assert schedule.job_id(1_800_000_060) == "periodic:tick:1800000060"


def test_cron_occurrences_are_whole_minutes_in_the_rule_time_zone() -> None:
    schedule = Periodic("report", cron="0  3 * * *", tz="America/New_York")
    assert schedule.cron == "0 3 * * *"
    # 2026-07-01 03:00 EDT is 07:00 UTC.
    assert schedule.next_after(utc(2026, 7, 1, 6, 0)) == utc(2026, 7, 1, 7, 0)
    assert schedule.latest(utc(2026, 7, 1, 7, 0)) == utc(2026, 7, 1, 7, 0)
    assert schedule.latest(utc(2026, 7, 1, 7, 0, 30)) == utc(2026, 7, 1, 7, 0)
    assert schedule.latest(utc(2026, 7, 1, 6, 59, 59)) == utc(2026, 6, 30, 7, 0)


def test_a_cron_time_skipped_by_the_spring_change_in_paris_runs_once_just_after_it() -> None:
    # 2026-03-29: 02:00 CET becomes 03:00 CEST (01:00 UTC); 02:30 does not exist that day.
    schedule = Periodic("night", cron="30 2 * * *", tz="Europe/Paris")
    day_before = utc(2026, 3, 28, 1, 30)  # 02:30 CET
    assert schedule.next_after(day_before) == utc(2026, 3, 29, 1, 0)  # 03:00 CEST
    assert schedule.next_after(utc(2026, 3, 29, 1, 0)) == utc(2026, 3, 30, 0, 30)
    assert schedule.latest(utc(2026, 3, 29, 1, 59)) == utc(2026, 3, 29, 1, 0)


def test_a_cron_time_repeated_by_the_fall_change_in_paris_runs_once() -> None:
    # 2026-10-25: 03:00 CEST becomes 02:00 CET; 02:30 happens at 00:30 and 01:30 UTC.
    schedule = Periodic("night", cron="30 2 * * *", tz="Europe/Paris")
    assert schedule.next_after(utc(2026, 10, 24, 12, 0)) == utc(2026, 10, 25, 0, 30)
    assert schedule.next_after(utc(2026, 10, 25, 0, 30)) == utc(2026, 10, 26, 1, 30)
    # An hourly rule keeps both 02:00s: they are different instants.
    hourly = Periodic("hourly", cron="0 * * * *", tz="Europe/Paris")
    assert hourly.next_after(utc(2026, 10, 24, 23, 30)) == utc(2026, 10, 25, 0, 0)
    assert hourly.next_after(utc(2026, 10, 25, 0, 0)) == utc(2026, 10, 25, 1, 0)


def test_the_consumer_checks_its_schedule(backend: Backend) -> None:
    client = backend.client()
    with pytest.raises(gq.ConfigurationError, match="list of gq.Periodic"):
        gq.Consumer(backend.queue, client=client, periodic=Periodic("a", every=1))
    with pytest.raises(gq.ConfigurationError, match="list of gq.Periodic"):
        gq.Consumer(backend.queue, client=client, periodic=["0 3 * * *"])
    with pytest.raises(gq.ConfigurationError, match="two periodic schedules are named 'a'"):
        gq.Consumer(
            backend.queue,
            client=client,
            periodic=[Periodic("a", every=1), Periodic("a", cron="* * * * *")],
        )


# ============================================================================ the script


def occurrence(name: str, at: int, following: int, rule: str = "every\t3600\tUTC") -> Any:
    job_id = f"periodic:{name}:{at}"
    message = jobs.encode(jobs.Job(job_id, b"data"), ready_at=at)
    return PeriodicOccurrence(name, at, following, job_id, message, rule, 10.0)


def test_the_script_returns_what_its_header_says(backend: Backend) -> None:
    rq = BothSides(backend.client(), backend.queue)
    direct = backend.direct()
    now = math.floor(rq.server_time())

    early = rq.enqueue_periodic(occurrence("a", now + 60, now + 120))
    assert (early.outcome, early.cursor) == ("early", None)
    assert abs(early.server_now - now) < 5
    # A new schedule whose latest occurrence is long past starts from now: no catch-up.
    skipped = rq.enqueue_periodic(occurrence("a", now - 3000, now + 600))
    assert (skipped.outcome, skipped.cursor) == ("skipped", now - 3000)
    assert direct.llen(rq.keys.active) == 0
    stale = rq.enqueue_periodic(occurrence("a", now - 2000, now - 1000))
    assert (stale.outcome, stale.cursor) == ("stale", now - 3000)
    done = rq.enqueue_periodic(occurrence("a", now - 3000, now + 600))
    assert (done.outcome, done.cursor) == ("done", now - 3000)
    # The most recent occurrence of a known schedule runs, even late (the one catch-up).
    caught_up = rq.enqueue_periodic(occurrence("a", now - 1000, now + 600))
    assert (caught_up.outcome, caught_up.cursor) == ("enqueued", now - 1000)
    assert direct.lrange(rq.keys.active, 0, -1) == [f"periodic:a:{now - 1000}".encode()]
    assert direct.lrange(rq.keys.signal, 0, -1) == [b"1"]
    assert jobs.decode(direct.hget(rq.keys.data, f"periodic:a:{now - 1000}")).data == b"data"
    direct.hset(rq.keys.data, f"periodic:a:{now}", b"still queued")
    duplicate = rq.enqueue_periodic(occurrence("a", now, now + 600))
    assert (duplicate.outcome, duplicate.cursor) == ("duplicate", now)
    assert direct.llen(rq.keys.active) == 1
    assert rq.periodic_state() == {"a": ("every\t3600\tUTC", now, now)}


def test_a_changed_rule_starts_from_now_without_catching_up(backend: Backend) -> None:
    rq = BothSides(backend.client(), backend.queue)
    now = math.floor(rq.server_time())
    assert rq.enqueue_periodic(occurrence("a", now - 5000, now + 600)).outcome == "skipped"
    edited = occurrence("a", now - 1000, now + 600, rule="every\t1800\tUTC")
    assert rq.enqueue_periodic(edited).outcome == "skipped"  # the same rule would catch up
    on_time = occurrence("a", now - 2, now + 600, rule="every\t60\tUTC")
    assert rq.enqueue_periodic(on_time).outcome == "enqueued"  # on time: no catch-up needed


def test_the_script_refuses_a_key_of_the_wrong_type_before_writing(backend: Backend) -> None:
    rq = BothSides(backend.client(), backend.queue)
    direct = backend.direct()
    direct.set(rq.keys.active, b"not a list")
    now = math.floor(rq.server_time())
    with pytest.raises(redis.ResponseError, match="GQWRONGTYPE"):
        rq.enqueue_periodic(occurrence("a", now, now + 600))
    assert rq.periodic_state() == {}  # the cursor did not move: nothing was written
    assert not direct.exists(rq.keys.data)


def test_an_occurrence_acknowledged_before_a_slower_consumer_looks_is_not_enqueued_again(
    backend: Backend,
) -> None:
    fast = BothSides(backend.client(), backend.queue)
    slow = BothSides(backend.client(), backend.queue)
    now = math.floor(fast.server_time())
    nightly = occurrence("nightly", now, now + 86400)
    assert fast.enqueue_periodic(nightly).outcome == "enqueued"
    fast.register("c1")
    assert [job_id for job_id, _ in fast.fetch("c1", 10)] == [nightly.job_id]
    assert fast.ack("c1", [nightly.job_id]) == [True]
    # The id is free again: a check of the id alone (arq #196) would enqueue it twice.
    assert not backend.direct().hexists(fast.keys.data, nightly.job_id)
    assert slow.enqueue_periodic(nightly).outcome == "done"
    assert backend.direct().llen(fast.keys.active) == 0


# ============================================================================ consumers


def start(consumers: list[gq.Consumer], handler: Callable[[gq.Job], None]) -> list[Any]:
    return [gevent.spawn(consumer.run, handler) for consumer in consumers]


def stop(consumers: list[gq.Consumer], greenlets: list[Any]) -> None:
    for consumer in consumers:
        consumer.stop()
    for greenlet in greenlets:
        assert greenlet.get(timeout=15) is None  # raises what run raised


def every_second() -> list[Periodic]:
    return [Periodic("tick", every=1, data=b"tock")]


@pytest.mark.timeout(40)
def test_three_consumers_enqueue_every_occurrence_exactly_once(backend: Backend) -> None:
    ran: list[str] = []

    def handle(job: gq.Job) -> None:
        assert job.data == b"tock"
        ran.append(job.id)

    consumers = [
        gq.Consumer(backend.queue, client=backend.client(), periodic=every_second())
        for _ in range(3)
    ]
    greenlets = start(consumers, handle)
    wait_until(lambda: len(ran) >= 5, 20, message="five occurrences")
    stop(consumers, greenlets)
    enqueued = ran + queued(backend)  # one may be enqueued after the pollers stopped
    times = assert_consecutive(enqueued)
    runners = [c._periodic for c in consumers if c._periodic]
    assert sum(r.enqueued for r in runners) == len(enqueued)
    # Every consumer proposed the occurrences: most proposals lost to another's.
    assert sum(r.proposed for r in runners) >= 2 * len(ran)
    assert BothSides(backend.direct(), backend.queue).periodic_state()["tick"][1] == times[-1]


@pytest.fixture
def skewed_clock(backend: Backend, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's wall clock runs 5 minutes ahead; the Redis server's does not."""
    real = time.time
    if backend.kind == "fake":  # the embedded server reads time.time: give it the real one
        monkeypatch.setattr(server_mixin, "time", SimpleNamespace(time=real))
    monkeypatch.setattr(time, "time", lambda: real() + 300.0)


@pytest.mark.timeout(40)
def test_a_consumer_whose_clock_is_five_minutes_ahead_does_not_fire_early(
    backend: Backend, skewed_clock: None
) -> None:
    direct = backend.direct()
    runs: list[tuple[int, float]] = []

    def handle(job: gq.Job) -> None:
        seconds, micros = direct.time()  # the server's clock, when the job runs
        runs.append((occurrence_of(job.id), seconds + micros / 1e6))

    consumer = gq.Consumer(backend.queue, client=backend.client(), periodic=every_second())
    greenlets = start([consumer], handle)
    # A consumer deciding on its own clock would propose occurrences 300 s ahead: the
    # script refuses them ("early") and nothing would run here for five minutes.
    wait_until(lambda: len(runs) >= 3, 20, message="three occurrences")
    stop([consumer], greenlets)
    assert_consecutive([f"periodic:tick:{at}" for at, _ in runs])
    for at, ran_at in runs:
        assert at <= ran_at < at + 5, (at, ran_at)


@pytest.mark.timeout(60)
def test_occurrences_missed_while_no_consumer_ran_are_not_replayed_but_the_latest(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(periodic_runner, "LATE_LIMIT", 1.0)  # "missed" after 1 s, not 10
    rq = BothSides(backend.direct(), backend.queue)
    ran: list[str] = []
    first = [gq.Consumer(backend.queue, client=backend.client(), periodic=every_second())]
    greenlets = start(first, lambda job: ran.append(job.id))
    wait_until(lambda: len(ran) >= 2, 20)
    stop(first, greenlets)
    leftover = queued(backend)  # enqueued after the poller stopped: runs after the restart
    before = assert_consecutive(ran + leftover)
    down_until = rq.server_time() + 4
    wait_until(lambda: rq.server_time() >= down_until, 10, message="4 s with no consumer")
    restart = rq.server_time()
    ran.clear()
    second = [gq.Consumer(backend.queue, client=backend.client(), periodic=every_second())]
    greenlets = start(second, lambda job: ran.append(job.id))
    wait_until(lambda: len(ran) >= 2, 20)
    stop(second, greenlets)
    after = assert_consecutive([i for i in ran if i not in leftover])
    assert after[0] >= math.floor(restart)  # the most recent one, not the first missed
    assert after[0] - before[-1] >= 4  # the ones in between never ran


class FakeClock:
    """The embedded server's clock and the runner's monotonic clock, moved by the test."""

    def __init__(self, now: float) -> None:
        self.now = now

    def time(self) -> float:
        return self.now

    __call__ = time


@pytest.fixture
def fake_clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[FakeClock, FakeBackend]]:
    """Only the embedded server's clock can be set: these tests run on fakeredis alone."""
    clock = FakeClock(0.0)
    monkeypatch.setattr(server_mixin, "time", clock)
    backend = FakeBackend()
    yield clock, backend
    backend.close()


def test_a_cron_rule_fires_once_at_the_right_instant_across_the_dst_change_in_paris(
    fake_clock: tuple[FakeClock, FakeBackend],
) -> None:
    clock, backend = fake_clock
    rule = [Periodic("night", cron="30 2 * * *", tz="Europe/Paris")]
    runners = [
        PeriodicRunner(BothSides(backend.client(), backend.queue), rule, "test", clock=clock)
        for _ in range(2)
    ]
    expected = []
    for moment, fires in [
        (utc(2026, 3, 28, 23, 0), False),  # new: the 28th's 02:30 is not caught up
        (utc(2026, 3, 29, 0, 59, 59), False),
        (utc(2026, 3, 29, 1, 0), True),  # 03:00 CEST: just after the skipped 02:30
        (utc(2026, 3, 29, 1, 0, 30), False),
        (utc(2026, 3, 29, 1, 30), False),  # 03:30 CEST: no second run
        (utc(2026, 3, 30, 0, 29, 59), False),
        (utc(2026, 3, 30, 0, 30), True),  # 02:30 CEST
        (utc(2026, 10, 25, 0, 30), True),  # 02:30 CEST, the first of two 02:30s
        (utc(2026, 10, 25, 1, 30), False),  # 02:30 CET, the second: not again
        (utc(2026, 10, 26, 1, 30), True),  # 02:30 CET
    ]:
        clock.now = moment
        for runner in runners:
            runner.step()
        if fires:
            expected.append(f"periodic:night:{moment}")
        assert queued(backend) == expected, datetime.fromtimestamp(moment, UTC)
        # Each runner sleeps until the next occurrence, as measured on the server's clock.
        assert all(r.delay(3600) <= 3600 for r in runners)


def test_after_an_outage_only_the_most_recent_missed_occurrence_runs_once(
    fake_clock: tuple[FakeClock, FakeBackend], caplog: pytest.LogCaptureFixture
) -> None:
    clock, backend = fake_clock
    schedule = [Periodic("minutely", every=60)]
    runners = [
        PeriodicRunner(BothSides(backend.client(), backend.queue), schedule, "t", clock=clock)
        for _ in range(3)
    ]
    start_at = 1_800_000_000
    clock.now = start_at + 1.5
    for runner in runners:
        runner.step()
    assert queued(backend) == [f"periodic:minutely:{start_at}"]
    clock.now = start_at + 600 + 7  # every consumer was down for ten minutes
    with caplog.at_level(logging.WARNING, logger="gq.periodic"):
        for runner in runners:
            runner.step()
    assert queued(backend) == [f"periodic:minutely:{t}" for t in (start_at, start_at + 600)]
    assert "only the most recent" in caplog.text
    clock.now = start_at + 660
    for runner in runners:
        runner.step()
    assert queued(backend)[-1] == f"periodic:minutely:{start_at + 660}"
    assert len(queued(backend)) == 3


def test_a_consumer_that_restarts_quickly_enqueues_the_occurrences_it_was_away_for(
    fake_clock: tuple[FakeClock, FakeBackend],
) -> None:
    clock, backend = fake_clock
    rq = BothSides(backend.client(), backend.queue)
    clock.now = 1_800_000_000.1
    PeriodicRunner(rq, every_second(), "before", clock=clock).step()
    clock.now += 3.5  # restarted 3.5 s later: three occurrences late, within the limit
    PeriodicRunner(rq, every_second(), "after", clock=clock).step()
    assert queued(backend) == [f"periodic:tick:{1_800_000_000 + i}" for i in range(4)]


def test_a_consumer_whose_view_is_behind_neither_repeats_nor_reports_a_miss(
    fake_clock: tuple[FakeClock, FakeBackend], caplog: pytest.LogCaptureFixture
) -> None:
    clock, backend = fake_clock
    rq = BothSides(backend.client(), backend.queue)
    slow = PeriodicRunner(rq, every_second(), "slow", clock=clock)
    fast = PeriodicRunner(rq, every_second(), "fast", clock=clock)
    clock.now = 1_800_000_000.1
    slow.step()
    for _ in range(30):  # the slow consumer is blocked while the fast one runs them all
        clock.now += 1
        fast.step()
    with caplog.at_level(logging.WARNING, logger="gq.periodic"):
        slow.step()  # its cursor is 30 s old: it learns the true one from the script
    assert_consecutive(queued(backend))
    assert len(queued(backend)) == 31
    assert "missed" not in caplog.text


def test_the_runner_sleeps_until_the_next_occurrence(
    fake_clock: tuple[FakeClock, FakeBackend],
) -> None:
    clock, backend = fake_clock
    clock.now = 1_800_000_000.25
    runner = PeriodicRunner(
        BothSides(backend.client(), backend.queue), every_second(), "t", clock=clock
    )
    runner.step()
    assert queued(backend) == ["periodic:tick:1800000000"]
    assert 0.75 <= runner.delay(5.0) <= 0.76  # woken for 1800000001, not after 5 s
    assert runner.delay(0.5) == 0.5  # never longer than the scheduler's interval


# ============================================================================ command line


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_periodic_{time.time_ns()}"
    yield name
    delete_keys(redis_server.client(), f"{name}*")


@pytest.mark.parametrize(
    "spec, reason",
    [
        ("tests.periodic_bad_rule:SCHEDULE", "bad cron rule '61 3 * * *': Bad minute"),
        ("tests.periodic_schedules:NOT_A_LIST", "must be a list of gq.Periodic"),
        ("tests.periodic_schedules:TWO_NAMED_ALIKE", "two periodic schedules are named 'tick'"),
        ("tests.periodic_schedules:MISSING", "has no 'MISSING'"),
        ("tests.no_such_module:SCHEDULE", "cannot import 'tests.no_such_module'"),
        ("tests.periodic_schedules", "must be package.module:name"),
    ],
)
def test_a_bad_periodic_flag_is_a_usage_error_from_gq_worker(spec: str, reason: str) -> None:
    result = run(
        WORKER, "tests.handlers:record", "--periodic", spec, env=env_for(closed_port_url(), "q")
    )
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and reason in lines[0], result.stderr


@pytest.mark.slow
@pytest.mark.timeout(90)
def test_three_worker_processes_enqueue_every_occurrence_exactly_once(
    redis_server: RedisServer, queue: str, tmp_path: Path
) -> None:
    env = env_for(redis_server.url, queue, handler_url=redis_server.url)
    args = ("tests.handlers:record", "--periodic", "tests.periodic_schedules:EVERY_SECOND")
    workers = [Worker(tmp_path, *args, env=env) for _ in range(3)]
    client = redis_server.client()
    done = f"{queue}:test:done"
    try:
        for worker in workers:
            worker.wait_for_output("starting")
        first = client.llen(done)
        wait_until(lambda: client.llen(done) >= first + 5, 30, message="five occurrences")
    finally:
        for worker in workers:
            worker.signal(signal.SIGTERM)
        codes = [worker.wait(30) for worker in workers]
        for worker in workers:
            worker.stop()
    assert codes == [0, 0, 0], [w.output for w in workers]
    ids = [i.decode() for i in client.lrange(done, 0, -1)]
    ids += [i.decode() for i in client.lrange(f"{queue}:active", 0, -1)]  # after the pollers
    assert_consecutive(ids)
    enqueued = sum(w.output.count("periodic tick: enqueued job") for w in workers)
    assert enqueued == len(ids)


def test_gq_periodic_list_shows_rule_time_zone_last_and_next(
    redis_server: RedisServer, queue: str
) -> None:
    rq = BothSides(redis_server.client(), queue)
    nightly = Periodic("nightly", cron="0 3 * * *", tz="Europe/Paris")
    now = math.floor(rq.server_time())
    last = nightly.latest(now)
    assert last is not None
    rq.enqueue_periodic(
        PeriodicOccurrence("nightly", last, nightly.next_after(last), "x", b"m", nightly.rule, 1e9)
    )
    env = env_for(redis_server.url, queue)
    text = run(ADMIN, "periodic", "list", env=env)
    assert text.returncode == 0, text.stderr
    header, row = text.stdout.splitlines()
    assert header.split()[:4] == ["NAME", "RULE", "TZ", "LAST"]
    assert row.startswith("nightly") and "0 3 * * *" in row and "Europe/Paris" in row
    listed = run(ADMIN, "periodic", "list", "--json", env=env)
    assert [json.loads(line) for line in listed.stdout.splitlines()] == [
        {
            "name": "nightly",
            "kind": "cron",
            "rule": "0 3 * * *",
            "tz": "Europe/Paris",
            "last": last,
            "next": nightly.next_after(now),
            "source": "code",  # (given in code, not added at runtime: gq periodic add)
        }
    ]
    assert describe(rq)[0].next == nightly.next_after(now)
    deleted = run(ADMIN, "periodic", "delete", "nightly", "nope", env=env)
    assert deleted.returncode == 1
    assert deleted.stdout.splitlines() == ["nightly: forgotten", "nope: not found"]
    empty = run(ADMIN, "periodic", "list", env=env)
    assert empty.stdout.strip() == f"no periodic schedules on queue {queue}"


@pytest.mark.timeout(60)
def test_an_acl_user_limited_to_the_queue_runs_periodic_jobs_and_lists_them(
    redis_server: RedisServer,
) -> None:
    from tests.test_tls_acl import acl_rule  # the rule docs/deployment.md gives

    queue = "{" + f"acl-periodic-{time.time_ns()}" + "}"
    user = f"gq-periodic-{time.time_ns()}"
    admin = redis_server.client()
    admin.execute_command("ACL", "SETUSER", user, *acl_rule(queue, "s3cret"))
    url = f"redis://{user}:s3cret@{redis_server.host}:{redis_server.port}/{redis_server.db}"
    ran: list[str] = []
    consumer = gq.Consumer(queue, url=url, periodic=every_second())
    try:
        greenlets = start([consumer], lambda job: ran.append(job.id))
        wait_until(lambda: len(ran) >= 2, 20, message="two occurrences")
        stop([consumer], greenlets)
        assert_consecutive(ran)
        listed = run(ADMIN, "periodic", "list", "--json", env=env_for(url, queue))
        assert listed.returncode == 0, listed.stderr
        assert json.loads(listed.stdout)["name"] == "tick"
    finally:
        admin.execute_command("ACL", "DELUSER", user)
        delete_keys(admin, f"{queue}*")
        admin.close()
