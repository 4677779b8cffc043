"""Running handlers: the local buffer, the handler pool, cancels of running jobs, and
handing each job's end on: to the acker when its handler returned (gq/worker/acker.py),
to the endings otherwise (retried, killed, cancelled, rate limited: gq/worker/endings.py).

A job is acknowledged only after its handler returned (at-least-once): running a job
twice is better than losing it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from inspect import isawaitable
from types import CoroutineType
from typing import Any, Callable, cast

import gevent
from gevent.event import Event
from gevent.lock import Semaphore
from gevent.queue import Queue

from gq.errors import (
    GQError,
    JobCancelled,
    JobTimeout,
)
from gq.job import Job
from gq.options import AUTO, ConsumerOptions
from gq.store.jobs import RedisQueue
from gq.tasks.joblog import fields_of
from gq.worker import asyncio_loop, watchdog
from gq.worker.acker import Acker
from gq.worker.call import Plan
from gq.worker.endings import Endings
from gq.worker.handler_checks import GreenletExitRaised
from gq.worker.ledger import Ledger
from gq.worker.planned import PlannedRuns, planner_of
from gq.worker.recorder import Recorder
from gq.worker.sampling import Sample

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

    Handlers that never yield (short CPU jobs) would otherwise run the whole buffer
    before the poller and the acker get a turn, so the next fetch would leave only once
    the buffer is empty and the handlers would idle for its round trip. So, with an
    "auto" buffer, a worker lets the others run when the buffer is down to half of what
    the last fetch left in it (then a quarter, an eighth...), and idle workers wait for
    a job one at a time (the others wait for their turn): a fetch then wakes one worker,
    not every idle one, and the poller, woken by the first job taken, runs at that first
    turn rather than after every idle worker has had its own.

    The consumer hands it the ``ledger`` (held ids, outcome counts), the ``acker`` (which
    the poller shares) and the ``endings`` (other than success: gq/worker/endings.py);
    built alone (tests, benchmarks), it makes its own.
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
        endings: Endings | None = None,
    ) -> None:
        self._opts = opts
        # Only "auto" sizes its fetches to be on the wire while half the buffer runs; a
        # fixed buffer keeps curlyq's batches of its size (halved, a small one lost more
        # to twice the fetches than it gained: benchmarks/README.md).
        self._auto = opts.poller_buffer_size == AUTO
        self._handler = handler
        self._planner = planner_of(handler)
        self._on_fatal = on_fatal
        self._context = context
        self._ledger = ledger = ledger or Ledger({name: Recorder(name) for name in queues})
        self.recorders = ledger.recorders  # one per queue: its jobs' outcomes
        self._sampler = ledger.sampler
        self._picked = ledger.sampler.picked  # id(job) -> Sample, for the jobs to time
        self.acker = acker or Acker(queues, consumer_id, opts, ledger.acked, on_fatal, context)
        self._endings = endings or Endings(
            queues, consumer_id, opts, ledger, self.acker, on_fatal, context
        )
        self._pool()

    def _pool(self) -> None:
        """The handler pool's state, empty."""
        self.buffer: Queue[Job] = Queue()
        self.workers: list[gevent.Greenlet] = []
        self.running = 0  # handlers running now
        self._waiting = 0  # workers blocked on an empty buffer
        self._yield_at = 0  # the buffer's length at which a worker lets the others run
        self._turn = Semaphore()  # held by the one idle worker that waits on the buffer
        self._room = _set_event()  # set when the buffer has room for the poller
        self._quiet = _set_event()  # set when no handler runs
        self._abandoned = False  # a forced stop: handlers are being killed
        # What each handler worker's handler runs now, for cancels.
        self._slots: dict[gevent.Greenlet, _Slot] = {}

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
        if self._auto:
            self._yield_at = buffer.qsize() // 2
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

    def buffered_jobs(self) -> list[Job]:
        """The jobs buffered now, in order (a copy: the buffer is left as it is)."""
        return list(self.buffer.queue)

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
        if self._picked:
            self._sampler.forget(dropped)
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
            if self._yield_at and buffer.qsize() == self._yield_at:
                self._yield_at //= 2
                gevent.sleep(0)  # (no job taken: nothing is neither buffered nor running)
            job = self._wait_for_job() if buffer.empty() else buffer.get_nowait()
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

    def _wait_for_job(self) -> Job:
        """The next job, for an idle worker: one at a time waits on the buffer."""
        with self._turn:
            self._waiting += 1
            try:
                job: Job = self.buffer.get()
            finally:
                self._waiting -= 1
            # The poller is woken before the next idle worker's turn: it then runs at the
            # first yield, with the buffer still half full.
            if not self._room.is_set():
                self._room.set()
            return job

    def execute(self, job: Job, slot: _Slot | None = None) -> None:
        """Run ``job``'s handler and write its outcome. ``slot`` names the job while its
        handler runs, and only then: a cancel interrupts a handler, never the outcome's
        write that follows (which yields, and must not be cut short)."""
        if self._planner is not None:
            return self._execute_planned(job, self._planner, slot or _NO_SLOT)
        slot = slot or _NO_SLOT
        timeout = self._opts.job_timeout
        # None but on the jobs picked for the metrics' histograms (gq.worker.sampling):
        # the others cost one look at an empty dict, whether metrics are on or off.
        picked = self._picked
        sample = picked.pop(id(job), None) if picked else None
        began = self.recorders[job.queue].started(sample) if sample is not None else 0.0
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
            self._finished_badly(job, slot, began, sample, GreenletExitRaised())
        except BaseException as exc:  # noqa: BLE001 - the handler's failure, whatever it raised
            self._finished_badly(job, slot, began, sample, exc)
        else:
            slot.job = None
            if sample is not None:
                self.recorders[job.queue].finished(sample, began)
            self.acker.add(job)

    def _finished_badly(
        self,
        job: Job,
        slot: _Slot,
        began: float,
        sample: Sample | None,
        exc: BaseException,
        plan: Plan | None = None,
    ) -> None:
        slot.job = None
        if sample is not None:
            self.recorders[job.queue].finished(sample, began)
        self._endings.ended(job, exc, plan)

    # -- cancels (gq.Queue.cancel; the consumer's canceller loop calls cancel) -------------

    def cancel(self, queue: str, ids: set[str]) -> int:
        """Cancel the jobs of ``queue`` with ``ids`` this process holds: a buffered one is
        acknowledged without running; a running one has its handler interrupted with
        JobCancelled, once. Returns how many were found."""
        dropped = self.drop_buffered(lambda job: job.queue != queue or job.id not in ids)
        for job in dropped:
            log.info("%s: job %s cancelled before it started", self._context, job.id,
                     extra=fields_of(job))
            self._endings.cancelled(job)
        running = self._running_among(queue, ids)
        loop = gevent.get_hub().loop
        for worker, job in running:
            # From the hub, as gevent.Timeout does: the worker is switched out, inside its
            # handler, or past it (writing the outcome, or on another job: left alone).
            loop.run_callback(self._interrupt, worker, job)
        return len(dropped) + len(running)

    def _running_among(self, queue: str, ids: set[str]) -> list[tuple[gevent.Greenlet, Job]]:
        """The handler workers running a job of ``queue`` with one of ``ids``, and the job."""
        running = [(worker, slot.job) for worker, slot in self._slots.items() if slot.job]
        return [(worker, job) for worker, job in running if job.queue == queue and job.id in ids]

    def _interrupt(self, worker: gevent.Greenlet, job: Job) -> None:
        slot = self._slots.get(worker)
        if slot is not None and slot.job is job:
            slot.job = None  # once: a handler's clean-up after JobCancelled runs in peace
            cast(Any, worker).throw(JobCancelled(job.id, job.queue))  # (gevent's stubs: Optional)

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
