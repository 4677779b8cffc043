"""``async def`` handlers on the gevent worker (SPEC section 15): awaited on one asyncio
loop per process, next to sync handlers in the same pool, interrupted by job_timeout and
cancels as sync handlers are, with real asyncio libraries."""

from __future__ import annotations

import asyncio
import functools
import logging
import time
from typing import Any

import gevent
import pytest

import gq
from gq import job as jobs
from gq.errors import ShutdownTimeoutError
from tests import queue_state as state
from tests.helpers import Backend, wait_until


def _enqueue(backend: Backend, *items: gq.Job) -> None:
    gq.Producer(backend.queue, client=backend.client()).perform_many(list(items))


def _acked(backend: Backend, *ids: str) -> bool:
    """Whether every job of ``ids`` is done: acknowledged, so its message is gone."""
    c = backend.direct()
    return all(state.message(c, backend.queue, i) is None for i in ids)


def _error(backend: Backend, job_id: str) -> str:
    message = state.message(backend.direct(), backend.queue, job_id)
    assert message is not None
    return jobs.decode_error(message)


# -- awaited, never acknowledged before -----------------------------------------------------


def test_an_async_handler_is_awaited_before_its_job_is_acknowledged(
    backend: Backend, start: Any
) -> None:
    done: list[str] = []

    async def handler(job: gq.Job) -> None:
        await asyncio.sleep(0.01)
        assert asyncio.get_running_loop() is not None
        done.append(job.id)

    _enqueue(backend, *[gq.Job(id=f"a{i}") for i in range(20)])
    start(handler, processor_concurrency=5)
    wait_until(lambda: _acked(backend, *[f"a{i}" for i in range(20)]))
    assert sorted(done) == sorted(f"a{i}" for i in range(20))


def test_an_awaitable_returned_by_a_sync_callable_is_awaited_and_its_failure_retried(
    backend: Backend, start: Any
) -> None:
    ran: list[str] = []

    async def work(job: gq.Job) -> None:
        await asyncio.sleep(0)
        ran.append(job.id)
        if job.id == "bad":
            raise ValueError("failed after an await")

    # A partial of a coroutine function is not itself one: only its result tells.
    start(functools.partial(work), job_max_attempts=3)
    _enqueue(backend, gq.Job(id="good"), gq.Job(id="bad"))
    wait_until(lambda: "bad" in state.scheduled(backend.direct(), backend.queue))
    assert "ValueError: failed after an await" in _error(backend, "bad")
    wait_until(lambda: _acked(backend, "good"))
    assert sorted(ran) == ["bad", "good"]


def test_sync_and_async_handlers_interleave_in_one_pool(backend: Backend, start: Any) -> None:
    running = {"sync": 0, "async": 0, "both": 0, "most": 0}

    def enter(kind: str) -> None:
        running[kind] += 1
        running["most"] = max(running["most"], running["sync"] + running["async"])
        if running["sync"] and running["async"]:
            running["both"] += 1

    async def coroutine(job: gq.Job) -> None:
        enter("async")
        await asyncio.sleep(0.05)
        running["async"] -= 1

    def handler(job: gq.Job) -> Any:
        if job.id.startswith("a"):
            return coroutine(job)
        enter("sync")
        gevent.sleep(0.05)
        running["sync"] -= 1
        return None

    items = [gq.Job(id=f"{kind}{i}") for i in range(15) for kind in "as"]
    _enqueue(backend, *items)
    start(handler, processor_concurrency=4)
    wait_until(lambda: _acked(backend, *[j.id for j in items]))
    assert running["both"] > 0  # sync and async ran at the same time...
    assert running["most"] == 4  # ...and processor_concurrency counted both


# -- interrupted as sync handlers are ------------------------------------------------------


@pytest.mark.timeout(30)
def test_job_timeout_cancels_the_coroutine_and_fails_the_attempt(
    backend: Backend, start: Any
) -> None:
    unwound: list[str] = []

    async def handler(job: gq.Job) -> None:
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            await asyncio.sleep(0.01)  # the cleanup may await, and ends before the retry
            unwound.append(job.id)
            raise

    start(handler, job_timeout=0.3, job_max_attempts=3)
    _enqueue(backend, gq.Job(id="slow"))
    wait_until(lambda: "slow" in state.scheduled(backend.direct(), backend.queue))
    assert unwound == ["slow"]
    assert "JobTimeout" in _error(backend, "slow")


def _hanging() -> tuple[Any, list[str], list[str]]:
    """An async handler that awaits for an hour, and the ids it started and unwound."""
    started: list[str] = []
    unwound: list[str] = []

    async def handler(job: gq.Job) -> None:
        started.append(job.id)
        try:
            await asyncio.sleep(3600)
        finally:
            unwound.append(job.id)

    return handler, started, unwound


@pytest.mark.timeout(30)
def test_a_cancel_cancels_the_running_coroutine(backend: Backend, start: Any) -> None:
    handler, started, unwound = _hanging()
    start(handler)
    _enqueue(backend, gq.Job(id="long"))
    wait_until(lambda: started == ["long"])
    assert gq.Queue(backend.queue, client=backend.client()).cancel("long") == 1
    wait_until(lambda: _acked(backend, "long"))  # acknowledged as cancelled, not retried
    assert unwound == ["long"]
    assert "long" not in state.scheduled(backend.direct(), backend.queue)


