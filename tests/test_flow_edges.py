"""Flow control at its edges (issue 19, section 2: defects 2, 4, 7, 8 and 10, and the rate
limit's burst): capacity the custodian frees, cancel requests that outlive their job,
RateLimited holds that are too long or must be lifted, rate periods out of range; on
fakeredis and a real Redis."""

from __future__ import annotations

import math
from typing import Any

import pytest

import gq
from gq.store.admin import QueueAdmin
from gq.store.jobs import RedisQueue
from gq.store.keys import QueueKeys
from tests.helpers import Backend, delete_keys, wait_until
from tests.test_flow import Tracker

KEEP = {"dead_max_jobs": 100, "dead_max_age": 3600}


@pytest.fixture
def cleanup(backend: Backend) -> Any:
    yield
    delete_keys(backend.direct(), f"{backend.queue}*")


def _queue(backend: Backend) -> gq.Queue:
    return gq.Queue(backend.queue, client=backend.client())


def _push(backend: Backend, *ids: str) -> None:
    gq.Producer(backend.queue, client=backend.client()).perform_many([gq.Job(id=i) for i in ids])


def _signal_only(start: Any, handler: Any, **options: Any) -> Any:
    """A consumer that only the queue's signal wakes: its poll never times out in a test."""
    consumer, greenlet = start(handler, **options)
    consumer.opts.poller_poll_duration = 3600  # before its greenlet first runs
    return consumer


# -- defect 2: capacity freed by the custodian wakes a consumer waiting at the limit ------


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["tidy", "recover", "deregister"])
def test_capacity_the_custodian_frees_wakes_a_consumer_at_the_limit(
    backend: Backend, start: Any, cleanup: Any, how: str
) -> None:
    queue = _queue(backend)
    queue.set_limits(concurrency=1)
    _push(backend, "ghost-job")
    ghost = RedisQueue(backend.client(), backend.queue)
    ghost.register("ghost")
    [(taken, _)] = ghost.fetch("ghost", 1)
    keys, direct = QueueKeys(backend.queue), backend.direct()
    # A curlyq consumer acks with SREM and HDEL only: the ghost's held count stays at 1.
    direct.srem(keys.inflight("ghost"), taken)
    direct.hdel(keys.data, taken)
    _push(backend, "a", "b", "c")
    tracker = Tracker()
    _signal_only(start, tracker, custodian_poll_interval=0.2, custodian_consumer_timeout=5)
    wait_until(lambda: direct.hget(keys.flow, "starved") == b"1", 10)  # waits at the limit
    if how == "tidy":  # curlyq's custodian dropped the ghost: gq's tidy drops its count
        direct.zrem(keys.consumers, keys.inflight("ghost"))
    elif how == "recover":  # the ghost's heartbeat long ago: recovered, with nothing to move
        direct.zadd(keys.consumers, {keys.inflight("ghost"): 1.0})
    else:  # the ghost stops cleanly
        assert ghost.deregister("ghost")
    wait_until(lambda: sorted(tracker.done) == ["a", "b", "c"], 15)
    assert queue.stats()["held"] == 0


def test_every_script_that_lowers_a_held_count_raises_the_signal(
    backend: Backend, cleanup: Any
) -> None:
    """The same at the scripts' level: each way a count drops wakes a starved queue."""
    keys, direct = QueueKeys(backend.queue), backend.direct()
    rq = RedisQueue(backend.client(), backend.queue)
    for how in ("tidy", "recover", "deregister"):
        direct.hset(keys.flow, mapping={"concurrency": 1, "starved": 1})
        direct.hset(keys.held, keys.inflight("ghost"), 1)  # stale: its set is empty
        direct.delete(keys.signal)
        direct.rpush(keys.active, "ready")
        if how == "tidy":
            rq.tidy("0", **KEEP)
        elif how == "recover":
            direct.zadd(keys.consumers, {keys.inflight("ghost"): 1.0})
            rq.recover("me", [keys.inflight("ghost")], timeout=5, max_jobs=10,
                       max_recoveries=3, **KEEP)  # fmt: skip
        else:
            direct.zadd(keys.consumers, {keys.inflight("ghost"): 1.0})
            assert rq.deregister("ghost")
        assert direct.hlen(keys.held) == 0, how
        assert direct.lrange(keys.signal, 0, -1) == [b"1"], how


# -- defect 4: a new life for an id clears an old cancel request --------------------------


