"""The dispatcher: how a worker of a ``gq.App`` runs one job (``plan(job) -> Plan``).

The envelope is decoded once, the task looked up once per job by name, the arguments
checked against its signature, and the options of the envelope (else the task's, else
the worker's flags) handed to the processor in the ``Plan``. What cannot run says why:

- an envelope that does not decode, arguments that do not bind, an expired job:
  ``gq.Kill`` (dead at once, with the reason);
- a task this worker does not know: ``UnknownTaskError``, an ordinary failure, retried
  with the backoff (a newer worker of a rolling deploy may know it), then dead.
"""

from __future__ import annotations

import contextvars
import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from gq import envelope
from gq.errors import EnvelopeError, Kill, UnknownTaskError
from gq.job import Job
from gq.outcome import GATHER, finisher
from gq.worker.call import Plan

if TYPE_CHECKING:
    from gq.task import Task

log = logging.getLogger("gq.dispatch")

_MAGIC = envelope.MAGIC
_decode = envelope.decode
# The job a task runs for, per greenlet or thread (greenlet >= 1.0 gives each greenlet
# its own contextvars context).
_CURRENT: contextvars.ContextVar[tuple[Job, envelope.Envelope] | None] = contextvars.ContextVar(
    "gq_current_job", default=None
)


@dataclass(frozen=True)
class CurrentJob:
    """What a task knows of its job: ``id``, ``attempt`` (0 on the first run),
    ``queue``, ``task`` (its name) and ``headers``."""

    id: str
    attempt: int
    queue: str
    task: str
    headers: Mapping[str, str]


def current_job() -> CurrentJob | None:
    """Inside a task, its job; None outside one."""
    found = _CURRENT.get()
    if found is None:
        return None
    job, env = found
    return CurrentJob(job.id, job.attempt, job.queue, env.task, env.headers)


class Dispatcher:
    """Plans the jobs of an app's tasks and raw handlers; ``now`` is the Redis clock
    (for ``expires``)."""

    def __init__(
        self,
        tasks: Mapping[str, Task[Any, Any]],
        raw: Mapping[str, Callable[[Job], object]],
        now: Callable[[], float],
        gather: Callable[[Mapping[str, Any]], list[Any]] | None = None,
    ) -> None:
        self._entries = {name: _Entry(task, now, gather) for name, task in tasks.items()}
        self._raw = dict(raw)

    def plan(self, job: Job) -> Plan:
        """How to run ``job`` (it must not be changed: the processor's own record)."""
        data = job.data
        if data[:4] != _MAGIC:
            return self._raw_plan(job)
        try:
            env = _decode(data)
        except EnvelopeError as exc:
            raise Kill(f"cannot decode the task envelope: {exc}") from exc
        entry = self._entries.get(env.task)
        if entry is None:
            raise UnknownTaskError(env.task)
        return entry.plan(job, env)

    def _raw_plan(self, job: Job) -> Plan:
        handler = self._raw.get(job.queue)
        if handler is None:
            raise Kill(
                f"not a task envelope (no \\x00gqt prefix), and queue {job.queue} has no "
                "raw handler (@app.raw)"
            )
        # A copy: what the handler does to its Job must not change what is stored.
        copy = Job(job.id, job.data, job.attempt)
        copy.queue = job.queue
        return Plan(partial(handler, copy))


class _Entry:
    """One task, with its options resolved for the worker (task, then app)."""

    __slots__ = ("fn", "name", "check", "least", "most", "timeout", "retries", "backoff", "now",
                 "runs", "gather")  # fmt: skip

    def __init__(
        self,
        task: Task[Any, Any],
        now: Callable[[], float],
        gather: Callable[[Mapping[str, Any]], list[Any]] | None = None,
    ) -> None:
        self.gather = gather
        self.fn = task.fn
        self.name = task.name
        self.check = task.binder.check
        self.least, self.most = task.binder.bounds()
        self.timeout = task.options.timeout
        self.retries = task.options.retries
        self.backoff = task.options.backoff
        self.now = now
        # An async def task's run is a coroutine, awaited by the worker on its asyncio loop
        # (gq.worker.asyncio_loop), with current_job() set inside it.
        self.runs = self.arun if inspect.iscoroutinefunction(task.fn) else self.run

    def plan(self, job: Job, env: envelope.Envelope) -> Plan:
        opts = env.opts
        timeout, retries, backoff = self.timeout, self.retries, self.backoff
        finish = None
        if opts:
            expires = opts.get("expires")
            if expires is not None and _number(self.name, "expires", expires) <= self.now():
                raise Kill("expired")
            timeout = _number(self.name, "timeout", opts.get("timeout", timeout))
            retries = _count(self.name, opts.get("retries", retries))
            backoff = _number(self.name, "backoff", opts.get("backoff", backoff))
            if opts.get(GATHER) is not None:
                return self._callback_plan(job, env, timeout, retries, backoff)
            finish = finisher(job, env)
        self._bind(env.args, env.kwargs)
        return Plan(partial(self.runs, job, env), timeout, retries, backoff, self.name, finish)

    def _bind(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        if kwargs or not self.least <= len(args) <= self.most:  # (Binder's fast path)
            why = self.check(args, kwargs)
            if why is not None:
                raise Kill(f"task {self.name}: the arguments do not bind: {why}")

    def _callback_plan(
        self, job: Job, env: envelope.Envelope, timeout: Any, retries: Any, backoff: Any
    ) -> Plan:
        """A group's callback: the members' results, read when it runs, come first."""
        gather, spec = self.gather, env.opts[GATHER]
        self._bind([None, *env.args], env.kwargs)  # (the results take the first place)
        if gather is None:
            raise Kill(f"task {self.name}: a group callback needs an app's worker")

        def run() -> object:
            called = envelope.Envelope(env.task, [gather(spec), *env.args], env.kwargs,
                                       env.opts, env.headers)  # fmt: skip
            return self.runs(job, called)

        return Plan(run, timeout, retries, backoff, self.name, finisher(job, env))

    def run(self, job: Job, env: envelope.Envelope) -> object:
        token = _CURRENT.set((job, env))
        try:
            result = self.fn(*env.args, **env.kwargs)
        finally:
            _CURRENT.reset(token)
        if result is not None and not inspect.isawaitable(result):  # (awaited by the worker)
            self._keep(job, result)
        return result

    async def arun(self, job: Job, env: envelope.Envelope) -> object:
        token = _CURRENT.set((job, env))
        try:
            result = await self.fn(*env.args, **env.kwargs)
        finally:
            _CURRENT.reset(token)
        if result is not None:
            self._keep(job, result)
        return result

    def _keep(self, job: Job, result: object) -> None:
        if not envelope.encodable(result):
            # Not a failure: the task's work is done, and running it again would repeat
            # it. A task that keeps results records it as a failure of the result
            # (gq.outcome.Finisher.done).
            log.error("task %s job %s returned a value without a MessagePack form (%s): "
                      "not kept", self.name, job.id, type(result).__name__)  # fmt: skip


def _number(task: str, name: str, value: Any) -> Any:
    if value is None or (type(value) in (int, float) and value > 0):
        return value
    raise Kill(f"task {task}: option {name} is {value!r}, not a positive number")


def _count(task: str, value: Any) -> Any:
    if value is None or (type(value) is int and value >= 0):
        return value
    raise Kill(f"task {task}: option retries is {value!r}, not an int >= 0")
