"""Testing code that uses gq tasks, with no Redis server and no gevent patching
(docs/testing.md has a pytest fixture to copy).

- ``eager(app)``: ``enqueue`` runs the task at once, in this thread, through the
  envelope (values come back as a worker sees them: tuples as lists); ``.get()`` on the
  Result returns its value or raises what it raised.
- ``worker(app)``: the app on an embedded server (fakeredis); ``drain()`` runs every job
  in this thread through gq's real scripts (fetch, ack, retry, kill), retries and
  scheduled jobs included without waiting for their time, and returns the outcomes.
  It fetches as a consumer with its options does (``concurrency`` jobs a batch), so
  groups take their fair turns within their limits, and ``current_job()`` says the
  job's queue, group and attempt as under a worker.

An ``async def`` task's coroutine is awaited to its end in both (SPEC section 15: never
acknowledged before it ran): on the worker's own asyncio loop (gq/worker/asyncio_loop.py),
or, when the caller already runs an event loop in this thread (an ``async def`` test),
on a loop of its own in a helper OS thread while the caller waits (the caller's loop
cannot run a coroutine to its end from inside one of its own callbacks).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import fakeredis

from gq import job as jobs
from gq.errors import EnvelopeError, GQError, JobCancelled, RateLimited
from gq.job import Job, MessageDecodeError
from gq.options import ConsumerOptions
from gq.store.outcomes import finish
from gq.store.tasks import TaskQueue
from gq.tasks import envelope
from gq.tasks.app import App
from gq.tasks.enqueuer import Batch
from gq.tasks.results import Result
from gq.worker import asyncio_loop
from gq.worker.call import Plan, describe, retry_delay

__all__ = ["Outcome", "Worker", "eager", "worker"]

#: drain() stops with an error after this many runs: a task that enqueues itself for ever.
MAX_RUNS = 100_000
_CONSUMER = "gq-testing"


@contextmanager
def eager(app: App) -> Iterator[App]:
    """Within the block, ``enqueue`` (and ``enqueue_many``, ``aenqueue``) run the task
    at once and return a Result whose ``get()`` gives its value."""
    previous = app.eager
    app.eager = lambda batch: _run_now(app, batch)
    try:
        yield app
    finally:
        app.eager = previous


def awaited(value: Any, job: Job) -> Any:
    """``value``, or what it gives when it is an awaitable (an ``async def`` task's run),
    awaited to its end: on the worker's loop, else (inside a running loop) in a thread."""
    if value is None or not inspect.isawaitable(value):
        return value
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio_loop.awaited(value, job)
    return _in_own_thread(value)


def _in_own_thread(awaitable: Awaitable[Any]) -> Any:
    """Run ``awaitable`` on a new loop in a real OS thread (not a gevent one, which would
    share this thread's running loop), blocking until it ends: its result or its error."""
    from gevent.monkey import get_original  # (gevent's originals: patched or not)

    start_thread = get_original("_thread", "start_new_thread")
    finished = get_original("_thread", "allocate_lock")()
    outcome: list[Any] = []

    async def main() -> Any:
        return await awaitable

    def run() -> None:
        try:
            outcome.append((asyncio.run(main()), None))
        except BaseException as exc:  # noqa: BLE001 - raised again in the caller
            outcome.append((None, exc))
        finally:
            finished.release()

    finished.acquire()
    start_thread(run, ())
    finished.acquire()
    value, error = outcome[0]
    if error is not None:
        raise error
    return value


def _run_now(app: App, batch: Batch) -> list[Result[Any]]:
    results: list[Result[Any]] = []
    queue, name = batch.call.queue, batch.call.task.name
    for job in batch.jobs:
        job.queue = queue
        try:
            value = awaited(app.plan(job).run(), job)
        except Exception as exc:  # noqa: BLE001 - .get() raises it
            results.append(Result(job.id, queue, name, error=exc))
        else:
            results.append(Result(job.id, queue, name, value))
    return results


def in_turns(fetched: list[tuple[str, bytes | None]]) -> list[tuple[str, bytes | None]]:
    """A batch in the order its jobs take turns, one of each group in turn (a worker
    starts them all at once; drain() runs them one after the other)."""
    lines: dict[Any, list[tuple[str, bytes | None]]] = {}
    for entry in fetched:
        lines.setdefault(_group_of(entry[1]), []).append(entry)
    return [line[i] for i in range(len(fetched)) for line in lines.values() if i < len(line)]


def _group_of(message: bytes | None) -> str | None:
    try:
        data = jobs.decode(message or b"").data
        return envelope.fields(data)[3].get("group") if envelope.is_envelope(data) else None
    except (MessageDecodeError, EnvelopeError):
        return None


@dataclass
class Outcome:
    """What became of one job in ``drain()``: ``status`` "done" or "failed" (dead),
    ``runs`` (how many times it ran), ``error`` (its last failure), ``value`` (what
    its last run returned)."""

    id: str
    queue: str
    task: str
    status: str = "done"
    runs: int = 0
    error: str | None = None
    value: Any = field(default=None, repr=False)


class Worker:
    """An app on an embedded Redis, its jobs run by ``drain()`` (see ``worker``)."""

    def __init__(self, app: App, **options: Any) -> None:
        self.app = app
        self.opts = ConsumerOptions(**options)
        self.server = fakeredis.FakeServer()
        self.client = fakeredis.FakeRedis(server=self.server)
        self._saved: tuple[Any, ...] = ()
        self._queues: dict[str, TaskQueue] = {}

    def __enter__(self) -> Worker:
        self._saved = self.app.connection()
        aclient = fakeredis.FakeAsyncRedis(server=self.server)
        self.app.connect(client=self.client, aclient=aclient)
        return self

    def __exit__(self, *exc: object) -> None:
        self.app.connect(*self._saved)

    def queue(self, name: str) -> TaskQueue:
        """Queue ``name`` on the embedded server (to look at what is left in it)."""
        if name not in self._queues:
            self._queues[name] = TaskQueue(self.client, name)
            self._queues[name].register(_CONSUMER)
        return self._queues[name]

    def drain(self) -> list[Outcome]:
        """Run every job of every queue the app serves or enqueued to, until none is
        left (retries and scheduled jobs at once); one Outcome per job, in the order
        of their first run."""
        outcomes: dict[tuple[str, str], Outcome] = {}
        runs = 0
        while True:
            ran = sum(self._round(name, outcomes) for name in self._names())
            runs += ran
            if not ran:
                return list(outcomes.values())
            if runs > MAX_RUNS:
                raise GQError(f"drain() ran {runs} jobs and the queues are not empty")

    def _names(self) -> list[str]:
        return list(dict.fromkeys([*self.app.queues, *self.app.enqueued_queues()]))

    def _round(self, name: str, outcomes: dict[tuple[str, str], Outcome]) -> int:
        queue = self.queue(name)
        queue.due_now()
        queue.enqueue_due(1000)
        # A real consumer's batch: the fetch's fair turns between groups (and their
        # limits) then decide the order, as they do a worker's.
        fetched = queue.fetch(_CONSUMER, self.opts.processor_concurrency)
        for job_id, message in in_turns(fetched):
            self._run(queue, job_id, message, outcomes)
        return len(fetched)

    def _run(
        self,
        queue: TaskQueue,
        job_id: str,
        message: bytes | None,
        outcomes: dict[tuple[str, str], Outcome],
    ) -> None:
        name = queue.keys.name
        outcome = outcomes.setdefault((name, job_id), Outcome(job_id, name, ""))
        outcome.runs += 1
        try:
            job = jobs.decode(message or b"")
        except MessageDecodeError as exc:
            self._dead(queue, Job(job_id), None, outcome, f"cannot decode: {exc}")
            return
        job.queue = name
        plan: Plan | None = None
        try:
            plan = self.app.plan(job)
            outcome.task = plan.task
            value = outcome.value = awaited(plan.run(), job)
        except KeyboardInterrupt:
            raise
        except BaseException as exc:  # noqa: BLE001 - the task's failure, whatever it raised
            self._failed(queue, job, plan, exc, outcome)
        else:
            outcome.status, outcome.error = "done", None
            if plan.finish is not None:  # its result and a workflow's next step, as a worker
                finish(queue, _CONSUMER, [(job.id, plan.finish.done(value))])
            else:
                queue.ack(_CONSUMER, [job.id])

    def _failed(
        self, queue: TaskQueue, job: Job, plan: Plan | None, exc: BaseException, outcome: Outcome
    ) -> None:
        if isinstance(exc, (RateLimited, JobCancelled)):
            # As the processor: rescheduled with no attempt charged; acknowledged.
            if isinstance(exc, RateLimited):
                queue.retry(_CONSUMER, job.id, jobs.encode(job), 0.0)
            else:
                queue.ack(_CONSUMER, [job.id])
            return
        reason = describe(exc)
        outcome.error = reason
        delay = retry_delay(job.attempt, exc, plan, self.opts)
        updated = Job(job.id, job.data, job.attempt + 1)
        if delay is None:
            kept = None if plan is None or plan.finish is None else plan.finish.failed(reason)
            self._dead(queue, updated, jobs.encode(updated, error=reason), outcome, reason, kept)
        else:
            outcome.status = "retried"
            queue.retry(_CONSUMER, job.id, jobs.encode(updated, error=reason), delay)

    def _dead(
        self,
        queue: TaskQueue,
        job: Job,
        message: bytes | None,
        outcome: Outcome,
        reason: str,
        kept: Any = None,
    ) -> None:
        outcome.status, outcome.error = "failed", reason
        opts = self.opts
        queue.kill(_CONSUMER, job.id, message, dead_max_jobs=opts.dead_max_jobs,
                   dead_max_age=opts.dead_max_age, outcome=kept)  # fmt: skip


@contextmanager
def worker(app: App, **options: Any) -> Iterator[Worker]:
    """The app on an embedded Redis for the block; ``drain()`` runs its jobs here.
    ``options`` are consumer options (``job_max_attempts``...), the worker's flags."""
    with Worker(app, **options) as running:
        yield running