def _cancel_in_flight(backend: Backend, job_id: str) -> RedisQueue:
    """Job ``job_id`` fetched by consumer "c", with a cancel request standing for it."""
    _push(backend, job_id)
    rq = RedisQueue(backend.client(), backend.queue)
    rq.register("c")
    assert [i for i, _ in rq.fetch("c", 1)] == [job_id]
    assert QueueAdmin(backend.client(), backend.queue).cancel([job_id]) == ["requested"]
    return rq


@pytest.mark.timeout(60)
def test_a_job_killed_with_a_cancel_request_runs_when_retried_from_dead(
    backend: Backend, start: Any, cleanup: Any
) -> None:
    rq = _cancel_in_flight(backend, "x")
    message = rq.messages(["x"])[0]
    assert message is not None
    assert rq.kill("c", "x", message, **KEEP)  # it failed for good before the cancel landed
    assert backend.direct().zcard(QueueKeys(backend.queue).cancelled) == 0
    admin = QueueAdmin(backend.client(), backend.queue)
    assert admin.retry_dead([("x", None)]) == [True]
    tracker = Tracker()
    start(tracker)
    wait_until(lambda: tracker.done == ["x"], 10)


def test_a_retried_job_with_a_cancel_request_is_cancelled_not_scheduled(
    backend: Backend, cleanup: Any
) -> None:
    rq = _cancel_in_flight(backend, "x")
    message = rq.messages(["x"])[0]
    assert message is not None
    assert rq.retry("c", "x", message, 0.0)  # its handler failed before the cancel landed
    keys, direct = QueueKeys(backend.queue), backend.direct()
    assert direct.zcard(keys.scheduled) == 0
    assert not direct.hexists(keys.data, "x")  # the id is free again
    assert direct.zcard(keys.cancelled) == 0


@pytest.mark.timeout(60)
@pytest.mark.parametrize("how", ["perform", "perform_after", "perform_many"])
def test_a_new_job_reusing_an_id_is_not_hit_by_an_old_cancel_request(
    backend: Backend, start: Any, cleanup: Any, how: str
) -> None:
    keys, direct = QueueKeys(backend.queue), backend.direct()
    # A request whose job a curlyq consumer acknowledged (curlyq knows no Q:cancelled).
    direct.zadd(keys.cancelled, {"x": 1.0e9})
    producer = gq.Producer(backend.queue, client=backend.client())
    if how == "perform":
        producer.perform(gq.Job(id="x"))
    elif how == "perform_after":
        producer.perform_after(0, gq.Job(id="x"))
    else:
        producer.perform_many([gq.Job(id="x"), gq.Job(id="y")])
    assert direct.zscore(keys.cancelled, "x") is None
    tracker = Tracker()
    start(tracker, scheduler_poll_interval=0.1)
    wait_until(lambda: "x" in tracker.done, 10)


# -- defect 7: RateLimited's delay is finite and capped ------------------------------------


def test_rate_limited_needs_a_finite_delay_and_caps_a_huge_one() -> None:
    for bad in (math.inf, -math.inf, math.nan, 0, -1):
        with pytest.raises(ValueError, match="finite|positive"):
            gq.RateLimited(after=bad)
    assert gq.RateLimited(after=1e300).after == gq.RateLimited.MAX_AFTER == 86400.0
    assert gq.RateLimited(after=30).after == 30.0


@pytest.mark.timeout(60)
def test_a_huge_rate_limited_hold_is_capped_and_readers_stay_total(
    backend: Backend, start: Any, cleanup: Any
) -> None:
    queue = _queue(backend)
    keys, direct = QueueKeys(backend.queue), backend.direct()
    rq = _cancel_in_flight(backend, "held")  # any owned job
    direct.delete(keys.cancelled)
    message = rq.messages(["held"])[0]
    assert message is not None
    assert rq.retry("c", "held", message, 1.0, hold=1e300)  # a caller without the cap
    hold = float(direct.hget(keys.flow, "hold_until") or 0)
    now = rq.server_time()
    assert math.isfinite(hold) and hold <= (now + 86400 + 5) * 1000
    assert 86000 <= queue.stats()["held_back_seconds"] <= 86400
    # A hold already written as "inf" (before this fix) or junk: readers and fetch are total.
    for junk in (b"inf", b"nan", b"soon", b"1e400"):
        direct.hset(keys.flow, "hold_until", junk)
        stats = queue.stats()
        assert 0 <= stats["held_back_seconds"] <= 86400, junk
        fetched = rq.fetch("c", 10)
        assert 0 <= fetched.wait <= 86400, junk


