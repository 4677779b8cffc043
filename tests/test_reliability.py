"""Reliability, round 2 (issue #9, SPEC section 6 "Added after the first release"): the
recovery rule, handlers that never yield, wrong key types, refusals that are not re-sent,
the bounded stop, and the custodian's tidying. Real processes are in tests/test_faults.py."""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent
import pytest
import redis
from gevent.event import Event

import gq
from gq import job as jobs
from gq.store.keys import QueueKeys
from gq.worker.acker import persist
from gq.worker.loops import ThreadHeartbeat
from tests import queue_state as state
from tests.helpers import Backend, stays_true, wait_until
from tests.queue_sides import BothSides

# -- the recovery rule ---------------------------------------------------------------------


def _crash(q: BothSides, consumer: str, ids: list[str], *, max_recoveries: int) -> int:
    """``consumer`` held ``ids`` and died; another consumer's custodian recovers them."""
    c = q.client
    c.sadd(q.keys.inflight(consumer), *ids)
    c.zadd(q.keys.consumers, {q.keys.inflight(consumer): 0})
    return q.recover("rescuer", q.expired_consumers(10, 10), timeout=10, max_jobs=100,
                     max_recoveries=max_recoveries, dead_max_jobs=100,
                     dead_max_age=1e6)  # fmt: skip


def test_only_a_job_that_crashed_alone_is_charged_past_the_limit(backend: Backend) -> None:
    q = BothSides(backend.client(), backend.queue)
    c = backend.direct()
    ids = ["poison", "n1", "n2"]
    q.push([(i, jobs.encode(gq.Job(id=i))) for i in ids])
    c.delete(q.keys.active)  # as if fetched
    # max_recoveries=1: the second crash takes every count past it, but all three were in
    # flight together, so none is dead: they come back as suspects that run alone.
    assert _crash(q, "w1", ids, max_recoveries=1) == 3
    c.delete(q.keys.active)
    assert _crash(q, "w2", ids, max_recoveries=1) == 3
    assert state.dead(c, backend.queue) == {}
    assert sorted(state.active(c, backend.queue)) == sorted(ids)
    assert {k.decode(): int(v) for k, v in c.hgetall(q.keys.recovered).items()} == dict.fromkeys(
        ids, 2
    )
    q.register("w3")
    alone = q.fetch("w3", 10)
    assert len(alone) == 1 and alone.suspect  # a suspect comes alone
    # It crashes alone: now it is surely the culprit, and it goes to dead.
    c.delete(q.keys.inflight("w3"))
    c.zrem(q.keys.consumers, q.keys.inflight("w3"))
    assert _crash(q, "w3", [alone[0][0]], max_recoveries=1) == 1
    assert list(state.dead(c, backend.queue)) == [alone[0][0]]
    assert "recovered 1 times" in jobs.decode_error(state.message(c, backend.queue, alone[0][0]))


def test_jobs_recovered_once_are_fetched_in_full_batches(backend: Backend) -> None:
    q = BothSides(backend.client(), backend.queue)
    c = backend.direct()
    ids = [f"j{i}" for i in range(50)]
    q.push([(i, jobs.encode(gq.Job(id=i))) for i in ids])
    c.delete(q.keys.active)
    assert _crash(q, "w1", ids, max_recoveries=3) == 50
    q.register("w2")
    batch = q.fetch("w2", 100, idle=False)  # a busy consumer takes them all at once
    assert sorted(job_id for job_id, _ in batch) == sorted(ids) and not batch.suspect


# -- wrong key types -----------------------------------------------------------------------


def _owned_job(backend: Backend) -> tuple[BothSides, redis.Redis]:
    q = BothSides(backend.client(), backend.queue)
    c = backend.direct()
    q.push([("a", jobs.encode(gq.Job(id="a")))])
    q.register("c1")
    assert q.fetch("c1", 1) == [("a", jobs.encode(gq.Job(id="a")))]
    return q, c


