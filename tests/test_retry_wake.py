"""Retries and delayed jobs run at their due time, not at the scheduler's next poll
(issue 32): the scheduler wakes for its own retries, the scheduled set's head, and the
due times producers publish."""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import gevent
import pytest

import gq
from tests.helpers import Backend, RealBackend, RedisServer, wait_until

POLL = 5.0  # the scheduler's poll: every due time below is far sooner


def retry_once(runs: list[float], after: float) -> Any:
    """Records each run of the job "x", which asks for one retry ``after`` s later."""

    def handler(job: gq.Job) -> None:
        if job.data == b"x":
            runs.append(time.time())
            if len(runs) == 1:
                raise gq.Retry(after=after)

    return handler


def enqueue_after_first_pass(backend: Backend, consumer: Any) -> None:
    """A job runs once the scheduler made its first pass and sleeps for the poll."""
    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform(b"warm")
    wait_until(lambda: consumer.stats.done == 1, message="the first job ran")
    producer.perform(b"x")


def test_a_retry_runs_at_its_due_time_not_at_the_next_poll(backend: Backend, start: Any) -> None:
    runs: list[float] = []
    consumer, _ = start(retry_once(runs, 0.2), scheduler_poll_interval=POLL)
    enqueue_after_first_pass(backend, consumer)
    # Without the wake the retry waits for the poll, POLL s after the scheduler's first pass.
    wait_until(lambda: len(runs) == 2, timeout=POLL / 2, message="the retry ran")
    assert 0.2 <= runs[1] - runs[0] + 0.05 < POLL / 2


def test_without_the_wake_a_retry_waits_for_the_poll(backend: Backend, start: Any) -> None:
    """The flag the benchmark compares with: curlyq's behaviour, due jobs moved per poll."""
    runs: list[float] = []
    consumer, _ = start(retry_once(runs, 0.2), scheduler_poll_interval=1.0, scheduler_wake=False)
    enqueue_after_first_pass(backend, consumer)
    wait_until(lambda: len(runs) == 2, timeout=5, message="the retry ran")
    started = runs[0]
    assert runs[1] - started > 0.2  # not before its time, and only at a poll


@pytest.fixture
def real(redis_server: RedisServer) -> Iterator[Backend]:
    """Real Redis only: the producer's due time travels by pubsub, which fakeredis's
    embedded consumers do not listen to (they keep the poll and their own retries)."""
    backend = RealBackend(redis_server)
    try:
        yield backend
    finally:
        backend.close()


@pytest.mark.parametrize("how", ["after", "at"])
def test_a_delayed_enqueue_wakes_the_scheduler(real: Backend, how: str) -> None:
    runs: list[float] = []

    def handler(job: gq.Job) -> None:
        runs.append(time.time())

    consumer = gq.Consumer(real.queue, client=real.client(), scheduler_poll_interval=POLL)
    greenlet = gevent.spawn(consumer.run, handler)
    try:
        _run_delayed(real, runs, how)
    finally:
        consumer.stop()
        greenlet.join(timeout=10)
    assert greenlet.dead


def _run_delayed(real: Backend, runs: list[float], how: str) -> None:
    producer = gq.Producer(real.queue, client=real.client())
    producer.perform(b"warm")  # the scheduler has made its first pass and sleeps
    wait_until(lambda: len(runs) == 1, message="the first job ran")
    channel = f"{real.queue}:scheduled:due"
    direct = real.direct()
    wait_until(lambda: direct.pubsub_numsub(channel)[0][1] >= 1, message="the consumer listens")
    enqueued = time.time()
    if how == "after":
        producer.perform_after(0.3, b"later")
    else:
        producer.perform_at(enqueued + 0.3, b"later")
    wait_until(lambda: len(runs) == 2, timeout=POLL / 2, message="the delayed job ran")
    assert 0.25 < runs[1] - enqueued < POLL / 2


def test_the_wake_is_a_switch() -> None:
    from gq.cli.options import option_flags
    from gq.errors import ConfigurationError

    flag = next(f for f in option_flags() if f.name == "scheduler_wake")
    assert flag.flags == ("--scheduler-wake",)
    assert (flag.parse("off"), flag.parse("on")) == (False, True)
    with pytest.raises(ConfigurationError, match="scheduler_wake must be True or False"):
        gq.ConsumerOptions(scheduler_wake=1)  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["unique", "group"])
def test_a_delayed_unique_or_grouped_task_wakes_the_scheduler(real: Backend, kind: str) -> None:
    """push_unique.lua and push_group.lua announce their due times as schedule.lua does."""
    app = gq.App(client=real.client(), queue=real.queue)
    runs: list[float] = []

    @app.task(unique_for=60 if kind == "unique" else None)
    def note(tenant: str) -> None:
        runs.append(time.time())

    consumer = gq.Consumer(real.queue, client=real.client(), scheduler_poll_interval=POLL)
    greenlet = gevent.spawn(consumer.run, app)
    try:
        note.enqueue("warm")
        wait_until(lambda: len(runs) == 1, message="the first job ran")
        channel = f"{real.queue}:scheduled:due"
        direct = real.direct()
        wait_until(lambda: direct.pubsub_numsub(channel)[0][1] >= 1, message="it listens")
        enqueued = time.time()
        group = "acme" if kind == "group" else None
        note.using(after=0.3, group=group).enqueue("later")
        wait_until(lambda: len(runs) == 2, timeout=POLL / 2, message="the delayed job ran")
        assert 0.25 < runs[1] - enqueued < POLL / 2
    finally:
        consumer.stop()
        greenlet.join(timeout=10)
    assert greenlet.dead


def test_a_head_that_came_due_during_the_pass_gets_a_pass_at_once(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job due between the pass's TIME and the read of the heads is moved by the very
    next pass, not SKEW_RETRY (50 ms) later: with 50 due times a second, a quarter of the
    jobs waited those 50 ms (benchmarks/retry_lateness.py, p99 59 ms against 50). Only a
    head the server still did not move at that next pass is taken for clock skew."""
    from gq.store.jobs import RedisQueue
    from gq.worker import due

    queue = RedisQueue(backend.client(), backend.queue)
    queue.client.zadd(queue.keys.scheduled, {"j1": 1000.0})
    clock = [1000.001]  # this host's clock: j1 came due a millisecond ago
    monkeypatch.setattr(due.time, "time", lambda: clock[0])
    times = due.DueTimes()
    times.read_heads({backend.queue: queue})
    assert times.delay(5.0) == 0.0  # again now: the server's clock has passed it by then
    times.read_heads({backend.queue: queue})  # ... but it did not move j1: skewed clocks
    assert times.delay(5.0) == pytest.approx(due.SKEW_RETRY)
    queue.client.zrem(queue.keys.scheduled, "j1")
    queue.client.zadd(queue.keys.scheduled, {"j2": 1000.0005})  # the next one, due too
    times.read_heads({backend.queue: queue})
    assert times.delay(5.0) == 0.0
