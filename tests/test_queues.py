"""Several queues in one consumer (issue #10, SPEC section 9): one handler pool, strict
priority or weights, each queue with its own keys and in-flight set."""

from __future__ import annotations

from collections import Counter
from typing import Any

import gevent
import pytest
from gevent.event import Event

import gq
from gq.cli.common import queue_specs
from gq.store.keys import QueueKeys
from tests import queue_state as state
from tests.helpers import Backend, wait_until


def _names(backend: Backend, *suffixes: str) -> list[str]:
    return [f"{backend.queue}-{suffix}" for suffix in suffixes]


def _fill(backend: Backend, queue: str, count: int, prefix: str) -> None:
    producer = gq.Producer(queue, client=backend.client())
    producer.perform_many([gq.Job(id=f"{prefix}{i}") for i in range(count)])


def _cleanup(backend: Backend, names: list[str]) -> None:
    from tests.helpers import delete_keys

    for name in names:
        delete_keys(backend.direct(), f"{name}*")


def _run(backend: Backend, queues: Any, handler: Any, **options: Any) -> tuple[gq.Consumer, Any]:
    consumer = gq.Consumer(queues, client=backend.client(), **options)
    consumer.opts.poller_poll_duration = 0.2
    return consumer, gevent.spawn(consumer.run, handler)


@pytest.mark.timeout(60)
def test_strict_priority_runs_the_higher_queue_first(backend: Backend) -> None:
    high, low = names = _names(backend, "high", "low")
    _fill(backend, low, 50, "low")  # enqueued first
    _fill(backend, high, 50, "high")
    order: list[tuple[str, str]] = []
    consumer, runner = _run(backend, [high, low], lambda job: order.append((job.queue, job.id)),
                            processor_concurrency=1)  # fmt: skip
    try:
        wait_until(lambda: len(order) == 100, 30)
    finally:
        consumer.stop()
        runner.join(10)
        _cleanup(backend, names)
    last_high = max(i for i, (queue, _) in enumerate(order) if queue == high)
    lows_before = sum(1 for queue, _ in order[:last_high] if queue == low)
    assert lows_before <= 2, order  # give or take what was already buffered
    assert {job_id for queue, job_id in order if queue == high} == {f"high{i}" for i in range(50)}


@pytest.mark.timeout(120)
def test_weights_share_the_handlers_by_ratio(backend: Backend) -> None:
    names = _names(backend, "a", "b", "c")
    for name, prefix in zip(names, "abc"):
        _fill(backend, name, 3000, prefix)  # none runs dry before 3,000 are done
    seen: Counter[str] = Counter()
    enough = Event()

    def handler(job: gq.Job) -> None:
        if sum(seen.values()) < 3000:
            seen[job.queue] += 1
        else:
            enough.set()

    consumer, runner = _run(backend, dict(zip(names, (6, 3, 1))), handler,
                            processor_concurrency=1, poller_buffer_size=1)  # fmt: skip
    try:
        assert enough.wait(100), seen
    finally:
        consumer.stop()
        runner.join(10)
        _cleanup(backend, names)
    shares = [seen[name] / 3000 for name in names]
    # 3,000 draws: one standard deviation of the largest share is 0.9 percentage points.
    assert shares == pytest.approx([0.6, 0.3, 0.1], abs=0.04), shares


@pytest.mark.timeout(30)
def test_a_stop_gives_back_the_buffered_jobs_of_every_queue(backend: Backend) -> None:
    first, second = names = _names(backend, "one", "two")
    _fill(backend, first, 2, "x")
    _fill(backend, second, 5, "y")
    release = Event()
    consumer, runner = _run(backend, names, lambda job: release.wait(),
                            processor_concurrency=1, poller_buffer_size=4)  # fmt: skip
    c = backend.direct()
    held = lambda: state.inflight(c, first, consumer.id) | state.inflight(c, second, consumer.id)  # noqa: E731
    wait_until(lambda: len(held()) == 5, message="1 running and 4 buffered")
    assert state.inflight(c, first, consumer.id) == {"x0", "x1"}  # strict: the first queue first
    consumer.stop()
    try:
        wait_until(lambda: held() == {"x0"}, message="the buffered jobs given back")
        release.set()
        runner.join(10)
        assert runner.successful()
        assert held() == set()
        assert state.active(c, first) == ["x1"]
        assert state.active(c, second) == [f"y{i}" for i in range(5)]
    finally:
        _cleanup(backend, names)


def test_the_custodian_recovers_a_dead_consumer_on_each_of_its_queues(backend: Backend) -> None:
    names = _names(backend, "p", "q")
    c = backend.direct()
    for name in names:
        keys = QueueKeys(name)
        state.enqueue_raw(c, name, [gq.Job(id=f"{name}-job")])
        c.delete(keys.active)  # taken by the crashed consumer:
        c.sadd(keys.inflight("crashed"), f"{name}-job")
        c.zadd(keys.consumers, {keys.inflight("crashed"): 0})
    rescuer = gq.Consumer(names, client=backend.client())
    try:
        rescuer.custodian_step()
        for name in names:
            assert state.active(c, name) == [f"{name}-job"]
            assert rescuer.recorders[name].recoveries == 1  # counted under its own queue
    finally:
        _cleanup(backend, names)


def test_job_queue_names_the_queue_and_the_outcome_goes_there(backend: Backend) -> None:
    names = _names(backend, "m", "n")
    _fill(backend, names[1], 1, "fails")
    seen: list[str] = []

    def handler(job: gq.Job) -> None:
        seen.append(job.queue)
        raise RuntimeError("no")

    consumer, runner = _run(backend, names, handler, job_max_attempts=0)
    c = backend.direct()
    try:
        wait_until(lambda: "fails0" in state.dead(c, names[1]))
        assert seen == [names[1]]
    finally:
        consumer.stop()
        runner.join(10)
        _cleanup(backend, names)


@pytest.mark.parametrize(
    "given, expected",
    [
        (["a"], "a"),
        (["a", "b"], ["a", "b"]),
        (["critical:6", "default:3", "low"], {"critical": 6, "default": 3, "low": 1}),
        (["{emails}:2"], {"{emails}": 2}),
    ],
)
def test_queue_flags_become_what_the_consumer_takes(given: list[str], expected: Any) -> None:
    assert queue_specs(given) == expected


@pytest.mark.parametrize("bad", [[], ["a", "a"], {"a": 0}, {"a": True}])
def test_bad_queue_lists_are_configuration_errors(bad: Any) -> None:
    with pytest.raises(gq.ConfigurationError):
        gq.Consumer(bad, client=object())