@pytest.mark.parametrize(
    "operation, wrong",
    [
        ("retry", "scheduled"),
        ("retry", "data"),
        ("retry", "recovered"),
        ("kill", "dead"),
        ("kill", "data"),
        ("ack", "data"),
        ("requeue", "active"),
    ],
)
def test_a_write_refused_for_a_wrong_key_type_leaves_the_job_in_flight(
    backend: Backend, operation: str, wrong: str
) -> None:
    q, c = _owned_job(backend)
    message = jobs.encode(gq.Job(id="a", attempt=1))
    c.rename(getattr(q.keys, wrong), "saved") if c.exists(getattr(q.keys, wrong)) else None
    c.set(getattr(q.keys, wrong), "a string")
    calls = {
        "retry": lambda: q.retry("c1", "a", message, 10),
        "kill": lambda: q.kill("c1", "a", message, dead_max_jobs=10, dead_max_age=1e6),
        "ack": lambda: q.ack("c1", ["a"]),
        "requeue": lambda: q.requeue("c1", ["a"]),
    }
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        calls[operation]()
    assert state.inflight(c, backend.queue, "c1") == {"a"}  # still owned: nothing lost
    c.delete("saved")


def test_a_push_refused_for_a_wrong_active_list_stores_nothing(backend: Backend) -> None:
    q = BothSides(backend.client(), backend.queue)
    c = backend.direct()
    c.set(q.keys.active, "a string")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        q.push([("a", jobs.encode(gq.Job(id="a")))])
    c.delete(q.keys.active)
    assert state.message(c, backend.queue, "a") is None  # the id is not blocked
    assert q.push([("a", jobs.encode(gq.Job(id="a")))]) == [True]


def test_persist_does_not_resend_a_refusal_but_does_resend_a_lost_reply() -> None:
    calls: list[int] = []

    def refused() -> bool:
        calls.append(1)
        raise redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind")

    with pytest.raises(redis.ResponseError):
        persist(refused, 5.0, "test", "retry job x")
    assert len(calls) == 1
    replies = iter([redis.ConnectionError("lost"), True])

    def lost_once() -> bool:
        reply = next(replies)
        if isinstance(reply, Exception):
            raise reply
        return reply

    assert persist(lost_once, 5.0, "test", "ack") == (True, True)


# -- the custodian tidies ------------------------------------------------------------------


def test_the_custodian_trims_dead_jobs_by_age_when_nothing_dies(backend: Backend) -> None:
    c = backend.direct()
    now = state.server_time(c)
    state.enqueue_raw(c, backend.queue, [gq.Job(id=i) for i in ("old", "young")])
    keys = QueueKeys(backend.queue)
    c.delete(keys.active)
    c.zadd(keys.dead, {"old": now - 1000, "young": now})
    consumer = gq.Consumer(backend.queue, client=backend.client(), dead_max_age=100)
    consumer.custodian_step()
    assert list(state.dead(c, backend.queue)) == ["young"]
    assert state.message(c, backend.queue, "old") is None  # its id is free again


def test_the_custodian_drops_recovery_counts_whose_job_is_gone(backend: Backend) -> None:
    c = backend.direct()
    state.enqueue_raw(c, backend.queue, [gq.Job(id="alive")])
    recovered = f"{backend.queue}:recovered"
    # A curlyq consumer acknowledged "gone" after gq had recovered it: its count leaked.
    c.hset(recovered, mapping={"alive": 1, "gone": 2, **{f"x{i}": 1 for i in range(30)}})
    consumer = gq.Consumer(backend.queue, client=backend.client())
    for _ in range(20):  # a walk may take several passes; each is bounded
        consumer.custodian_step()
        if c.hlen(recovered) == 1:
            break
    assert c.hgetall(recovered) == {b"alive": b"1"}


# -- options -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "option",
    ["poller_poll_duration", "heartbeat_poll_interval", "scheduler_poll_interval",
     "custodian_poll_interval", "custodian_consumer_timeout", "poller_max_backoff",
     "hub_block_warning"],
)  # fmt: skip
@pytest.mark.parametrize("value", [0, -1.0])
def test_a_zero_or_negative_interval_is_a_configuration_error(option: str, value: float) -> None:
    with pytest.raises(gq.ConfigurationError, match=option):
        gq.ConsumerOptions(**{option: value})


