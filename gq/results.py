"""``gq.Result``: the handle ``Task.enqueue`` returns.

Minimal for now: the job's ``id``, ``queue`` and ``task``. Results are not kept yet (SPEC
section 16 adds status and ``get()`` on Redis); under ``gq.testing.eager`` the task ran
at once and ``get()`` returns its value.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

from gq.errors import GQError

R = TypeVar("R")

_MISSING: Any = object()


class ResultUnavailable(GQError):
    """``Result.get()`` on a job whose result gq does not keep (yet)."""


class Result(Generic[R]):
    """A job that was enqueued: ``id``, ``queue``, ``task``; ``get()`` its return value
    where it is known (``gq.testing.eager``)."""

    __slots__ = ("id", "queue", "task", "_value", "_error")

    def __init__(
        self, id: str, queue: str, task: str, value: Any = _MISSING, error: Any = None
    ) -> None:
        self.id = id
        self.queue = queue
        self.task = task
        self._value = value
        self._error: BaseException | None = error

    def get(self) -> R:
        """The task's return value (raising what it raised) when it ran eagerly;
        ``ResultUnavailable`` otherwise: results are not kept in Redis yet."""
        if self._error is not None:
            raise self._error
        if self._value is _MISSING:
            raise ResultUnavailable(
                f"job {self.id} of task {self.task}: gq does not keep results yet "
                "(only gq.testing.eager runs a task at enqueue and knows its value)"
            )
        return cast(R, self._value)

    def __repr__(self) -> str:
        return f"Result(id={self.id!r}, queue={self.queue!r}, task={self.task!r})"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Result):
            return NotImplemented
        return (self.id, self.queue, self.task) == (other.id, other.queue, other.task)

    def __hash__(self) -> int:
        return hash((self.id, self.queue, self.task))
