"""Running handlers: the local buffer, the handler pool, and the outcome of each job
(done, retried, killed, cancelled, rate limited). Acknowledgements are gq/worker/acker.py's.

A job is acknowledged only after its handler returned (at-least-once): running a job
twice is better than losing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
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
from gq.worker.ledger import Ledger
from gq.worker.planned import PlannedRuns, planner_of
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.processor")

Handler = Callable[[Job], object]


class Processor(PlannedRuns):
    """Runs buffered jobs on at most ``processor_concurrency`` handler greenlets.

    The handlers are long-lived worker greenlets that take jobs from ``buffer`` one after
    another, started on demand up to ``processor_concurrency`` and kept for the run: a
    greenlet per job (``gevent.pool.Pool.spawn``) cost more than a noop handler itself.
    So at most ``processor_concurrency`` handlers run at once, and ``buffer`` holds the
    jobs fetched but not started, at most ``poller_buffer_size`` of them. A worker takes
    a job and starts its handler without yielding in between, so a job is either in
    ``buffer`` (and given back at a graceful stop) or running.

    The consumer hands it the ``ledger`` (held ids, outcome counts) and the ``acker``
    (which the poller shares); built alone (tests, benchmarks), it makes its own.
    """

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        handler: Handler,
        on_fatal: Callable[[GQError], None],
        context: str,
        ledger: Ledger | None = None,
        acker: Acker | None = None,
    ) -> None:
        self._queues = queues
        self._consumer_id = consumer_id
        self._opts = opts
        self._handler = handler
        self._planner = planner_of(handler)
        self._ledger = ledger or Ledger({name: Recorder(name) for name in queues})
        self.recorders = self._ledger.recorders  # one per queue: its jobs' outcomes
        self._on_fatal = on_fatal
        self._context = context
        self.buffer: Queue[Job] = Queue()
        self.workers: list[gevent.Greenlet] = []
        self.running = 0  # handlers running now
        self._waiting = 0  # workers blocked on an empty buffer
        self._room = _set_event()  # set when the buffer has room for the poller
        self._quiet = _set_event()  # set when no handler runs
        self._abandoned = False  # a forced stop: handlers are being killed
        # What each handler worker's handler runs now, for cancels.
        self._slots: dict[gevent.Greenlet, _Slot] = {}
        self.acker = acker or Acker(queues, consumer_id, opts, self._ledger.acked, on_fatal,
                                    context)  # fmt: skip

    def buffered(self) -> int:
        """Jobs fetched and not started."""
        return int(self.buffer.qsize())

    def wait_for_room(self, room: Callable[[], int]) -> None:
        """Wait until ``room()`` (the poller's measure) is positive; it can only grow when
        a handler takes a job from the buffer."""
        while not room():
            self._room.clear()
            self._room.wait()

    def put(self, jobs_: list[Job]) -> None:
        """Buffer fetched jobs (of one queue: one fetch's), and start workers for those no
        idle worker will take."""
        if not jobs_:
            return
        buffer = self.buffer
        held = self._ledger.held[jobs_[0].queue]
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
            self._ledger.release(job)
        return dropped

    def quiet(self) -> bool:
        """Whether no job is buffered or running here."""
        return not self.running and self.buffer.empty()

    def idle(self) -> bool:
        """Whether no job is buffered, running or waiting for its acknowledgement: a crash
        now would leave nothing of this consumer's in flight."""
        return self.quiet() and self.acker.idle()

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
        self._ledger.hold(job.queue, (job.id,))  # (a buffered job left held when dropped)
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
            self.recorders[job.queue].failed("rate_limited")

    def _run_with_timeout(self, timeout: float, call: Callable[..., object], *args: Any) -> object:
        # The gevent.Timeout stops a handler that waits; the deadline lets gq.worker.watchdog stop
        # one that never yields. Both raise inside execute's try, so either way the
        # attempt fails like any other.
        worker = gevent.getcurrent()
        watchdog.arm(worker, timeout)
        try:
            with gevent.Timeout(timeout, JobTimeout(timeout)):
                return call(*args)
        finally:
            watchdog.disarm(worker)

    def _call(self, job: Job) -> object:
        """The handler's result; an awaitable it returned (an ``async def`` handler's
        coroutine) is awaited on the asyncio loop first: a job is never acknowledged
        before its coroutine has run (SPEC section 15)."""
        result = self._handler(job)
        if result is not None and (type(result) is CoroutineType or isawaitable(result)):
            return asyncio_loop.wait(result, f"gq job {job.id}")
        return result

    def _failed(self, job: Job, exc: BaseException, plan: Plan | None = None) -> None:
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
                self.recorders[job.queue].failed("retried")
            return
        message = jobs.encode(updated, error=reason)
        why = "killed (gq.Kill)" if isinstance(exc, Kill) else "no attempts left, killed"
        log.error("%s: job %s failed (attempt %d), %s: %s", self._context, job.id,
                  job.attempt, why, reason, exc_info=exc)  # fmt: skip
        if self._settle(updated, "kill", KillJobError, lambda: self._kill(queue, job.id, message)):
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
        self._ledger.release(job)
        if not owned:
            not_owned(self._context, job, action, resent)
        self.acker.released()  # a retry or kill frees the job's room too
        return True

    def _kill(self, queue: RedisQueue, job_id: str, message: bytes | None) -> bool:
        return queue.kill(
            self._consumer_id,
            job_id,
            message,
            dead_max_jobs=self._opts.dead_max_jobs,
            dead_max_age=self._opts.dead_max_age,
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
