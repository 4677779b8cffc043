"""``gq.Result``: the handle ``Task.enqueue`` returns: ``status()``, ``state()`` (status,
attempt, last error, group and times in one look), ``times()``, ``progress()``,
``get(timeout)``, ``cancel()``, each with its asyncio form (``astatus()``, ``astate()``,
``atimes()``, ``aprogress()``, ``aget()``, ``acancel()``).

A task that keeps results (``result_ttl``) has its outcome written under gq's own keys
by the script that acknowledges or kills its job; ``get()`` waits for it without
polling (gq.tasks.waiting) and reads it once. Under ``gq.testing.eager`` the task ran at once
and the Result holds its value.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from typing import Any, Callable, Generic, Protocol, TypeVar, cast

from gq import job as jobs
from gq.errors import ResultUnavailable, TaskFailed
from gq.store.base import ScriptedQueue
from gq.store.keys import QueueKeys
from gq.store.outcomes import State, read_state, status_of, wait_for
from gq.tasks import waiting
from gq.tasks.ids import id_time
from gq.tasks.jobview import JobState, JobTimes, progress_of, state_of, times_of


class App(Protocol):
    """What a Result needs of its ``gq.App``: the store of a queue."""

    def _store(self, queue: str) -> tuple[Any, Any]: ...

R = TypeVar("R")
T = TypeVar("T")

_MISSING: Any = object()
# A get() without a timeout is marked as waiting this long (renewed by nothing: its
# looks still see the outcome after the mark is dropped).
_FOREVER = 86400.0

__all__ = ["Result", "ResultUnavailable", "TaskFailed"]

# (done, value) or raise: one look at Redis for what a waiter waits for.
Check = Callable[[], "tuple[bool, Any]"]


class Result(Generic[R]):
    """A job that was enqueued: ``id``, ``queue``, ``task``; its status and outcome."""

    __slots__ = ("id", "queue", "task", "_value", "_error", "_app", "_keeps")

    def __init__(
        self,
        id: str,
        queue: str,
        task: str,
        value: Any = _MISSING,
        error: Any = None,
        *,
        app: App | None = None,
        keeps: bool | None = None,
    ) -> None:
        self.id = id
        self.queue = queue
        self.task = task
        self._value = value
        self._error: BaseException | None = error
        self._app = app
        self._keeps = keeps  # whether the job keeps a result; None: not known here

    def status(self) -> str:
        """"scheduled", "retrying" (backing off after a failed attempt), "ready",
        "running", "done", "failed" (in dead) or "missing"."""
        if self._known():
            return "failed" if self._error is not None else "done"
        store = self._store(self.queue)
        return status_of(store, read_state(store, self.id), self.id)

    async def astatus(self) -> str:
        """``status`` from asyncio code (Redis is read off the event loop)."""
        return await off_loop(self.status)

    def state(self) -> JobState:
        """Its status, attempt, last error, group and times, read in one look (a status
        endpoint's read; ``status`` is "retrying" while it backs off after an error)."""
        if self._known():
            error = None if self._error is None else f"{type(self._error).__name__}: {self._error}"
            return JobState(self.status(), 0, error, None, self.times())
        return state_of(self._store(self.queue), self.id)

    async def astate(self) -> JobState:
        """``state`` from asyncio code."""
        return await off_loop(self.state)

    def progress(self) -> tuple[float, str] | None:
        """The last ``(fraction, note)`` its task reported (``current_job().progress``)
        while it runs; None before it runs, once it ended, or when it reported none."""
        if self._known():
            return None
        state = self.state()
        return progress_of(self._store(self.queue), self.id, state.status, state.attempt)

    async def aprogress(self) -> tuple[float, str] | None:
        """``progress`` from asyncio code."""
        return await off_loop(self.progress)

    @property
    def attempt(self) -> int:
        """The attempt it is at or ended in, from 0 (1 while it backs off after one error)."""
        return self.state().attempt

    @property
    def last_error(self) -> str | None:
        """The error of its last failed attempt ("Type: text"), None when none failed."""
        return self.state().last_error

    async def atimes(self) -> JobTimes:
        """``times`` from asyncio code."""
        return await off_loop(self.times)

    async def acancel(self) -> bool:
        """``cancel`` from asyncio code."""
        return await off_loop(self.cancel)

    def times(self) -> JobTimes:
        """When the job was enqueued, first and last started, and finished (JobTimes; the
        starts and the end are known once it kept a result, None where unknown)."""
        if self._app is None:
            return JobTimes(id_time(self.id), None, None, None)
        return times_of(read_state(self._store(self.queue), self.id), self.id)

    def get(self, timeout: float | None = None) -> R:
        """The return value; ``TaskFailed`` if the job ended in dead (or its value could
        not be kept); ``TimeoutError`` with no outcome after ``timeout`` seconds;
        ``ResultUnavailable`` if the task keeps no results or the id is unknown here."""
        if self._known():
            return self._eager()
        self._check_keeps()
        return cast(R, wait(self._app_of(), [(self.queue, [self.id])], self._look, timeout))

    async def aget(self, timeout: float | None = None) -> R:
        """``get`` from asyncio code: the event loop runs on while it waits."""
        if self._known():
            return self._eager()
        self._check_keeps()
        return cast(R, await await_(self._app_of(), [(self.queue, [self.id])], self._look, timeout))

    def cancel(self) -> bool:
        """Cancel the job (gq.Queue.cancel): whether it was found ready, scheduled or running."""
        from gq.store.admin import QueueAdmin

        store = self._store(self.queue)
        return bool(QueueAdmin(store.client, self.queue).cancel([self.id])[0])

    def _look(self) -> tuple[bool, Any]:
        return look(self._store(self.queue), self.id, self.task, self._keeps)

    def _known(self) -> bool:
        return self._value is not _MISSING or self._error is not None

    def _eager(self) -> R:
        if self._error is not None:
            raise self._error
        return cast(R, self._value)

    def _check_keeps(self) -> None:
        if self._keeps is False:
            raise ResultUnavailable(
                f"job {self.id} of task {self.task}: the task keeps no results; give it "
                "result_ttl= (on @app.task, gq.App or .using()) to get() them"
            )

    def _app_of(self) -> App:
        if self._app is None:
            raise ResultUnavailable(f"job {self.id}: this Result has no app to read from")
        return self._app

    def _store(self, queue: str) -> ScriptedQueue:
        store: ScriptedQueue = self._app_of()._store(queue)[0]
        return store

    def __repr__(self) -> str:
        return f"Result(id={self.id!r}, queue={self.queue!r}, task={self.task!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return (self.id, self.queue, self.task) == (other.id, other.queue, other.task)

    def __hash__(self) -> int:
        return hash((self.id, self.queue, self.task))


def look(store: ScriptedQueue, job_id: str, task: str, keeps: bool | None) -> tuple[bool, Any]:
    """One look at a job: (True, its value) when done; raises when it failed or is
    unknown; (False, None) while it is on its way."""
    state = read_state(store, job_id)
    return settled(state, store.keys.name, job_id, task, keeps)


def settled(
    state: State, queue: str, job_id: str, task: str, keeps: bool | None
) -> tuple[bool, Any]:
    record = state.record
    if record is not None:
        if record.status == "done" and record.error is None:
            return True, record.value
        failed = TaskFailed(job_id, record.task or task, record.error or "", record.status)
        failed.traceback = record.traceback
        raise failed
    if state.dead:
        error = jobs.decode_error(state.message) if state.message else None
        raise TaskFailed(job_id, task, error or "in dead", "failed")
    if state.message is None:
        why = "its task keeps no results (result_ttl)" if keeps is None else "cancelled"
        raise ResultUnavailable(
            f"job {job_id}: gq knows nothing of it on queue {queue}: never enqueued there "
            f"(an id of another queue or app?), {why}, or its result expired"
        )
    return False, None


async def off_loop(read: Callable[[], T]) -> T:
    """``read()`` (blocking redis-py) on the loop's executor: the one implementation of a
    read serves both forms, and the event loop runs on meanwhile."""
    return await asyncio.get_running_loop().run_in_executor(None, read)


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _left(deadline: float | None, what: list[tuple[str, list[str]]]) -> float:
    if deadline is None:
        return waiting.LOOK
    left = deadline - time.monotonic()
    if left <= 0:
        names = ", ".join(name for _, names in what for name in names[-1:])
        raise TimeoutError(f"no outcome for {names} yet")
    return min(left, waiting.LOOK)


def _watch(app: App, what: list[tuple[str, list[str]]], wake: waiting.Wake,
           timeout: float | None) -> Callable[[], None]:  # fmt: skip
    """Subscribe ``wake`` to the outcomes of ``what`` and mark them as waited for."""
    store = app._store(what[0][0])[0]
    sub = waiting.subscriber(store.client)
    stops = [sub.watch(QueueKeys(queue).channel, names, wake) for queue, names in what]
    for queue, names in what:
        wait_for(app._store(queue)[0], names, _FOREVER if timeout is None else timeout)

    def stop() -> None:
        for unwatch in stops:
            unwatch()

    return stop


def wait(app: App, what: list[tuple[str, list[str]]], check: Check, timeout: float | None) -> Any:
    """Wait (threads, gevent) until ``check`` says done (its value) or raises, waking on
    the published outcomes of ``what`` ((queue, names) pairs) and looking every LOOK s."""
    deadline = _deadline(timeout)
    done, value = check()
    if done:
        return value
    woken = threading.Event()
    stop = _watch(app, what, woken.set, timeout)
    try:
        while True:
            woken.clear()
            done, value = check()
            if done:
                return value
            woken.wait(_left(deadline, what))
    finally:
        stop()


async def await_(app: App, what: list[tuple[str, list[str]]], check: Check,
                 timeout: float | None) -> Any:  # fmt: skip
    """``wait`` from asyncio code: Redis is read off the loop, the wake comes through it."""
    loop = asyncio.get_running_loop()
    deadline = _deadline(timeout)
    woken = asyncio.Event()
    def wake() -> None:
        loop.call_soon_threadsafe(woken.set)

    stop = await loop.run_in_executor(None, _watch, app, what, wake, timeout)
    try:
        while True:
            woken.clear()
            done, value = await loop.run_in_executor(None, check)
            if done:
                return value
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(woken.wait(), _left(deadline, what))
    finally:
        stop()