# -- handlers that never yield -------------------------------------------------------------


def _spin_forever() -> None:
    while True:
        pass


@pytest.mark.timeout(30)
def test_a_handler_spinning_past_its_timeout_is_interrupted(
    backend: Backend, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    done: list[str] = []

    def handler(job: gq.Job) -> None:
        if job.data == b"spin":
            _spin_forever()
        done.append(job.id)

    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform(gq.Job(id="spinner", data=b"spin"))
    producer.perform_many([gq.Job(id=f"n{i}") for i in range(5)])
    caplog.set_level(logging.WARNING, logger="gq.watchdog")
    start(handler, job_timeout=0.5, hub_block_warning=0.1, job_max_attempts=0,
          processor_concurrency=2)  # fmt: skip
    c = backend.direct()
    wait_until(lambda: "spinner" in state.dead(c, backend.queue), 20)
    assert "JobTimeout" in jobs.decode_error(state.message(c, backend.queue, "spinner"))
    wait_until(lambda: sorted(done) == [f"n{i}" for i in range(5)])
    blocked = [r.getMessage() for r in caplog.records if "hub has been blocked" in r.getMessage()]
    assert any("_spin_forever" in report for report in blocked)  # the blocking stack


def test_the_thread_heartbeat_gives_up_once_the_hub_is_blocked_past_the_timeout() -> None:
    beats: list[float] = []
    heartbeat = ThreadHeartbeat(lambda: beats.append(time.monotonic()), 0.2, "test",
                                give_up_after=0.6)  # fmt: skip
    heartbeat.last = time.monotonic()  # and never again: the "hub" stands still from now
    heartbeat.start()
    try:
        wait_until(lambda: heartbeat._gave_up, 5)
        assert beats, "it beat while the hub was blocked for less than the timeout"
        assert beats[-1] - heartbeat.last < 0.6 + 0.1
        count = len(beats)
        stays_true(lambda: len(beats) == count, 0.5)  # no beat after giving up
        heartbeat.last = time.monotonic()  # the hub ran again
        wait_until(lambda: len(beats) > count, 5)  # blocked again: it beats again
    finally:
        heartbeat.stop()


# -- the stop ------------------------------------------------------------------------------


@pytest.mark.timeout(30)
def test_when_the_grace_period_runs_out_finished_jobs_are_still_acknowledged(
    backend: Backend,
) -> None:
    c = backend.direct()
    release = Event()
    returned: list[str] = []

    def handler(job: gq.Job) -> None:
        if job.id == "stuck":
            release.wait()
        returned.append(job.id)

    producer = gq.Producer(backend.queue, client=backend.client())
    producer.perform_many([gq.Job(id="stuck"), gq.Job(id="quick")])
    consumer = gq.Consumer(backend.queue, client=backend.client(), processor_concurrency=2,
                           shutdown_grace_period=0.2)  # fmt: skip
    # A slow network: every acknowledgement takes 0.5 s, longer than the grace period.
    real_ack = consumer._queue.ack

    def slow_ack(consumer_id: str, ids: list[str]) -> list[bool]:
        gevent.sleep(0.5)
        return real_ack(consumer_id, ids)

    consumer._queue.ack = slow_ack  # type: ignore[method-assign]
    runner = gevent.spawn(consumer.run, handler)
    wait_until(lambda: state.inflight(c, backend.queue, consumer.id) == {"stuck", "quick"})
    wait_until(lambda: returned == ["quick"])  # "quick" finished, its ack on the wire
    consumer.stop()
    runner.join(10)
    assert isinstance(runner.exception, gq.ShutdownTimeoutError)
    release.set()
    # "quick" was acknowledged after all; "stuck" stays in flight for recovery.
    assert state.inflight(c, backend.queue, consumer.id) == {"stuck"}
    assert state.message(c, backend.queue, "quick") is None
