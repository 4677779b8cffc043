"""Running handlers: the local buffer, the handler pool, and the outcome of each job
(done, retried, killed, cancelled, rate limited). Acknowledgements are gq/worker/acker.py's.

A job is acknowledged only after its handler returned (at-least-once): running a job
twice is better than losing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from inspect import isawaitable
from types import CoroutineType
from typing import Any, Callable, cast

import gevent
from gevent.event import Event
from gevent.queue import Queue

from gq import job as jobs
from gq.errors import (
    AckJobError,
    GQError,
    JobCancelled,
    JobTimeout,
    Kill,
    KillJobError,
    RateLimited,
    RetryJobError,
)
from gq.job import Job
from gq.options import ConsumerOptions
from gq.store.jobs import RedisQueue
from gq.worker import asyncio_loop, watchdog
from gq.worker.acker import Acker, not_owned, persist
from gq.worker.call import Plan, describe, retry_delay
from gq.worker.handler_checks import GreenletExitRaised
from gq.worker.planned import PlannedRuns, planner_of
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.processor")

Handler = Callable[[Job], object]


@dataclass
class Stats:
    """Counters of one consumer run, read by the CLI's periodic report."""

    done: int = 0
    failed: int = 0
    retried: int = 0
    killed: int = 0
    cancelled: int = 0
    rate_limited: int = 0
    started: float = field(default_factory=lambda: gevent.get_hub().loop.now())


