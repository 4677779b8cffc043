"""How the processor runs one job of a dispatcher (``gq.App``): the ``Plan``.

A handler given to a consumer is a plain byte handler (``Callable[[gq.Job], object]``,
the fast path: no Plan per job) or a dispatcher, an object with ``plan(job) -> Plan``.
"""

from __future__ import annotations

from typing import Any, Callable

from gq.backoff import backoff
from gq.errors import Kill, Retry
from gq.options import ConsumerOptions


class Plan:
    """One job's run: ``run()`` returns its result, ``call(*args)``; the None fields fall
    back to the consumer's ``job_timeout``, ``job_max_attempts`` and ``job_max_backoff``.
    Read-only by convention: a dispatcher builds one for every job, and a slotted class
    with a plain ``__init__`` costs 40% of a frozen dataclass's five ``object.__setattr__``.
    ``args`` spares a task's Plan a ``functools.partial`` per job (its allocation and its
    call); the processor calls ``call(*args)`` itself."""

    __slots__ = ("call", "timeout", "max_attempts", "max_backoff", "task", "finish", "args")

    def __init__(
        self,
        run: Callable[..., object],
        timeout: float | None = None,
        max_attempts: int | None = None,
        max_backoff: float | None = None,
        task: str = "",
        finish: Any = None,
        args: tuple[Any, ...] = (),
    ) -> None:
        self.call = run
        self.timeout = timeout
        self.max_attempts = max_attempts
        self.max_backoff = max_backoff
        self.task = task
        #: A task job's ``gq.tasks.outcome.Finisher`` (it keeps a result or continues a workflow).
        self.finish = finish
        self.args = args

    def run(self) -> object:
        """The job's run: its result (an awaitable for an ``async def`` task)."""
        return self.call(*self.args)

    def __repr__(self) -> str:
        return (
            f"Plan(run={self.call!r}, timeout={self.timeout!r}, max_attempts="
            f"{self.max_attempts!r}, max_backoff={self.max_backoff!r}, task={self.task!r})"
        )


def retry_delay(
    attempt: int, exc: BaseException, plan: Plan | None, opts: ConsumerOptions
) -> float | None:
    """When a job that failed on ``attempt`` runs again (seconds from now), or None
    when it goes to dead: ``gq.Kill``, or no attempts left (the Plan's, else the
    consumer's). ``gq.Retry(after=)`` sets the delay, else the jittered backoff."""
    if isinstance(exc, Kill):
        return None
    planned = None if plan is None else plan.max_attempts
    if attempt >= (opts.job_max_attempts if planned is None else planned):
        return None
    if isinstance(exc, Retry) and exc.after is not None:
        return exc.after
    cap = opts.job_max_backoff if plan is None or plan.max_backoff is None else plan.max_backoff
    return backoff(attempt, cap)


def describe(exc: BaseException) -> str:
    """A failure as stored with its job: ``gq.Kill``'s reason, else the type and text."""
    if isinstance(exc, Kill):
        return exc.reason
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
