"""Reliability round 3 (issue 19, section 2): the worker core's defects, each with the
test that failed before its fix; on fakeredis and a real Redis, and with gq-worker
processes where a process is involved."""

from __future__ import annotations

import gc
import time
import warnings
from typing import Any

import gevent
import pytest
from gevent.event import Event

import gq
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests.helpers import Backend, wait_until


def _fill(backend: Backend, ids: list[str], queue: str | None = None) -> None:
    producer = gq.Producer(queue or backend.queue, client=backend.client())
    producer.perform_many([gq.Job(id=i) for i in ids])


# -- defect 1: gevent.GreenletExit raised by a handler ---------------------------------------


@pytest.mark.timeout(60)
def test_a_handler_raising_greenlet_exit_fails_its_attempt_and_the_next_job_runs(
    backend: Backend, start: Any
) -> None:
    ran: list[tuple[str, int]] = []

    def handler(job: gq.Job) -> None:
        ran.append((job.id, job.attempt))
        if job.id == "g0":
            raise gevent.GreenletExit  # a library killing "the current greenlet"

    _fill(backend, ["g0", "g1"])
    consumer, runner = start(handler, processor_concurrency=1)
    wait_until(lambda: consumer.stats.done == 1 and consumer.stats.retried == 1, 10)
    assert ("g1", 0) in ran and not runner.dead
    scheduled = backend.direct().zrange(QueueKeys(backend.queue).scheduled, 0, -1)
    assert scheduled == [b"g0"]  # a failed attempt, retried: not left in flight


@pytest.mark.timeout(60)
def test_a_handler_worker_killed_between_jobs_is_replaced(backend: Backend, start: Any) -> None:
    done: list[str] = []
    consumer, _ = start(lambda job: done.append(job.id), processor_concurrency=1)
    _fill(backend, ["a"])
    wait_until(lambda: done == ["a"], 10)
    consumer._processor.workers[0].kill()  # idle, waiting on the buffer
    _fill(backend, ["b"])
    wait_until(lambda: done == ["a", "b"], 10)


# -- defect 3: a cancel on one queue of a multi-queue consumer -------------------------------


@pytest.mark.timeout(60)
def test_a_cancel_on_one_queue_leaves_the_same_id_on_another_queue_alone(
    backend: Backend,
) -> None:
    first, second = f"{backend.queue}_a", f"{backend.queue}_b"
    for name in (first, second):
        _fill(backend, ["same"], name)
    began: list[str] = []
    interrupted: list[str] = []
    release = Event()

    def handler(job: gq.Job) -> None:
        began.append(job.queue)
        try:
            release.wait()
        except gq.JobCancelled:
            interrupted.append(job.queue)
            raise

    consumer = gq.Consumer([first, second], client=backend.client(), processor_concurrency=2,
                           poller_poll_duration=1)  # fmt: skip
    runner = gevent.spawn(consumer.run, handler)
    try:
        wait_until(lambda: len(began) == 2, 10)
        assert gq.Queue(second, client=backend.client()).cancel("same") == 1
        wait_until(lambda: consumer.stats.cancelled == 1, 5)
        release.set()
        wait_until(lambda: consumer.stats.done == 1, 5)
        assert interrupted == [second]
    finally:
        consumer.stop()
        runner.join(10)
    assert runner.dead and runner.exception is None


# -- defect 5: cancel requests beyond the 1,000 oldest ---------------------------------------


@pytest.mark.timeout(60)
def test_a_cancel_is_seen_behind_more_than_a_thousand_older_requests(
    backend: Backend, start: Any
) -> None:
    keys = QueueKeys(backend.queue)
    # Older requests that linger (for up to an hour: jobs another consumer, curlyq's say,
    # never acts on), all older than the new one.
    now = time.time()
    backend.direct().zadd(keys.cancelled, {f"old{i}": now - 1000 + i / 10 for i in range(1500)})
    began, interrupted = Event(), Event()

    def handler(job: gq.Job) -> None:
        began.set()
        try:
            gevent.sleep(60)
        except gq.JobCancelled:
            interrupted.set()
            raise

    _fill(backend, ["new"])
    consumer, _ = start(handler)
    assert began.wait(10)
    assert gq.Queue(backend.queue, client=backend.client()).cancel("new") == 1
    assert interrupted.wait(5)
    wait_until(lambda: consumer.stats.cancelled == 1, 5)


# -- defect 6: JobCancelled thrown once per job ----------------------------------------------


