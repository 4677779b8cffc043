"""A hand-off takes its task's first step in the handler greenlet while the loop waits in
``select()`` (gq.worker.asyncio_loop ``_first_step``): the coroutine starts at once, with
the loop as the running loop and its task current, and the loop is woken only when that
step left it something sooner than its wait would end."""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from typing import Any

import gevent
import pytest

import gq
from gq import job as jobs
from gq.worker import asyncio_loop
from tests import queue_state as state
from tests.helpers import Backend, wait_until


def _parked() -> bool:
    """Whether the loop waits in select() (started first if need be)."""
    return asyncio_loop.get().selector.parked is not None


def test_a_coroutine_that_never_awaits_runs_as_its_task_on_the_loop() -> None:
    loop = asyncio_loop.get().loop

    async def at_once() -> tuple[bool, bool]:
        return asyncio.current_task() is not None, asyncio.get_running_loop() is loop

    wait_until(_parked)
    assert asyncio_loop.wait(at_once(), "at-once") == (True, True)
    with pytest.raises(RuntimeError, match="no running event loop"):
        asyncio.get_running_loop()  # handed back to the loop greenlet, not left here
    assert asyncio.current_task(loop) is None


@pytest.mark.timeout(30)
def test_a_short_timer_from_a_first_step_is_not_held_behind_a_long_wait() -> None:
    asleep = gevent.spawn(asyncio_loop.wait, asyncio.sleep(20), "long")
    wait_until(lambda: _parked() and asyncio_loop.get().loop._scheduled)  # type: ignore[attr-defined]
    with gevent.Timeout(5, AssertionError("the loop slept through a 50 ms timer")):
        asyncio_loop.wait(asyncio.sleep(0.05), "short")
    asleep.kill()


@pytest.mark.timeout(30)
def test_a_socket_registered_by_a_first_step_is_watched() -> None:
    ours, theirs = socket.socketpair()
    ours.setblocking(False)

    async def read_one() -> bytes:
        loop = asyncio.get_running_loop()
        ready = loop.create_future()
        loop.add_reader(ours.fileno(), ready.set_result, None)  # in the first step
        try:
            await ready
        finally:
            loop.remove_reader(ours.fileno())
        return ours.recv(10)

    wait_until(_parked)
    gevent.spawn_later(0.05, theirs.send, b"x")
    try:
        with gevent.Timeout(5, AssertionError("the loop never watched the socket")):
            assert asyncio_loop.wait(read_one(), "reader") == b"x"
    finally:
        ours.close()
        theirs.close()


@pytest.mark.timeout(30)
def test_a_first_step_that_waits_on_gevent_holds_the_loop_until_it_ends(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.ERROR)
    order: list[str] = []

    async def blocking_first() -> str:
        order.append("first step")
        gevent.sleep(0.2)  # sync I/O in a coroutine: yields to the hub mid-step
        order.append("first step ended")
        await asyncio.sleep(0)
        return "blocked"

    async def quick(i: int) -> int:
        order.append("quick")
        await asyncio.sleep(0.01)
        return i

    wait_until(_parked)
    blocked = gevent.spawn(asyncio_loop.wait, blocking_first(), "blocking")
    wait_until(lambda: order == ["first step"])
    others = [gevent.spawn(asyncio_loop.wait, quick(i), f"quick {i}") for i in range(20)]
    gevent.joinall([blocked, *others], timeout=10, raise_error=True)
    assert blocked.value == "blocked" and [g.value for g in others] == list(range(20))
    # No step of another task ran inside the blocked one's (asyncio allows one at a time).
    assert order.index("first step ended") < order.index("quick")
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


@pytest.mark.timeout(30)
def test_a_first_step_that_never_yields_is_stopped_past_its_job_timeout(
    backend: Backend, start: Any
) -> None:
    async def spinning(job: gq.Job) -> None:
        if job.id == "spinner":
            until = time.monotonic() + 3600
            while time.monotonic() < until:  # before any await: in the handler greenlet
                pass
        await asyncio.sleep(0)

    start(spinning, job_timeout=0.5, hub_block_warning=0.1, job_max_attempts=0)
    gq.Producer(backend.queue, client=backend.client()).perform_many(
        [gq.Job(id="spinner"), gq.Job(id="fine")]
    )
    wait_until(lambda: "spinner" in state.dead(backend.direct(), backend.queue), 20)
    message = state.message(backend.direct(), backend.queue, "spinner")
    assert message is not None and "JobTimeout" in (jobs.decode_error(message) or "")
    wait_until(lambda: state.message(backend.direct(), backend.queue, "fine") is None)
