"""``async def`` handlers and tasks on the gevent worker (SPEC section 15).

One asyncio event loop per worker process (per gevent hub), started on the first job
whose handler returns an awaitable, runs in a greenlet of its own. Its selector is
gevent's, so where asyncio would block in ``select()`` the loop greenlet yields to the hub
instead, and the other greenlets (sync handlers, the poller, the acker) run meanwhile.

A handler greenlet hands its coroutine over without a thread: it makes the loop's task
itself (same thread) and, while the loop waits in ``select()``, takes the task's first
step itself, as the loop would (the running loop and the task current), so that the
coroutine starts now rather than after every greenlet the hub runs before the loop
(1,000 jobs handed over in one turn each waited for the whole batch). It wakes the
loop's selector only when that step left the loop something sooner than its wait ends
(setting a gevent ``Event``: no syscall), and waits on a gevent ``Waiter`` that the
task's end resumes through the hub; a coroutine that ended in its first step costs no
hub turn at all. Sync and async handlers therefore
share one pool and ``processor_concurrency``: a job holds its handler greenlet until its
coroutine has ended, and is acknowledged only then.

An interruption of the handler greenlet (``job_timeout``'s JobTimeout, a cancel's
JobCancelled, a forced stop's GreenletExit) cancels the task and waits for the coroutine
to unwind, at most ``UNWIND_SECONDS``, before it goes on as it would for a sync handler.

asyncio keeps "the running loop" per OS thread, which all greenlets share: left as it is,
a sync handler calling ``asyncio.run()`` while the loop greenlet sleeps would find a loop
"running" and fail. So every loop made here (ours, and those ``asyncio.run()`` makes once
``install()`` has run) hands the running loop and the async generator hooks back while it
waits in ``select()``, and takes them again when it wakes (docs/asyncio.md, decisions.md).
"""

from __future__ import annotations

import asyncio
import logging
import math
import selectors
import sys
import time
from asyncio import events
from collections.abc import Awaitable
from inspect import isawaitable
from types import CoroutineType
from typing import Any

import gevent
import gevent.event
from gevent.hub import Waiter, get_hub
from gevent.selectors import GeventSelector

from gq.job import Job
from gq.worker import watchdog

log = logging.getLogger("gq.worker.asyncio_loop")

#: How long an interrupted handler waits for its cancelled coroutine to unwind (its
#: ``finally`` blocks) before its outcome is written regardless.
UNWIND_SECONDS = 5.0

_NO_HOOKS = (None, None)
_FOREVER = float("inf")


class GreenletSelector(GeventSelector):  # type: ignore[misc]  # (gevent is untyped)
    """gevent's selector, which waits on the hub, handing the thread's running loop and
    async generator hooks back while it waits: other greenlets run only then."""

    def __init__(self) -> None:
        super().__init__()
        #: The loop's async generator hooks while it waits in ``select()``, else None: a
        #: hand-off may take its task's first step in its own greenlet only then.
        self.parked: tuple[Any, Any] | None = None
        #: When the ``select()`` in progress ends by itself (``time.monotonic()``, the
        #: loop's clock): a first step that scheduled nothing earlier need not wake it.
        self.deadline = 0.0
        # Set but while a handler greenlet takes a first step (``AsyncioLoop._first_step``).
        self.unstepped = gevent.event.Event()
        self.unstepped.set()

    def select(self, timeout: float | None = None) -> list[tuple[Any, int]]:
        running = events._get_running_loop()
        hooks = sys.get_asyncgen_hooks()
        events._set_running_loop(None)
        sys.set_asyncgen_hooks(*_NO_HOOKS)
        self.parked = hooks
        try:
            if timeout is not None and timeout <= 0:
                # Ready set, gevent's select yields to the hub once and takes what is ready,
                # with no timer: its select(0) would wait a turn of libev's loop instead.
                self._ready.set()
                timeout = None
            self.deadline = _FOREVER
            if timeout is not None:
                # To the next whole millisecond, as asyncio's own epoll selector rounds: the
                # timers due within it end one wait together, not one wait each.
                now = time.monotonic()
                self.deadline = math.ceil((now + timeout) * 1000) / 1000
                timeout = self.deadline - now
            found = list(super().select(timeout))
            # A first step that waited on gevent (sync I/O in a coroutine) ends before the
            # loop takes another: asyncio runs one task's step at a time.
            self.unstepped.wait()
            return found
        finally:
            self.parked = None
            events._set_running_loop(running)
            sys.set_asyncgen_hooks(*hooks)

    def register(self, fileobj: Any, events_: int, data: Any = None) -> Any:
        key = super().register(fileobj, events_, data)
        if self.parked is not None:
            self.wake()  # (from a first step: select() starts its watchers when it begins)
        return key

    def wake(self) -> None:
        """End a ``select()`` in progress (or make the next one return at once)."""
        ready = self._ready
        if not ready.is_set():
            ready.set()


def install() -> None:
    """Have the loops that ``asyncio.run()`` and ``asyncio.new_event_loop()`` make from now
    on wait with ``GreenletSelector`` (idempotent; only where gevent patched selectors)."""
    if selectors.DefaultSelector is GeventSelector:
        selectors.DefaultSelector = GreenletSelector  # type: ignore[misc]


