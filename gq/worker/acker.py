"""Acknowledging finished jobs, and re-sending a job's outcome until Redis has it.

A job is acknowledged only after its handler returned (at-least-once). Acknowledgements
are batched: whatever finished while the previous ack was on the wire goes in the next
single script call, which adds no delay when idle and saves a round trip per job under
load; the poller may carry them on its next fetch instead (fetch.lua acknowledges, then
takes), those with an outcome to write too (fetch.lua writes it as ack_results.lua does,
in the same call). A job whose handler returned but whose ack was not yet sent when the
process dies runs again; running a job twice is better than losing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Callable, TypeVar

import gevent
from gevent.event import Event

from gq.backoff import backoff
from gq.errors import AckJobError, GQError
from gq.job import Job, by_queue
from gq.options import ConsumerOptions
from gq.store.base import MAX_BATCH, describe, is_refusal
from gq.store.jobs import RedisQueue
from gq.store.outcomes import PLAIN, finish

log = logging.getLogger("gq.acker")

T = TypeVar("T")


# Re-sending a failed write starts at backoff(1) * RESEND_SCALE (0.05-0.1 s, a cut
# connection is back at once) and grows with curlyq's formula up to a quarter of the budget.
RESEND_SCALE = 0.05


def persist(write: Callable[[], T], budget: float, context: str, what: str) -> tuple[T, bool]:
    """Call ``write`` until it succeeds or ``budget`` seconds of trying have passed;
    return its result and whether it was sent more than once (its first reply lost).

    The budget is ``custodian_consumer_timeout``: for that long after a failure this
    consumer's jobs are surely still its own (its heartbeat keeps the lease once Redis is
    back), so re-sending beats aborting. Re-sending is safe: every job write removes the
    id from this consumer's in-flight set first (SREM) and does nothing if it is gone.
    A refusal (wrong key type, no permission) is raised at once: Redis answered, and the
    same write would get the same answer.
    """
    started = time.monotonic()
    attempt = 0
    while True:
        try:
            return write(), attempt > 0
        except Exception as exc:
            if is_refusal(exc):
                raise
            attempt += 1
            left = budget - (time.monotonic() - started)
            if left <= 0:
                raise
            delay = min(RESEND_SCALE * backoff(attempt, budget / 4 / RESEND_SCALE), left)
            log.warning("%s: could not %s (try %d), again in %.2f s: %s", context, what,
                        attempt, delay, describe(exc))  # fmt: skip
            gevent.sleep(delay)


class Acker:
    """Acknowledges finished jobs in batches, one script call in flight at a time (one
    per queue when the batch holds jobs of several). The poller may carry pending acks on
    its next fetch instead (``carry``), which saves a round trip under load: fetch.lua
    acknowledges them before it takes new jobs."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        on_done: Callable[[list[Job]], None],
        on_fatal: Callable[[GQError], None],
        context: str,
    ) -> None:
        self._queues = queues
        # The common case, one queue: no grouping of a batch by queue.
        self._single = next(iter(queues.values())) if len(queues) == 1 else None
        self._consumer_id = consumer_id
        self._opts = opts
        self._on_done = on_done
        self._on_fatal = on_fatal
        self._context = context
        self._pending: list[Job] = []
        self._sending = False  # a batch of this greenlet's is on the wire
        self._carried = 0  # jobs whose ack rides on a fetch on the wire
        self._resent: set[str] = set()  # ids carried on a fetch whose reply was lost
        # While the poller waits to carry the next acks itself (the queue is at its
        # concurrency limit, wait_to_carry), new acks do not wake this greenlet; ``_freed``
        # wakes the poller, as do the acks this greenlet had on the wire when they land.
        self._deferred = False
        self._freed = Event()
        self._wakeup = Event()
        self._idle = Event()
        self._idle.set()

    def add(self, job: Job) -> None:
        pending = self._pending
        pending.append(job)
        # Only the first job of a batch needs to wake the acker: the rest ride along.
        if len(pending) == 1:
            self._idle.clear()
            if self._deferred:
                self._freed.set()
            else:
                self._wakeup.set()

    def run(self) -> None:
        while True:
            self._wakeup.wait()
            self._wakeup.clear()
            while self._pending:
                batch, self._pending = self._pending, []
                self._sending = True
                sent = self._ack(batch)
                self._sending = False
                if not sent:
                    return
                self.released()  # the room these acks freed is the poller's to fill
            self._settle()

    def _settle(self) -> None:
        if not self._pending and not self._sending and not self._carried:
            self._idle.set()

    def carry(self, queue: str) -> list[Job]:
        """Take the pending acks of ``queue`` (at most MAX_BATCH) for a fetch to carry,
        those with an outcome first (the order of fetch.lua's flags); report the fetch's
        outcome with ``carried``."""
        pending = self._pending
        if not pending:
            return []
        if self._single is not None:
            taken, self._pending = pending[:MAX_BATCH], pending[MAX_BATCH:]
        else:
            taken = [job for job in pending if job.queue == queue][:MAX_BATCH]
            chosen = {id(job) for job in taken}
            self._pending = [job for job in pending if id(job) not in chosen]
        self._carried += len(taken)
        return outcomes_first(taken)

    def carried(self, jobs_: list[Job], acked: list[bool] | None) -> None:
        """The fetch that carried ``jobs_`` answered ``acked`` (a flag per job), or failed
        (None): then they go back to be sent again by this acker. Re-sending is safe
        (ack.lua does nothing for an id no longer owned), and a "not owned" answer then
        most likely means the lost fetch went through."""
        if not jobs_:
            return
        self._carried -= len(jobs_)
        if acked is None:
            self._resent.update(job.id for job in jobs_)
            self._pending[:0] = jobs_
            self._wakeup.set()
            return
        self._on_done(jobs_)
        self._report_not_owned(jobs_, acked, False)
        if self._pending:  # more than one fetch could carry
            self._wakeup.set()
        self._settle()

    def wait_to_carry(self, timeout: float) -> bool:
        """For a poller at its queue's concurrency limit: wait (at most ``timeout``) until a
        job has finished here, its ack now pending for the next fetch to carry, or until
        the acks on the wire have landed; meanwhile new acks wait for the fetch. Whether
        either happened."""
        if self._pending:
            return True
        self._freed.clear()
        self._deferred = True
        try:
            freed = self._freed.wait(timeout)
        finally:
            self._deferred = False
            if self._pending:
                self._wakeup.set()  # (the poller takes them first: it does not yield before)
        return bool(freed or self._pending)

    def busy(self) -> bool:
        """Whether acks are pending or on the wire (their landing frees room)."""
        return bool(self._pending or self._sending)

    def released(self) -> None:
        """Room was made here (acks landed, a retry or kill written): wake a poller waiting
        in ``wait_to_carry``."""
        if self._deferred:
            self._freed.set()

    def only_carried(self) -> bool:
        """Whether no ack is pending or on the wire but those carried by the fetch."""
        return not self._pending and not self._sending

    def _ack(self, batch: list[Job]) -> bool:
        if self._single is not None:
            return self._ack_on(self._single, batch)
        groups = by_queue(batch)
        return all(self._ack_on(self._queues[name], jobs_) for name, jobs_ in groups.items())

    def _ack_on(self, queue: RedisQueue, batch: list[Job]) -> bool:
        ids = [job.id for job in batch]
        if any(job.outcome is not None for job in batch):
            # In batch order, so that the flags line up; a plain job's entry keeps nothing.
            done = [(job.id, job.outcome or PLAIN) for job in batch]
            write: Callable[[], list[bool]] = lambda: finish(queue, self._consumer_id, done)  # noqa: E731
        else:
            write = lambda: queue.ack(self._consumer_id, ids)  # noqa: E731
        try:
            acked, resent = persist(
                write,
                self._opts.custodian_consumer_timeout,
                self._context,
                f"acknowledge {len(ids)} job(s)",
            )
        except Exception as exc:  # noqa: BLE001 - any write that persist gave up on is fatal
            self._on_fatal(AckJobError(batch[0], exc))
            return False
        self._on_done(batch)
        self._report_not_owned(batch, acked, resent)
        return True

    def _report_not_owned(self, batch: list[Job], acked: list[bool], resent: bool) -> None:
        again = self._resent
        for job, ok in zip(batch, acked):
            if not ok:
                not_owned(self._context, job, "acknowledge", resent or job.id in again)
        if again:
            again.difference_update(job.id for job in batch)

    def flush(self, timeout: float | None = None) -> bool:
        """Wait until every job added so far has been acknowledged, at most ``timeout``
        seconds; whether it was (False if the acker died or time ran out)."""
        return bool(self._idle.wait(timeout))

    def idle(self) -> bool:
        """Whether no acknowledgement is pending."""
        return bool(self._idle.is_set())


def outcomes_first(batch: list[Job]) -> list[Job]:
    """``batch`` with the jobs that write an outcome first, each part in its order."""
    kept = [job for job in batch if job.outcome is not None]
    if not kept or len(kept) == len(batch):
        return batch
    return kept + [job for job in batch if job.outcome is None]


def not_owned(context: str, job: Job, action: str, resent: bool) -> None:
    if resent:
        # The first send failed after Redis may have run it: a 0 on the re-send most
        # likely means that first send went through. A custodian could also have taken
        # the job in between, but only after this consumer's lease ran out, which the
        # persist budget is chosen to avoid; so no "may run twice" alarm here.
        log.debug("%s: %s of job %s was re-sent and found it done", context, action, job.id)
        return
    # Another consumer's custodian took the job back (this consumer looked dead), so it
    # may have run twice; the new owner's state is left alone.
    log.warning(
        "%s: could not %s job %s: no longer in this consumer's in-flight set "
        "(recovered by a custodian?); it may run twice",
        context,
        action,
        job.id,
    )
