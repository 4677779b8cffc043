"""Hooks on a ``gq.App`` (SPEC section 18): the one place integrations plug in.

- ``@app.on_enqueue``: called with an ``Enqueueing`` for every job a task enqueue is
  about to write, before its envelope is encoded (so it may add ``headers``);
- ``@app.before_job``: called with the ``Attempt`` of a task's job before it runs;
- ``@app.after_job``: called with the ``Attempt`` once it ran, with its ``outcome``,
  ``error``, ``result`` and ``duration``.

An ``on_enqueue`` or ``before_job`` hook may return a context manager: it is entered
at once and exited after the write (or the run), with the exception if there was one.
A hook's own failure is logged and never changes what becomes of the job: a broken
integration must neither lose a job nor fail one that ran. An app with no hooks runs
its jobs on the path it had before hooks existed (gq.tasks.dispatch picks it once per task).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Any, Callable

import gevent

from gq.errors import JobCancelled, Kill, RateLimited, Retry

log = logging.getLogger("gq.hooks")

Hook = Callable[[Any], Any]


class Enqueueing:
    """One job being enqueued: ``id``, ``queue``, ``task`` (its name), ``args``,
    ``kwargs``, and ``headers``, which a hook may change (they go into the envelope)."""

    __slots__ = ("id", "queue", "task", "args", "kwargs", "headers")

    def __init__(
        self,
        id: str,
        queue: str,
        task: str,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        headers: dict[str, str],
    ) -> None:
        self.id, self.queue, self.task = id, queue, task
        self.args, self.kwargs, self.headers = args, kwargs, headers

    def __repr__(self) -> str:
        return f"<gq.Enqueueing {self.task} id={self.id} queue={self.queue}>"


class Attempt:
    """One run of a task's job: ``id``, ``queue``, ``task``, ``attempt`` (0 on the
    first run), ``args``, ``kwargs``, ``headers``; once it ran (``after_job``), its
    ``outcome`` (see ``outcome_of``), ``error`` (what it raised, or None), ``result``
    and ``duration`` (seconds)."""

    __slots__ = ("id", "queue", "task", "attempt", "args", "kwargs", "headers",
                 "outcome", "error", "result", "duration")  # fmt: skip

    def __init__(self, job: Any, fields: tuple[Any, ...]) -> None:
        """``fields``: the envelope as gq.tasks.envelope.fields reads it, (task, args, kwargs,
        opts, headers)."""
        self.id, self.queue, self.attempt = job.id, job.queue, job.attempt
        self.task, self.args, self.kwargs, _, self.headers = fields
        self.outcome: str = "running"
        self.error: BaseException | None = None
        self.result: object = None
        self.duration = 0.0

    def __repr__(self) -> str:
        return f"<gq.Attempt {self.task} id={self.id} attempt={self.attempt} {self.outcome}>"


#: What a run's exception means: the user asked for it (retry, kill) or it was stopped.
_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (Retry, "retry"),
    (Kill, "kill"),
    (RateLimited, "rate_limited"),
    (JobCancelled, "cancelled"),
    (gevent.GreenletExit, "interrupted"),
)


def outcome_of(error: BaseException | None) -> str:
    """ "done" (no error), "retry" (``gq.Retry``), "kill" (``gq.Kill``),
    "rate_limited", "cancelled", "interrupted" (the worker stopped) or "failed" (any
    other exception, ``JobTimeout`` included)."""
    if error is None:
        return "done"
    for kind, name in _OUTCOMES:
        if isinstance(error, kind):
            return name
    return "failed"


_NOTHING: list[Any] = []  # (never appended to: the context managers of no hooks)


class Hooks:
    """An app's hooks, in registration order."""

    def __init__(self) -> None:
        self.enqueue: list[Hook] = []
        self.before: list[Hook] = []
        self.after: list[Hook] = []

    def on_jobs(self) -> bool:
        """Whether a job's run has hooks (else the dispatcher keeps its plain path)."""
        return bool(self.before or self.after)

    # -- the producer's side ---------------------------------------------------------------

    def enqueueing(self, queue: str, task: str) -> EnqueueRun | None:
        """The hooks of one enqueue call, or None when there are none."""
        return EnqueueRun(self.enqueue, queue, task) if self.enqueue else None

    # -- the worker's side -----------------------------------------------------------------

    def run(self, attempt: Attempt, call: Callable[[], object]) -> object:
        """``call()`` between the job hooks."""
        opened = self._before(attempt)
        started = time.monotonic()
        try:
            result = call()
        except BaseException as exc:
            self._after(attempt, opened, started, exc)
            raise
        self._after(attempt, opened, started, None, result)
        return result

    async def arun(self, attempt: Attempt, call: Callable[[], Any]) -> object:
        """``await call()`` between the job hooks (an ``async def`` task)."""
        opened = self._before(attempt)
        started = time.monotonic()
        try:
            result = await call()
        except BaseException as exc:
            self._after(attempt, opened, started, exc)
            raise
        self._after(attempt, opened, started, None, result)
        return result

    def _before(self, attempt: Attempt) -> list[Any]:
        if not self.before:
            return _NOTHING
        return [cm for cm in (_called(hook, attempt) for hook in self.before) if cm is not None]

    def _after(
        self,
        attempt: Attempt,
        opened: list[Any],
        started: float,
        error: BaseException | None,
        result: object = None,
    ) -> None:
        attempt.duration = time.monotonic() - started
        attempt.outcome, attempt.error, attempt.result = outcome_of(error), error, result
        if opened:
            close(opened, error)
        for hook in self.after:
            _called(hook, attempt)