class AsyncioLoop:
    """The asyncio event loop of one gevent hub, run by the ``gq-asyncio`` greenlet."""

    def __init__(self) -> None:
        self.selector = GreenletSelector()
        self.loop = asyncio.SelectorEventLoop(self.selector)
        self._run_callback = get_hub().loop.run_callback
        self.greenlet = gevent.Greenlet(self._run)
        self.greenlet.name = "gq-asyncio"
        # The watchdog names the coroutine that holds the loop, and the hub with it.
        watchdog.CURRENT[self.greenlet] = self.current
        self.greenlet.start()

    def current(self) -> object:
        """The task running on the loop now (None between tasks); for the watchdog."""
        return asyncio.current_task(self.loop)

    def _run(self) -> None:
        loop = self.loop
        while True:
            try:
                loop.run_forever()  # only loop.stop() (tests) ends it
                return
            except gevent.GreenletExit:
                raise
            except BaseException:  # noqa: BLE001 - a callback's failure must not end the loop
                log.exception("a callback failed on the asyncio loop; it runs on")

    def wait(self, awaitable: Awaitable[Any], name: str) -> Any:
        """Await ``awaitable`` on the loop from the calling greenlet (a handler): its
        result, or what it raised. The calling greenlet's context variables go with it."""
        waiter = Waiter()
        # Task() itself, not create_task(): the same task, one Python call less per job.
        task = asyncio.Task(_handed(awaitable, waiter, self._run_callback), loop=self.loop,
                            name=name)  # fmt: skip
        # The handler's job_timeout, for the watchdog to stop a coroutine that never awaits.
        if not watchdog.hand_over(gevent.getcurrent(), task):
            return self._outcome(task, waiter)
        try:
            return self._outcome(task, waiter)
        finally:
            watchdog.disarm(task)

    def _outcome(self, task: asyncio.Task[Any], waiter: Waiter) -> Any:
        if not self._first_step() or self._asleep_past_due():
            self.selector.wake()
        elif task.done():
            return task.result()  # (a coroutine that never waited: no hub turn at all)
        try:
            waiter.get()
        except BaseException:
            self._unwind(task)
            raise
        return task.result()

    def _first_step(self) -> bool:
        """Take the first step of the task just made (``Task()`` queued it last on the
        loop) here, in the handler greenlet, when the loop waits in ``select()``: its
        coroutine starts (and its timers count) now, not after every greenlet the hub
        runs before the loop's wake-up (a whole batch of hand-offs). Whether it did."""
        selector, loop = self.selector, self.loop
        hooks = selector.parked
        if hooks is None or not selector.unstepped.is_set():
            return False  # the loop is mid-step, or another first step is
        step = loop._ready.pop()  # type: ignore[attr-defined]
        running, own = events._get_running_loop(), sys.get_asyncgen_hooks()
        events._set_running_loop(loop)
        sys.set_asyncgen_hooks(*hooks)
        selector.unstepped.clear()
        try:
            step._run()
        finally:
            selector.unstepped.set()
            events._set_running_loop(running)
            sys.set_asyncgen_hooks(*own)
        return True

    def _asleep_past_due(self) -> bool:
        """Whether the loop, parked in ``select()``, would sleep past what a first step
        left it: callbacks to run now, or a timer due before its wait ends. Most first
        steps (an ``await`` of I/O or of a later timer) leave neither, and 1,000 of
        them then cost no wake-up at all."""
        loop: Any = self.loop
        if loop._ready:
            return True
        scheduled = loop._scheduled
        return bool(scheduled) and scheduled[0].when() < self.selector.deadline

    def _unwind(self, task: asyncio.Task[Any]) -> None:
        """The handler greenlet was interrupted: cancel the task, and wait (bounded) for
        the coroutine to end, so that a retry does not run beside its cleanup."""
        if not task.done():
            task.cancel()
            self.selector.wake()
            waiter = Waiter()
            # (A done callback: a task cancelled before its first step never runs _handed.)
            task.add_done_callback(lambda _task: self._run_callback(waiter.switch, None))
            with gevent.Timeout(UNWIND_SECONDS, False):
                waiter.get()
        if not task.done():
            log.warning("%s did not end within %.0f s of its cancellation; left running",
                        task, UNWIND_SECONDS)  # fmt: skip
        elif not task.cancelled():
            task.exception()  # retrieved, so asyncio does not log it as never retrieved


async def _handed(awaitable: Awaitable[Any], waiter: Waiter, run_callback: Any) -> Any:
    """The task's coroutine: ``awaitable``, then the handler resumed through the hub (a
    Waiter is switched from the hub) in the same step, where a done callback would take
    another turn of the loop. The task holds the outcome by the time the hub runs."""
    try:
        return await awaitable
    finally:
        run_callback(waiter.switch, None)


_LOOPS: dict[Any, AsyncioLoop] = {}


def get() -> AsyncioLoop:
    """This hub's (this thread's) loop, started on first use."""
    hub = get_hub()
    found = _LOOPS.get(hub)
    if found is None or found.greenlet.dead:
        install()
        found = _LOOPS[hub] = AsyncioLoop()
    return found


def wait(awaitable: Awaitable[Any], name: str) -> Any:
    """Await ``awaitable`` on this process's loop from a handler greenlet."""
    return get().wait(awaitable, name)


def awaited(result: object, job: Job) -> object:
    """``result``, or what it gives when it is an awaitable (awaited for ``job``)."""
    if result is not None and (type(result) is CoroutineType or isawaitable(result)):
        return get().wait(result, f"gq job {job.id}")
    return result
