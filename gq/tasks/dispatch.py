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

import inspect
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

from gq.errors import EnvelopeError, Kill, UnknownTaskError
from gq.job import Job
from gq.tasks import envelope, progress, wire_opts
from gq.tasks.hooks import Attempt
from gq.tasks.joblog import CURRENT as _CURRENT
from gq.tasks.joblog import fields as log_fields
from gq.tasks.options import TaskOptions, wire
from gq.tasks.outcome import GATHER, OwnFinisher, OwnRecords, finisher, refused_finisher
from gq.worker.call import Plan

if TYPE_CHECKING:
    from gq.tasks.hooks import Hooks
    from gq.tasks.task import Task

log = logging.getLogger("gq.dispatch")

_MAGIC = envelope.MAGIC
_fields = envelope.fields
_own_call = envelope.own_call
#: The plan of a call read by its bytes: (job, args, the args' bytes) -> Plan.
_OwnPlan = Callable[[Job, list[Any], bytes], Plan]


@dataclass(frozen=True)
class CurrentJob:
    """What a task knows of its job: ``id``, ``attempt`` (0 on the first run),
    ``queue``, ``task`` (its name), ``headers`` and ``group`` (its tenant's line, None
    when it has none)."""

    id: str
    attempt: int
    queue: str
    task: str
    headers: Mapping[str, str]
    group: str | None = None

    def progress(self, fraction: float, note: str = "") -> None:
        """Report how far the task is: ``fraction`` from 0 to 1 and a short ``note``
        (at most 200 characters); a bad value raises ValueError or TypeError. Cheap in
        a loop: written at most every half second (gq.tasks.progress), shown by
        ``Result.progress()``, ``gq job`` and the dashboard while the job runs."""
        progress.report((self.queue, self.id, self.attempt), fraction, note)


def current_job() -> CurrentJob | None:
    """Inside a task, its job; None outside one."""
    found = _CURRENT.get()
    if found is None:
        return None
    job, fields = found
    return CurrentJob(job.id, job.attempt, job.queue, fields[0], fields[4], fields[3].get("group"))


class Dispatcher:
    """Plans the jobs of an app's tasks and raw handlers; ``now`` is the Redis clock
    (for ``expires``); ``hooks`` the app's ``before_job`` and ``after_job`` hooks."""

    def __init__(
        self,
        tasks: Mapping[str, Task[Any, Any]],
        raw: Mapping[str, Callable[[Job], object]],
        now: Callable[[], float],
        hooks: Hooks | None = None,
        gather: Callable[[Mapping[str, Any]], list[Any]] | None = None,
    ) -> None:
        hooked = hooks if hooks is not None and hooks.on_jobs() else None
        self._entries = {name: _Entry(task, now, hooked, gather) for name, task in tasks.items()}
        # The entries' plans of the calls with positional arguments only and no options,
        # or the task's own: by how their envelopes start, then end (envelope.own_call).
        self._own = {prefix: (suffix, plan) for entry in self._entries.values()
                     for prefix, suffix, plan in entry.own_shapes()}  # fmt: skip
        self._raw = dict(raw)

    def plan(self, job: Job) -> Plan:
        """How to run ``job`` (it must not be changed: the processor's own record)."""
        data = job.data
        if data[:4] != _MAGIC:
            return self._raw_plan(job)
        own = _own_call(data, self._own)
        if own is not None:  # most jobs: a known task, positional arguments, its own options
            return own[0](job, own[1], own[2])
        try:
            fields = _fields(data)
        except EnvelopeError as exc:
            raise Kill(f"cannot decode the task envelope: {exc}") from exc
        entry = self._entries.get(fields[0])
        try:
            if entry is None:
                raise UnknownTaskError(fields[0])
            return entry.plan(job, fields)
        except (Kill, UnknownTaskError) as exc:  # (expired, unbound, unknown: never runs)
            return _refused(job, fields, exc, None if entry is None else entry.keep)

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
        return Plan(handler, args=(copy,))