class EnqueueRun:
    """The ``on_enqueue`` hooks of one enqueue call: ``stamp`` per job (before its
    envelope is encoded), ``close`` once the batch was written or refused."""

    __slots__ = ("hooks", "queue", "task", "opened")

    def __init__(self, hooks: list[Hook], queue: str, task: str) -> None:
        self.hooks, self.queue, self.task = hooks, queue, task
        self.opened: list[Any] = []

    def stamp(
        self, id: str, args: Sequence[Any], kwargs: Mapping[str, Any], headers: Any
    ) -> dict[str, str] | None:
        """The headers of job ``id`` once every hook saw it."""
        event = Enqueueing(id, self.queue, self.task, args, kwargs, dict(headers or {}))
        for hook in self.hooks:
            before = dict(event.headers)
            cm = _called(hook, event)
            if cm is not None:
                self.opened.append(cm)
            event.headers = _checked_headers(hook, event, before)
        return event.headers or None

    def close(self, error: BaseException | None) -> None:
        close(self.opened, error)


def _checked_headers(hook: Hook, event: Enqueueing, before: dict[str, str]) -> dict[str, str]:
    """The headers after ``hook``: one it set that is not str to str is dropped with a
    logged error (as a hook that raises changes nothing; docs/decisions.md), ``before``'s
    value kept; a map replaced by something else than a dict leaves ``before``."""
    headers: Any = event.headers
    if type(headers) is not dict:
        log.error("gq hook %r set the headers of job %s to a %s, not a dict: ignored",
                  hook, event.id, type(headers).__name__)  # fmt: skip
        return before
    for key in [k for k, v in headers.items() if type(k) is not str or type(v) is not str]:
        _drop_header(hook, event, headers, key, before)
    return headers


def _drop_header(
    hook: Hook, event: Enqueueing, headers: dict[Any, Any], key: Any, before: dict[str, str]
) -> None:
    log.error("gq hook %r set header %r of job %s (task %s) to %r: headers map str to str; "
              "dropped", hook, key, event.id, event.task, headers.pop(key))  # fmt: skip
    if key in before:
        headers[key] = before[key]


def _called(hook: Hook, event: Any) -> Any | None:
    """``hook(event)``, entered if it returned a context manager; None if it failed."""
    try:
        returned = hook(event)
        if returned is None or not hasattr(returned, "__exit__"):
            return None
        returned.__enter__()
        return returned
    except Exception:  # noqa: BLE001 - an integration's failure never fails the job
        log.exception("gq hook %r failed on %r", hook, event)
        return None


def close(opened: list[Any], error: BaseException | None) -> None:
    """Exit the context managers ``opened``, innermost first, with ``error``. What they
    return is ignored: a hook cannot swallow the failure of a job."""
    kind, tb = (type(error), error.__traceback__) if error is not None else (None, None)
    for cm in reversed(opened):
        try:
            cm.__exit__(kind, error, tb)
        except Exception:  # noqa: BLE001 - as in _called
            log.exception("gq hook %r failed on exit", cm)