@pytest.mark.timeout(60)
def test_job_cancelled_is_thrown_once_so_a_handlers_clean_up_completes(
    backend: Backend, start: Any
) -> None:
    began, cleaned = Event(), Event()
    thrown: list[float] = []

    def handler(job: gq.Job) -> None:
        began.set()
        try:
            gevent.sleep(60)
        except gq.JobCancelled:
            thrown.append(time.monotonic())
            try:
                gevent.sleep(1.6)  # a clean-up longer than three cancel polls
            except gq.JobCancelled:
                thrown.append(time.monotonic())
                raise
            cleaned.set()
            raise

    _fill(backend, ["c"])
    consumer, _ = start(handler)
    assert began.wait(10)
    assert gq.Queue(backend.queue, client=backend.client()).cancel("c") == 1
    assert cleaned.wait(10), f"the clean-up was interrupted: {thrown}"
    wait_until(lambda: consumer.stats.cancelled == 1, 5)
    assert len(thrown) == 1


# -- defect 12: Redis lost its data ----------------------------------------------------------


@pytest.mark.timeout(60)
def test_after_redis_lost_its_data_a_new_job_runs_without_waiting_for_the_heartbeat(
    backend: Backend, start: Any
) -> None:
    done: list[str] = []
    consumer, runner = start(lambda job: done.append(job.id), heartbeat_poll_interval=30)
    _fill(backend, ["before"])
    wait_until(lambda: done == ["before"], 10)
    keys = QueueKeys(backend.queue)
    wait_until(lambda: not backend.direct().hexists(keys.data, "before"), 10)  # acknowledged
    backend.direct().flushdb()  # a restart without persistence, an empty replica
    pushed = time.monotonic()
    _fill(backend, ["after"])
    wait_until(lambda: done == ["before", "after"], 10)
    # Registered again and fetched at once: not at the next heartbeat, 30 s away.
    assert time.monotonic() - pushed < 3.0
    assert not runner.dead


# -- defect 15: async def handlers -----------------------------------------------------------


async def _async_handler(job: gq.Job) -> None:
    pass


class _AsyncCallable:
    async def __call__(self, job: gq.Job) -> None:
        pass


@pytest.mark.parametrize("handler", [_async_handler, _AsyncCallable()], ids=["def", "object"])
def test_an_async_def_handler_is_refused_at_start(backend: Backend, handler: Any) -> None:
    consumer = gq.Consumer(backend.queue, client=backend.client())
    with pytest.raises(gq.ConfigurationError, match="async def"):
        consumer.run(handler)
    assert backend.direct().zcard(QueueKeys(backend.queue).consumers) == 0  # never started


@pytest.mark.timeout(60)
def test_a_job_whose_handler_returned_an_awaitable_fails_and_is_never_acknowledged(
    backend: Backend, start: Any
) -> None:
    _fill(backend, ["aw"])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        consumer, _ = start(lambda job: _async_handler(job))
        wait_until(lambda: consumer.stats.retried == 1, 10)
        gc.collect()
    assert consumer.stats.done == 0
    scheduled = backend.direct().zrange(QueueKeys(backend.queue).scheduled, 0, -1)
    assert scheduled == [b"aw"]  # a failure, retried as any
    assert not [w for w in caught if issubclass(w.category, RuntimeWarning)]  # closed


# -- unknown option names --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("given", "meant"),
    [
        ("concurrency", "processor_concurrency"),
        ("grace_period", "shutdown_grace_period"),
        ("poller_poll_durtion", "poller_poll_duration"),
    ],  # fmt: skip
)
def test_an_unknown_option_names_the_one_meant(backend: Backend, given: str, meant: str) -> None:
    with pytest.raises(gq.ConfigurationError, match=f"{given} \\(did you mean {meant}\\?\\)"):
        gq.Consumer(backend.queue, client=backend.client(), **{given: 3})


# -- room freed by another consumer under a concurrency limit --------------------------------


@pytest.mark.timeout(60)
def test_room_freed_by_another_consumer_wakes_a_consumer_waiting_at_the_limit(
    backend: Backend,
) -> None:
    gq.Queue(backend.queue, client=backend.client()).set_limits(concurrency=2)
    other = RedisQueue(backend.direct(), backend.queue)  # another consumer, driven by hand
    other.register("other")
    _fill(backend, ["x"])
    assert [job_id for job_id, _ in other.fetch("other", 1)] == ["x"]
    _fill(backend, ["long", "next"])
    release = Event()
    started: dict[str, float] = {}

    def handler(job: gq.Job) -> None:
        started[job.id] = time.monotonic()
        if job.id == "long":
            release.wait()

    # A long poll: what the poller waits at most when nothing wakes it.
    consumer = gq.Consumer(backend.queue, client=backend.client(), poller_poll_duration=20)
    runner = gevent.spawn(consumer.run, handler)
    try:
        wait_until(lambda: "long" in started, 10)  # and the limit is reached: "next" waits
        assert consumer._poller is not None
        wait_until(lambda: consumer._poller._sources[0].full, 5)
        freed = time.monotonic()
        assert other.ack("other", ["x"]) == [True]  # room made elsewhere: the signal rises
        wait_until(lambda: "next" in started, 10)
        assert started["next"] - freed < 2.0  # woken, not at the end of the 20 s poll
    finally:
        release.set()
        consumer.stop()
        runner.join(10)
    assert runner.dead and runner.exception is None