# -- defect 8: an operator lifts a RateLimited hold ---------------------------------------


@pytest.mark.timeout(60)
def test_resume_lifts_a_rate_limited_hold(backend: Backend, start: Any, cleanup: Any) -> None:
    queue = _queue(backend)
    keys, direct = QueueKeys(backend.queue), backend.direct()
    direct.hset(keys.flow, "hold_until", int((queue_time(backend) + 86400) * 1000))
    _push(backend, "a")
    assert queue.stats()["held_back_seconds"] > 86000
    tracker = Tracker()
    _signal_only(start, tracker)
    queue.resume()
    assert queue.stats()["held_back_seconds"] == 0
    wait_until(lambda: tracker.done == ["a"], 10)


def queue_time(backend: Backend) -> float:
    seconds, micros = backend.direct().time()
    return float(seconds) + micros / 1e6


# -- defect 10: a rate period out of range is refused, and fetch survives one -------------


def test_a_rate_out_of_range_is_refused_with_a_reason(backend: Backend, cleanup: Any) -> None:
    queue = _queue(backend)
    for bad in [(1, 1e16), (1, 1e23), (1, math.inf), (10**12, 1), (1, 31 * 86400)]:
        with pytest.raises(gq.ConfigurationError, match="period|jobs"):
            queue.set_limits(rate=bad)
    assert queue.limits()["rate"] is None
    queue.set_limits(rate=(1, 30 * 86400))  # the longest period
    assert queue.limits()["rate"] == (1, 30 * 86400.0)


@pytest.mark.timeout(60)
def test_fetch_survives_a_rate_written_out_of_range(backend: Backend, cleanup: Any) -> None:
    keys, direct = QueueKeys(backend.queue), backend.direct()
    _push(backend, "a", "b")
    rq = RedisQueue(backend.client(), backend.queue)
    rq.register("c")
    direct.hset(keys.flow, mapping={"rate": 1, "period": "1e16"})  # written by hand
    fetched = rq.fetch("c", 10)
    assert [i for i, _ in fetched] == ["a"]  # taken, and in flight: the script did not fail
    assert direct.smembers(keys.inflight("c")) == {b"a"}
    assert 0 < fetched.wait <= 30 * 86400
    direct.hset(keys.flow, mapping={"rate": "1e30", "period": "junk"})
    assert [i for i, _ in rq.fetch("c", 10)] == ["b"]


# -- the rate limit's burst, measured on the Redis clock ----------------------------------


def _greedy_fetches(rq: RedisQueue, seconds: float) -> list[tuple[float, float, int]]:
    """Fetch as often as the rate limit lets one consumer, for ``seconds`` of Redis time,
    and at least every 10 ms so that each start is taken close to when it is allowed:
    (server time before, server time after, jobs taken) per fetch that took any."""
    fetches: list[tuple[float, float, int]] = []
    opened = rq.server_time()
    while rq.server_time() < opened + seconds:
        before = rq.server_time()
        fetched = rq.fetch("c", 1000)
        after = rq.server_time()
        if len(fetched):
            fetches.append((before, after, len(fetched)))
        resume_at = after + min(fetched.wait, 0.01)
        wait_until(lambda at=resume_at: rq.server_time() >= at, 5, interval=0.002)
    return fetches


def _most_in_a_window(fetches: list[tuple[float, float, int]], period: float) -> int:
    """The most jobs taken by fetches that surely ran within less than ``period``."""
    return max(
        sum(n for _, after, n in fetches[i:] if after < start + period)
        for i, (start, _, _) in enumerate(fetches)
    )


@pytest.mark.timeout(60)
def test_the_rate_limit_allows_n_plus_burst_minus_one_in_any_period(
    backend: Backend, cleanup: Any
) -> None:
    """rate=(20, 2 s): starts 100 ms apart and a burst of ceil(20 / 10) = 2. A consumer
    fetching as fast as it may takes the burst at once, then one job every 100 ms: 21 =
    n + burst - 1 in any window of one period (start included, end excluded), never 22."""
    queue, rq = _queue(backend), RedisQueue(backend.client(), backend.queue)
    rq.register("c")
    _push(backend, *[f"j{i}" for i in range(200)])
    queue.set_limits(rate=(20, 2.0))
    most = []
    for _ in range(3):  # a machine under load may fetch late and take fewer: try again
        most.append(_most_in_a_window(_greedy_fetches(rq, 2.5), 2.0))
        if most[-1] == 21:
            break
    assert max(most) == 21, most
