"""``gq.Task``: a function registered with ``@app.task``, and the ways to enqueue it.

``Task`` is generic in the function's parameters and return type (``ParamSpec``), so
``deliver.enqueue(1, 2)`` is a type error where ``deliver(url: str, ...)`` is declared,
and ``deliver.enqueue(...)`` is a ``Result[int]`` when ``deliver`` returns ``int``.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from typing import Any, Callable, Generic, Protocol, TypeVar, Union

from gq.tasks.options import Binder, TaskOptions, split
from gq.tasks.results import Result

if sys.version_info >= (3, 10):
    from typing import ParamSpec
else:  # pragma: no cover - Python 3.9
    from typing_extensions import ParamSpec

P = ParamSpec("P")
R = TypeVar("R")

When = Union[datetime, float, int]
Delay = Union[timedelta, float, int]


class Registry(Protocol):
    """What a task needs of its app (``gq.App``): enqueueing, and checking a queue name."""

    def _enqueue(self, call: Call[Any, Any], calls: Iterable[Any]) -> list[Result[Any]]: ...
    async def _aenqueue(self, call: Call[Any, Any], calls: Iterable[Any]) -> list[Result[Any]]: ...
    def check_queue(self, queue: str) -> str: ...


class Signature(Generic[R]):
    """A call of a task not yet enqueued (``task.s(...)``): ``enqueue()`` enqueues it;
    periodic entries (``app.periodic``) and workflows are made of them. In a chain, a step
    receives the previous step's value first, unless it is ``immutable`` (``task.si``)."""

    __slots__ = ("task", "args", "kwargs", "immutable")

    def __init__(
        self,
        task: Task[Any, R],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        immutable: bool = False,
    ) -> None:
        self.task = task
        self.args = args
        self.kwargs = kwargs
        self.immutable = immutable

    def enqueue(self) -> Result[R]:
        """Enqueue this call with its task's options."""
        return self.task.call().enqueue(*self.args, **self.kwargs)

    async def aenqueue(self) -> Result[R]:
        """``enqueue`` from asyncio code."""
        return await self.task.call().aenqueue(*self.args, **self.kwargs)

    def __repr__(self) -> str:
        args = [repr(a) for a in self.args] + [f"{k}={v!r}" for k, v in self.kwargs.items()]
        return f"{self.task.name}.{'si' if self.immutable else 's'}({', '.join(args)})"


class Call(Generic[P, R]):
    """A task with per-call options (``task.using(...)``): ``after`` (seconds or a
    timedelta from now, on the Redis clock), ``at`` (a datetime or unix seconds), ``id``,
    ``queue``, ``headers`` and every task option (``retries``, ``timeout``...)."""

    __slots__ = ("task", "options", "queue", "after", "at", "id", "headers")

    def __init__(
        self,
        task: Task[P, R],
        options: TaskOptions,
        queue: str,
        *,
        after: Delay | None = None,
        at: When | None = None,
        id: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        self.task = task
        self.options = options
        self.queue = queue
        self.after = after
        self.at = at
        self.id = id
        self.headers = dict(headers) if headers else None

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """Enqueue one call; ``TypeError`` (nothing written) if the arguments do not bind
        or a value has no MessagePack form."""
        return self.task.app._enqueue(self, [(args, kwargs)])[0]

    delay = enqueue

    def enqueue_many(self, calls: Iterable[Any]) -> list[Result[R]]:
        """Enqueue many calls in few round trips: each a tuple of positional arguments,
        or a ``task.s(...)`` signature. Every call is checked before the first is written."""
        return self.task.app._enqueue(self, [_call_of(self.task, c) for c in calls])

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """``enqueue`` from asyncio code (``redis.asyncio``; no gevent needed)."""
        return (await self.task.app._aenqueue(self, [(args, kwargs)]))[0]


def _call_of(task: Task[Any, Any], call: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(call, Signature):
        if call.task is not task:
            raise TypeError(f"a signature of {call.task.name} in enqueue_many of {task.name}")
        return call.args, call.kwargs
    if isinstance(call, (tuple, list)):
        return tuple(call), {}
    raise TypeError(f"enqueue_many takes tuples of arguments or {task.name}.s(...), not {call!r}")


class Task(Generic[P, R]):
    """A registered function: call it to run it here and now; ``enqueue`` (or ``delay``)
    to have a worker run it; ``using(...)`` for per-call options; ``s(...)`` for a
    signature."""

    def __init__(
        self, app: Registry, fn: Callable[P, R], name: str, queue: str, options: TaskOptions
    ) -> None:
        self.app = app
        self.fn = fn
        self.name = name
        self.queue = queue
        self.options = options
        self.binder = Binder(fn)
        self.__doc__ = fn.__doc__
        self.__wrapped__ = fn
        self._plain: Call[P, R] | None = None

    def __call__(self, *args: P.args, **kwargs: P.kwargs) -> R:
        return self.fn(*args, **kwargs)

    @property
    def positional_names(self) -> tuple[str, ...]:
        """The names of the parameters an argument may be given to by position, in order
        (``JobFilter.naming``: a filter by name matches a call by position)."""
        return self.binder.positional_names()

    def call(self) -> Call[P, R]:
        """The task with its own options, no per-call ones (built once)."""
        if self._plain is None:
            self._plain = Call(self, self.options, self.queue)
        return self._plain

    def enqueue(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """Enqueue a call for a worker; the job's ``Result``. ``TypeError`` (nothing is
        written) if the arguments do not bind or a value has no MessagePack form."""
        return self.call().enqueue(*args, **kwargs)

    delay = enqueue

    def enqueue_many(self, calls: Iterable[Any]) -> list[Result[R]]:
        """Enqueue many calls in few round trips (see ``Call.enqueue_many``)."""
        return self.call().enqueue_many(calls)

    async def aenqueue(self, *args: P.args, **kwargs: P.kwargs) -> Result[R]:
        """``enqueue`` from asyncio code."""
        return await self.call().aenqueue(*args, **kwargs)

    def using(
        self,
        *,
        after: Delay | None = None,
        at: When | None = None,
        id: str | None = None,
        queue: str | None = None,
        headers: Mapping[str, str] | None = None,
        **options: Any,
    ) -> Call[P, R]:
        """This task with per-call options: ``after``, ``at``, ``id``, ``queue``,
        ``headers`` and the task options (``retries``, ``timeout``, ``unique_for``...)."""
        return Call(
            self,
            split(options).over(self.options),
            self.app.check_queue(queue) if queue is not None else self.queue,
            after=after,
            at=at,
            id=id,
            headers=headers,
        )

    def s(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R]:
        """A signature: this call, not yet enqueued."""
        return Signature(self, args, kwargs)

    def si(self, *args: P.args, **kwargs: P.kwargs) -> Signature[R]:
        """An immutable signature: in a chain, it ignores the previous step's value."""
        return Signature(self, args, kwargs, immutable=True)

    def __repr__(self) -> str:
        return f"<gq.Task {self.name} queue={self.queue}>"