class Processor(PlannedRuns):
    """Runs buffered jobs on at most ``processor_concurrency`` handler greenlets.

    The handlers are long-lived worker greenlets that take jobs from ``buffer`` one after
    another, started on demand up to ``processor_concurrency`` and kept for the run: a
    greenlet per job (``gevent.pool.Pool.spawn``) cost more than a noop handler itself.
    So at most ``processor_concurrency`` handlers run at once, and ``buffer`` holds the
    jobs fetched but not started, at most ``poller_buffer_size`` of them. A worker takes
    a job and starts its handler without yielding in between, so a job is either in
    ``buffer`` (and given back at a graceful stop) or running.
    """

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        handler: Handler,
        on_fatal: Callable[[GQError], None],
        context: str,
        recorders: dict[str, Recorder] | None = None,
    ) -> None:
        self._queues = queues
        self._consumer_id = consumer_id
        self._opts = opts
        self._handler = handler
        self._planner = planner_of(handler)
        # One per queue (its jobs' outcomes); the handlers and the buffer are the consumer's,
        # read by the first queue's only, so that the gauges per queue add up.
        self.recorders = recorders if recorders is not None else {q: Recorder(q) for q in queues}
        self._first = next(iter(queues))
        self.recorder.watch(self)
        self._on_fatal = on_fatal
        self._context = context
        self.buffer: Queue[Job] = Queue()
        self.workers: list[gevent.Greenlet] = []
        self.running = 0  # handlers running now
        self._waiting = 0  # workers blocked on an empty buffer
        self._room = _set_event()  # set when the buffer has room for the poller
        self._quiet = _set_event()  # set when no handler runs
        # Per queue (two may hold one id), the jobs held here: buffered, running, or waiting
        # for their outcome's write (for Poller._reconcile after a lost reply, and cancels).
        self.held: dict[str, set[str]] = {name: set() for name in queues}
        self._abandoned = False  # a forced stop: handlers are being killed
        # What each handler worker's handler runs now, for cancels.
        self._slots: dict[gevent.Greenlet, _Slot] = {}
        self.acker = Acker(queues, consumer_id, opts, self._release, on_fatal, context)
        self.stats = Stats()

    @property
    def recorder(self) -> Recorder:
        """The first queue's recorder, which reads the handlers running and the buffer."""
        return self.recorders[self._first]

    @recorder.setter
    def recorder(self, recorder: Recorder) -> None:
        self.recorders[self._first] = recorder
        recorder.watch(self)

    def _release(self, done: list[Job]) -> None:
        # A batch is of one queue: the acker groups them by queue, a fetch carries one's.
        held = self.held[done[0].queue]
        for job in done:
            held.discard(job.id)
        self.recorders[done[0].queue].done(len(done))

    def buffered(self) -> int:
        """Jobs fetched and not started."""
        return int(self.buffer.qsize())

    def wait_for_room(self, room: Callable[[], int]) -> None:
        """Wait until ``room()`` (the poller's measure) is positive; it can only grow when
        a handler takes a job from the buffer."""
        while not room():
            self._room.clear()
            self._room.wait()

    def holds(self) -> bool:
        """Whether this process holds any job."""
        return any(self.held.values())

    def stray(self, queue: str, owned: set[str]) -> set[str]:
        """Of ``owned`` (``queue``'s in-flight set), the ids this process does not hold."""
        return owned - self.held[queue]

    def put(self, jobs_: list[Job]) -> None:
        """Buffer fetched jobs (of one queue: one fetch's), and start workers for those no
        idle worker will take."""
        if not jobs_:
            return
        buffer = self.buffer
        held = self.held[jobs_[0].queue]
        for job in jobs_:
            held.add(job.id)
            buffer.put_nowait(job)
        self._start_workers()

    def _start_workers(self) -> None:
        if self._abandoned:
            return
        buffer = self.buffer
        wanted = min(
            buffer.qsize() - self._waiting,
            self._opts.processor_concurrency - len(self.workers),
        )
        for _ in range(wanted):
            worker = gevent.Greenlet(self._work)
            worker.name = f"gq-handler-{len(self.workers)}"
            worker.link(self._worker_ended)
            self.workers.append(worker)
            worker.start()

    def run_acker(self) -> None:
        """The acknowledging greenlet's body."""
        self.acker.run()

    def abandon(self) -> list[gevent.Greenlet]:
        """The handler greenlets, for a forced stop to kill: from now on a GreenletExit
        in a handler ends it and leaves its job in flight, and no worker is replaced."""
        self._abandoned = True
        return list(self.workers)

    def _worker_ended(self, worker: gevent.Greenlet) -> None:
        self.workers.remove(worker)
        self._slots.pop(worker, None)
        if worker.successful() or isinstance(worker.exception, gevent.GreenletExit):
            # Killed from outside (a library's kill of "the current greenlet" between
            # jobs): replaced, so that the consumer keeps processor_concurrency handlers.
            self._start_workers()
            return
        # execute() catches every handler failure, so this is a bug in gq: stop rather
        # than run on with fewer handlers than processor_concurrency and nobody knowing.
        error = GQError(f"a handler worker crashed: {worker.exception!r}")
        error.__cause__ = worker.exception
        self._on_fatal(error)

    def take_buffered(self) -> list[Job]:
        """Empty the buffer (to give its jobs back at a stop): they were never started."""
        taken = []
        while not self.buffer.empty():
            taken.append(self.buffer.get_nowait())
        return taken

    def drop_buffered(self, keep: Callable[[Job], bool]) -> list[Job]:
        """Take out of the buffer the jobs for which ``keep`` is false; they will not run."""
        kept: list[Job] = []
        dropped: list[Job] = []
        for job in self.take_buffered():
            (kept if keep(job) else dropped).append(job)
        for job in kept:
            self.buffer.put_nowait(job)
        for job in dropped:
            self.held[job.queue].discard(job.id)
        return dropped

    def idle(self) -> bool:
        """Whether no job is buffered, running or waiting for its acknowledgement: a crash
        now would leave nothing of this consumer's in flight."""
        return not self.running and self.buffer.empty() and self.acker.idle()

    def idle_once_carried(self) -> bool:
        """``idle()`` once the acks the poller carries on its fetch are done (fetch.lua
        does them before it takes a job)."""
        return not self.running and self.buffer.empty() and self.acker.only_carried()

    def frees_room(self) -> bool:
        """Whether a job runs, waits or is being acknowledged here: its end will make room
        under a concurrency limit (``wait_to_carry``)."""
        return bool(self.running or not self.buffer.empty() or self.acker.busy())

    def wait_to_carry(self, timeout: float) -> bool:
        """At the concurrency limit, the room this consumer can count on first is its own
        jobs' when they finish: wait until one has (its ack then rides on the next fetch,
        freeing and refilling in one round trip) or until acks on the wire have landed;
        False if neither happened within ``timeout``."""
        return self.acker.wait_to_carry(timeout)

    def carry_acks(self, queue: str) -> list[Job]:
        """Pending acks of ``queue`` for the poller's next fetch (``Acker.carry``)."""
        return self.acker.carry(queue)

    def carried_acks(self, jobs_: list[Job], acked: list[bool] | None) -> None:
        """The outcome of the fetch that carried ``jobs_`` (``Acker.carried``)."""
        self.acker.carried(jobs_, acked)

    def wait_idle(self) -> None:
        """Wait until ``idle()`` (so that a suspect job runs alone)."""
        while not self.idle():
            if self.running:
                self._quiet.wait()
            elif not self.buffer.empty():
                gevent.sleep(0)  # buffered jobs: let the workers take them
            else:
                self.acker.flush()

    def wait_quiet(self) -> None:
        """Wait until no handler is running."""
        self._quiet.wait()

    def flush_acks(self, timeout: float | None = None) -> bool:
        """Wait until every finished job is acknowledged, at most ``timeout`` seconds."""
        return self.acker.flush(timeout)

    def _work(self) -> None:
        buffer = self.buffer
        slot = self._slots[gevent.getcurrent()] = _Slot()
        while True:
            if buffer.empty():
                self._waiting += 1
                try:
                    job = buffer.get()
                finally:
                    self._waiting -= 1
            else:
                job = buffer.get_nowait()
            # From here to the handler nothing yields: the job is never neither
            # buffered nor running.
            if not self._room.is_set():
                self._room.set()
            self.running += 1
            self._quiet.clear()
            try:
                self.execute(job, slot)
            finally:
                self.running -= 1
                if not self.running:
                    self._quiet.set()

    def execute(self, job: Job, slot: _Slot | None = None) -> None:
        """Run ``job``'s handler and write its outcome. ``slot`` names the job while its
        handler runs, and only then: a cancel interrupts a handler, never the outcome's
        write that follows (which yields, and must not be cut short)."""
        if self._planner is not None:
            return self._execute_planned(job, self._planner, slot or _NO_SLOT)
        slot = slot or _NO_SLOT
        timeout = self._opts.job_timeout
        # 0 but on the jobs decode() picked for the metrics' histograms (gq.job.sample):
        # the others cost one attribute read, whether metrics are on or off.
        timed = job.sample_weight
        began = self.recorders[job.queue].started(job) if timed else 0.0
        slot.job = job
        try:
            # A copy: what the handler does to its Job must not change what is stored.
            copy = Job(id=job.id, data=job.data, attempt=job.attempt)
            copy.queue = job.queue
            if timeout:
                self._run_with_timeout(timeout, self._call, copy)
            else:
                self._call(copy)
        except gevent.GreenletExit:
            if self._abandoned:
                raise  # a forced stop: the job stays in flight for another consumer
            # A handler (or a library it called) raised it, or killed this greenlet:
            # not a stop, so a failed attempt, and the worker goes on.
            self._finished_badly(job, slot, began, timed, GreenletExitRaised())
        except BaseException as exc:  # noqa: BLE001 - the handler's failure, whatever it raised
            self._finished_badly(job, slot, began, timed, exc)
        else:
            slot.job = None
            if timed:
                self.recorders[job.queue].finished(job, began)
            self.stats.done += 1
            self.acker.add(job)

    def _finished_badly(
        self,
        job: Job,
        slot: _Slot,
        began: float,
        timed: float,
        exc: BaseException,
        plan: Plan | None = None,
    ) -> None:
        slot.job = None
        if timed:
            self.recorders[job.queue].finished(job, began)
        self._ended(job, exc, plan)

    def _ended(self, job: Job, exc: BaseException, plan: Plan | None = None) -> None:
        """A handler raised: cancelled, rate limited, killed, or failed."""
        if isinstance(exc, JobCancelled) and _names(exc, job):
            log.info("%s: job %s cancelled while running", self._context, job.id)
            self._cancelled(job)
        elif isinstance(exc, RateLimited):
            self._rate_limited(job, exc)
        else:
            self._failed(job, exc, plan)

    # -- cancels (gq.Queue.cancel; the consumer's canceller loop calls cancel) -------------

    def cancel(self, queue: str, ids: set[str]) -> int:
        """Cancel the jobs of ``queue`` with ``ids`` this process holds: a buffered one is
        acknowledged without running; a running one has its handler interrupted with
        JobCancelled, once. Returns how many were found."""
        dropped = self.drop_buffered(lambda job: job.queue != queue or job.id not in ids)
        for job in dropped:
            log.info("%s: job %s cancelled before it started", self._context, job.id)
            self._cancelled(job)
        running = [
            (worker, slot.job)
            for worker, slot in self._slots.items()
            if slot.job is not None and slot.job.queue == queue and slot.job.id in ids
        ]
        loop = gevent.get_hub().loop
        for worker, job in running:
            # From the hub, as gevent.Timeout does: the worker is switched out, inside its
            # handler, or past it (writing the outcome, or on another job: left alone).
            loop.run_callback(self._interrupt, worker, job)
        return len(dropped) + len(running)

    def _interrupt(self, worker: gevent.Greenlet, job: Job) -> None:
        slot = self._slots.get(worker)
        if slot is not None and slot.job is job:
            # Once: the request stands until the job's ack, and a handler that catches
            # JobCancelled to clean up must not have its clean-up interrupted again.
            slot.job = None
            cast(Any, worker).throw(JobCancelled(job.id, job.queue))  # (gevent's stubs: Optional)

    def _cancelled(self, job: Job) -> None:
        self.held[job.queue].add(job.id)  # (a buffered job left held when it was dropped)
        self.stats.cancelled += 1
        self.recorders[job.queue].failed("cancelled")
        self.acker.add(job)  # acknowledged, not retried: ack.lua also drops the request

    def _rate_limited(self, job: Job, exc: RateLimited) -> None:
        """The service said "slow down": the job goes back ``after`` seconds from now with
        no attempt charged, and the whole queue fetches nothing for as long."""
        queue = self._queues[job.queue]
        after = exc.after
        message = jobs.encode(job, ready_at=time.time() + after)
        log.warning("%s: job %s rate limited: queue %s held back for %.1f s", self._context,
                    job.id, job.queue, after)  # fmt: skip
        write = lambda: queue.retry(self._consumer_id, job.id, message, after, hold=after)  # noqa: E731
        if self._settle(job, "reschedule", RetryJobError, write):
            self.stats.rate_limited += 1
            self.recorders[job.queue].failed("rate_limited")

    def _run_with_timeout(self, timeout: float, call: Callable[..., object], *args: Any) -> object:
        # The gevent.Timeout stops a handler that waits; the deadline lets gq.worker.watchdog stop
        # one that never yields. Both raise inside execute's try, so either way the
        # attempt fails like any other.
        worker = gevent.getcurrent()
        watchdog.DEADLINES[worker] = (time.monotonic() + timeout, timeout)
        try:
            with gevent.Timeout(timeout, JobTimeout(timeout)):
                return call(*args)
        finally:
            del watchdog.DEADLINES[worker]

    def _call(self, job: Job) -> object:
        """The handler's result; an awaitable it returned (an ``async def`` handler's
        coroutine) is awaited on the asyncio loop first: a job is never acknowledged
        before its coroutine has run (SPEC section 15)."""
        result = self._handler(job)
        if result is not None and (type(result) is CoroutineType or isawaitable(result)):
            return asyncio_loop.wait(result, f"gq job {job.id}")
        return result

    def _failed(self, job: Job, exc: BaseException, plan: Plan | None = None) -> None:
        self.stats.failed += 1
        updated = Job(id=job.id, data=job.data, attempt=job.attempt + 1)
        updated.queue = job.queue
        reason = describe(exc)
        queue = self._queues[job.queue]
        delay = retry_delay(job.attempt, exc, plan, self._opts)
        if delay is not None:
            message = jobs.encode(updated, error=reason, ready_at=time.time() + delay)
            log.warning("%s: job %s failed (attempt %d), retrying in %.1f s: %s", self._context,
                        job.id, job.attempt, delay, reason, exc_info=exc)  # fmt: skip
            retry = lambda: queue.retry(self._consumer_id, job.id, message, delay)  # noqa: E731
            if self._settle(updated, "retry", RetryJobError, retry):
                self.stats.retried += 1
                self.recorders[job.queue].failed("retried")
            return
        message = jobs.encode(updated, error=reason)
        why = "killed (gq.Kill)" if isinstance(exc, Kill) else "no attempts left, killed"
        log.error("%s: job %s failed (attempt %d), %s: %s", self._context, job.id,
                  job.attempt, why, reason, exc_info=exc)  # fmt: skip
        outcome = None if plan is None or plan.finish is None else plan.finish.failed(reason)
        kill = lambda: self._kill(queue, job.id, message, outcome)  # noqa: E731
        if self._settle(updated, "kill", KillJobError, kill):
            self.stats.killed += 1
            self.recorders[job.queue].failed("killed")

    def discard(self, job: Job, message: bytes | None, reason: str) -> None:
        """Bad data (SPEC section 6) never runs and never stalls the consumer: an
        undecodable message goes to dead as it is, for a human to inspect; an id without
        a message has nothing to keep and is dropped. ``job`` carries the id and queue."""
        queue = self._queues[job.queue]
        if message is None:
            log.error("%s: dropped job %s: %s", self._context, job.id, reason)
            self._settle(job, "drop", AckJobError,
                         lambda: queue.ack(self._consumer_id, [job.id])[0])  # fmt: skip
        else:
            log.error("%s: moved job %s to dead: cannot decode: %s", self._context, job.id,
                      reason)  # fmt: skip
            self._settle(job, "kill", KillJobError, lambda: self._kill(queue, job.id, None))

    def _settle(
        self,
        job: Job,
        action: str,
        error_type: Callable[[Job, BaseException], GQError],
        write: Callable[[], bool],
    ) -> bool:
        """The one path of a job's outcome other than success: write it (re-sent while
        the reply may be lost), report a job no longer owned, abort if it cannot be
        written. Whether it was written."""
        budget = self._opts.custodian_consumer_timeout
        try:
            owned, resent = persist(write, budget, self._context, f"{action} job {job.id}")
        except Exception as error:  # noqa: BLE001 - any write that persist gave up on is fatal
            self._on_fatal(error_type(job, error))
            return False
        self.held[job.queue].discard(job.id)
        if not owned:
            not_owned(self._context, job, action, resent)
        self.acker.released()  # a retry or kill frees the job's room too
        return True

    def _kill(
        self, queue: RedisQueue, job_id: str, message: bytes | None, outcome: Any = None
    ) -> bool:
        return queue.kill(
            self._consumer_id,
            job_id,
            message,
            dead_max_jobs=self._opts.dead_max_jobs,
            dead_max_age=self._opts.dead_max_age,
            outcome=outcome,
        )


def _names(cancelled: JobCancelled, job: Job) -> bool:
    # A JobCancelled a handler raised itself may name no queue.
    return cancelled.job_id == job.id and cancelled.queue in ("", job.queue)


def _set_event() -> Event:
    event = Event()
    event.set()
    return event


class _Slot:
    """The job one handler worker's handler runs now, None between handlers."""

    __slots__ = ("job",)

    def __init__(self) -> None:
        self.job: Job | None = None


_NO_SLOT = _Slot()  # execute() called outside a worker (tests, benchmarks)