class _Entry:
    """One task, with its options resolved for the worker (task, then app)."""

    __slots__ = ("fn", "name", "check", "least", "most", "timeout", "retries", "backoff", "own",
                 "now", "runs", "hooks", "gather", "records", "keep")  # fmt: skip

    def __init__(
        self,
        task: Task[Any, Any],
        now: Callable[[], float],
        hooks: Hooks | None = None,
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
        # The opts every call of this task carries unless it sets its own (taskopts.wire),
        # when that is the same for every call (no expires, unique_for or group); else {}.
        self.own = _own_opts(task.options, now)
        # How long its jobs keep a result when their envelope does not say (docs/wire.md:
        # an absent key falls back to the task's own option), and how its own calls'
        # results are recorded, from their bytes (None: none kept).
        self.keep = task.options.result_ttl or None
        self.records = OwnRecords(self.name, self.keep) if self.keep else None
        self.now = now
        # An async def task's run is a coroutine, awaited by the worker on its asyncio loop
        # (gq.worker.asyncio_loop), with current_job() set inside it.
        coroutine = inspect.iscoroutinefunction(task.fn)
        self.runs = self.arun if coroutine else self.run
        # Chosen once: an app with no job hooks runs on the plain path, at no cost.
        self.hooks = hooks
        if hooks is not None:
            self.runs = self.ahooked if coroutine else self.hooked

    def own_shapes(self) -> list[tuple[bytes, bytes, _OwnPlan]]:
        """(prefix, suffix, plan) of the envelopes read by their bytes: a plain call's, and
        a call's that carries the task's own options, when it has some."""
        shapes: list[tuple[bytes, bytes, _OwnPlan]] = [
            (envelope.plain_prefix(self.name), envelope.own_suffix({}), self.plain_plan)
        ]
        if self.own:
            shapes.append((envelope.plain_prefix(self.name, True),
                           envelope.own_suffix(self.own), self.own_plan))  # fmt: skip
        return shapes

    def plain_plan(self, job: Job, args: list[Any], raw: bytes) -> Plan:
        """``plan`` for a plain call (positional arguments only, no opts, no headers);
        ``raw``: its args' bytes (its result, when the task keeps one, recorded from them:
        a producer that writes no opts gets the task's own result_ttl)."""
        if not self.least <= len(args) <= self.most:
            self._bind(args, {})
        fields: envelope.Fields = (self.name, args, {}, {}, {})
        records = self.records
        finish = None if records is None else OwnFinisher(job, fields, raw, records)
        return Plan(self.runs, self.timeout, self.retries, self.backoff, self.name, finish,
                    (job, fields))  # fmt: skip

    def own_plan(self, job: Job, args: list[Any], raw: bytes) -> Plan:
        """``plain_plan`` for a call whose opts are the task's own (its result_ttl, say):
        its result, if kept, recorded from its args' bytes ``raw``
        (gq.tasks.outcome.OwnFinisher)."""
        if not self.least <= len(args) <= self.most:
            self._bind(args, {})
        fields: envelope.Fields = (self.name, args, {}, dict(self.own), {})  # (hooks see it)
        records = self.records
        finish = None if records is None else OwnFinisher(job, fields, raw, records)
        return Plan(self.runs, self.timeout, self.retries, self.backoff, self.name, finish,
                    (job, fields))  # fmt: skip

    def plan(self, job: Job, fields: envelope.Fields) -> Plan:
        _, args, kwargs, opts, _ = fields
        # No options, or the task's own (a call with keyword arguments or headers): the
        # task's timeout, retries and backoff, without reading the options.
        if not opts or opts == self.own:
            self._bind(args, kwargs)
            finish = finisher(job, fields, self.keep) if opts or self.keep else None
            return Plan(self.runs, self.timeout, self.retries, self.backoff, self.name, finish,
                        (job, fields))  # fmt: skip
        timeout, retries, backoff = self._options(opts)
        if opts.get(GATHER) is not None:
            return self._callback_plan(job, fields, timeout, retries, backoff)
        self._bind(args, kwargs)
        return Plan(self.runs, timeout, retries, backoff, self.name,
                    finisher(job, fields, self.keep), (job, fields))  # fmt: skip

    def _bind(self, args: list[Any], kwargs: dict[str, Any]) -> None:
        if kwargs or not self.least <= len(args) <= self.most:  # (Binder's fast path)
            why = self.check(args, kwargs)
            if why is not None:
                raise Kill(f"task {self.name}: the arguments do not bind: {why}")

    def _callback_plan(
        self, job: Job, fields: envelope.Fields, timeout: Any, retries: Any, backoff: Any
    ) -> Plan:
        """A group's callback: the members' results, read when it runs, come first."""
        task, args, kwargs, opts, headers = fields
        gather, spec = self.gather, opts[GATHER]
        self._bind([None, *args], kwargs)  # (the results take the first place)
        if gather is None:
            raise Kill(f"task {self.name}: a group callback needs an app's worker")

        def run() -> object:
            return self.runs(job, (task, [gather(spec), *args], kwargs, opts, headers))

        return Plan(run, timeout, retries, backoff, self.name, finisher(job, fields, self.keep))

    def _options(self, opts: dict[str, Any]) -> tuple[Any, Any, Any]:
        """The envelope's timeout, retries and backoff, else the task's; every option
        checked first (gq.tasks.wire_opts: a bad one kills the job before it runs)."""
        wire_opts.check(self.name, opts, self.now)
        get = opts.get
        return (get("timeout", self.timeout), get("retries", self.retries),
                get("backoff", self.backoff))  # fmt: skip

    def run(self, job: Job, fields: envelope.Fields) -> object:
        token = _CURRENT.set((job, fields))
        try:
            # (**{} costs a dict per call: most tasks take positional arguments only)
            kwargs = fields[2]
            result = self.fn(*fields[1], **kwargs) if kwargs else self.fn(*fields[1])
        finally:
            _CURRENT.reset(token)
        if result is not None and not inspect.isawaitable(result):  # (awaited by the worker)
            self._keep(job, result)
        return result

    async def arun(self, job: Job, fields: envelope.Fields) -> object:
        token = _CURRENT.set((job, fields))
        try:
            result = await self.fn(*fields[1], **fields[2])
        finally:
            _CURRENT.reset(token)
        if result is not None:
            self._keep(job, result)
        return result

    def hooked(self, job: Job, fields: envelope.Fields) -> object:
        """``run`` between the app's job hooks (gq.tasks.hooks), inside the job's context."""
        assert self.hooks is not None
        token = _CURRENT.set((job, fields))
        try:
            call = partial(self.fn, *fields[1], **fields[2])
            result = self.hooks.run(Attempt(job, fields), call)
        finally:
            _CURRENT.reset(token)
        if result is not None and not inspect.isawaitable(result):
            self._keep(job, result)
        return result

    async def ahooked(self, job: Job, fields: envelope.Fields) -> object:
        """``arun`` between the app's job hooks."""
        assert self.hooks is not None
        token = _CURRENT.set((job, fields))
        try:
            call = partial(self.fn, *fields[1], **fields[2])
            result = await self.hooks.arun(Attempt(job, fields), call)
        finally:
            _CURRENT.reset(token)
        if result is not None:
            self._keep(job, result)
        return result

    def _keep(self, job: Job, result: object) -> None:
        if not envelope.encodable(result):
            # Not a failure: the task's work is done, and running it again would repeat
            # it. A task that keeps results records it as a failure of the result
            # (gq.tasks.outcome.Finisher.done).
            log.error("task %s job %s returned a value without a MessagePack form (%s): "
                      "not kept", self.name, job.id, type(result).__name__,
                      extra=log_fields(job.id, self.name, job.queue))  # fmt: skip


def _refused(job: Job, fields: envelope.Fields, exc: Exception, keep: float | None) -> Plan:
    """The plan of a job that cannot run: its run raises ``exc`` (the failure it was),
    with the Finisher its failure needs, so that its dead is written with its outcome and
    its group told (issue 31, defect 6), as a failure of a run is."""

    def refuse() -> object:
        raise exc

    return Plan(refuse, task=fields[0], finish=refused_finisher(job, fields, keep))


def _own_opts(options: TaskOptions, now: Callable[[], float]) -> dict[str, Any]:
    if options.expires is not None or options.unique_for is not None or options.group:
        return {}
    return wire(options, now, None)