def _spin(seconds: float) -> None:
    until = time.monotonic() + seconds
    while time.monotonic() < until:  # never awaits: the loop, and the hub, are held
        pass


@pytest.mark.timeout(30)
def test_the_watchdog_names_a_coroutine_that_blocks_the_loop_and_stops_it_past_its_timeout(
    backend: Backend, start: Any, caplog: pytest.LogCaptureFixture
) -> None:
    async def spinning_handler(job: gq.Job) -> None:
        await asyncio.sleep(0)
        if job.id == "spinner":
            _spin(3600)

    caplog.set_level(logging.WARNING, logger="gq.watchdog")
    start(spinning_handler, job_timeout=0.5, hub_block_warning=0.1, job_max_attempts=0)
    _enqueue(backend, gq.Job(id="spinner"), gq.Job(id="fine"))
    wait_until(lambda: "spinner" in state.dead(backend.direct(), backend.queue), 20)
    assert "JobTimeout" in _error(backend, "spinner")
    wait_until(lambda: _acked(backend, "fine"))
    reports = [r.getMessage() for r in caplog.records if "hub has been blocked" in r.getMessage()]
    assert reports
    assert "gq job spinner" in reports[0]  # the task, named after its job
    assert "coroutine on the asyncio loop" in reports[0]
    assert "spinning_handler" in reports[0] and "_spin" in reports[0]  # its stack


@pytest.mark.timeout(30)
def test_a_graceful_stop_lets_a_coroutine_finish(backend: Backend) -> None:
    started: list[str] = []
    done: list[str] = []

    async def handler(job: gq.Job) -> None:
        started.append(job.id)
        await asyncio.sleep(0.3)
        done.append(job.id)

    consumer = gq.Consumer(backend.queue, client=backend.client(), shutdown_grace_period=10)
    runner = gevent.spawn(consumer.run, handler)
    _enqueue(backend, gq.Job(id="finishing"))
    wait_until(lambda: started == ["finishing"])
    consumer.stop()
    runner.join(10)
    assert runner.successful()
    assert done == ["finishing"] and _acked(backend, "finishing")


@pytest.mark.timeout(30)
def test_past_the_grace_period_a_stop_cancels_the_coroutine_and_leaves_its_job_in_flight(
    backend: Backend,
) -> None:
    handler, started, unwound = _hanging()
    consumer = gq.Consumer(backend.queue, client=backend.client(), shutdown_grace_period=0.3)
    runner = gevent.spawn(consumer.run, handler)
    _enqueue(backend, gq.Job(id="stuck"))
    wait_until(lambda: started == ["stuck"])
    consumer.stop()
    runner.join(10)
    assert isinstance(runner.exception, ShutdownTimeoutError)
    assert unwound == ["stuck"]
    assert state.inflight(backend.direct(), backend.queue, consumer.id) == {"stuck"}


# -- asyncio.run in a sync handler ---------------------------------------------------------


def test_overlapping_sync_handlers_may_each_call_asyncio_run(backend: Backend, start: Any) -> None:
    loops: dict[str, int] = {}
    most = {"now": 0, "max": 0}

    async def helper(job_id: str) -> None:
        most["now"] += 1
        most["max"] = max(most["max"], most["now"])
        await asyncio.sleep(0.1)
        loops[job_id] = id(asyncio.get_running_loop())
        most["now"] -= 1

    def handler(job: gq.Job) -> None:
        asyncio.run(helper(job.id))

    ids = [f"r{i}" for i in range(10)]
    _enqueue(backend, *[gq.Job(id=i) for i in ids])
    start(handler, processor_concurrency=10)
    wait_until(lambda: _acked(backend, *ids))
    assert sorted(loops) == ids
    assert most["max"] > 1  # they overlapped, each on a loop of its own


def test_a_sync_greenlet_sees_no_running_loop_while_the_loop_waits() -> None:
    from gq.worker import asyncio_loop

    started: list[bool] = []

    async def sleeper() -> None:
        started.append(True)
        await asyncio.sleep(0.2)

    waiting = gevent.spawn(asyncio_loop.wait, sleeper(), "sleeper")
    wait_until(lambda: bool(started))  # the loop now waits in its selector, the task in it
    assert not waiting.dead
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()
    waiting.join(5)
    assert waiting.successful()


def test_the_loop_yields_to_the_hub_while_a_coroutine_keeps_it_busy() -> None:
    from gq.worker import asyncio_loop

    ticks: list[int] = []

    async def busy() -> None:
        while len(ticks) < 5:  # always ready, never waiting: select(0) every turn
            await asyncio.sleep(0)

    def ticker() -> None:
        for i in range(5):
            gevent.sleep(0)
            ticks.append(i)

    spinner = gevent.spawn(asyncio_loop.wait, busy(), "busy")
    gevent.spawn(ticker).join(5)
    spinner.join(5)
    assert ticks == [0, 1, 2, 3, 4] and spinner.successful()
