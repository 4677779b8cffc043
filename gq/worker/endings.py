"""What becomes of a job whose handler did not simply return (SPEC sections 6 and 9):
cancelled, rate limited, retried or killed, or bad data discarded. Each is written through
one path (``_settle``): re-sent while its reply may be lost, the job then let go by the
ledger, its room given back to a poller waiting at a concurrency limit.

A job is acknowledged only after its handler returned (at-least-once); a write that could
not be made leaves the job in flight for recovery: running it twice is better than
losing it.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Callable

from gq import job as jobs
from gq.errors import (
    AckJobError,
    GQError,
    JobCancelled,
    Kill,
    KillJobError,
    RateLimited,
    Retry,
    RetryJobError,
)
from gq.job import Job
from gq.options import ConsumerOptions
from gq.store.jobs import RedisQueue
from gq.tasks.joblog import fields_of
from gq.worker.acker import Acker, not_owned, persist
from gq.worker.call import Plan, describe, retry_delay
from gq.worker.ledger import Ledger

if TYPE_CHECKING:
    from gq.tasks.outcome import Outcome

log = logging.getLogger("gq.processor")


class Endings:
    """Writes the endings other than success of one consumer's jobs."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        ledger: Ledger,
        acker: Acker,
        on_fatal: Callable[[GQError], None],
        context: str,
    ) -> None:
        self._queues = queues
        self._consumer_id = consumer_id
        self._opts = opts
        self._ledger = ledger
        self._recorders = ledger.recorders
        self._acker = acker
        self._on_fatal = on_fatal
        self._context = context
        # Told the due time of every retry written: the scheduler wakes for it.
        self.on_due: Callable[[float], None] = lambda at: None

    def ended(self, job: Job, exc: BaseException, plan: Plan | None = None) -> None:
        """A handler raised: cancelled, rate limited, killed, or failed."""
        if isinstance(exc, JobCancelled) and _names(exc, job):
            log.info("%s: job %s cancelled while running", self._context, job.id,
                     extra=fields_of(job))
            self.cancelled(job)
        elif isinstance(exc, RateLimited):
            self._rate_limited(job, exc)
        else:
            self._failed(job, exc, plan)

    def cancelled(self, job: Job) -> None:
        self._ledger.hold(job.queue, (job.id,))  # (a buffered job left held when dropped)
        self._recorders[job.queue].failed("cancelled")
        self._ledger.not_done.add((job.queue, job.id))  # (its ack is no success)
        self._acker.add(job)  # acknowledged, not retried: ack.lua also drops the request

    def _rate_limited(self, job: Job, exc: RateLimited) -> None:
        """The service said "slow down": the job goes back ``after`` seconds from now with
        no attempt charged, and the whole queue (or, with ``group=True``, the job's group)
        fetches nothing for as long."""
        queue = self._queues[job.queue]
        after = exc.after
        message = jobs.encode(job, ready_at=time.time() + after)
        log.warning("%s: job %s rate limited: %s %s held back for %.1f s", self._context, job.id,
                    "its group in" if exc.group else "queue", job.queue, after,
                    extra=fields_of(job))  # fmt: skip
        write = lambda: queue.retry(self._consumer_id, job.id, message, after, hold=after,  # noqa: E731
                                    group_hold=exc.group)  # fmt: skip
        if self._settle(job, "reschedule", RetryJobError, write):
            self._recorders[job.queue].failed("rate_limited")
            self.on_due(time.time() + after)

    def _failed(self, job: Job, exc: BaseException, plan: Plan | None = None) -> None:
        updated = Job(id=job.id, data=job.data, attempt=job.attempt + 1)
        updated.queue = job.queue
        reason = describe(exc)
        delay = retry_delay(job.attempt, exc, plan, self._opts)
        if delay is not None:
            self._retry(updated, exc, reason, delay)
            return
        queue = self._queues[job.queue]
        message = jobs.encode(updated, error=reason)
        why = "killed (gq.Kill)" if isinstance(exc, Kill) else "no attempts left, killed"
        log.error("%s: job %s failed (attempt %d), %s: %s", self._context, job.id,
                  job.attempt, why, reason, exc_info=exc, extra=fields_of(job))  # fmt: skip
        # A task that keeps a result or belongs to a workflow: its failure is written by
        # the same kill call (its error kept, its group told).
        outcome = None if plan is None or plan.finish is None else plan.finish.failed(reason)
        kill = lambda: self._kill(queue, job.id, message, outcome)  # noqa: E731
        if self._settle(updated, "kill", KillJobError, kill):
            self._recorders[job.queue].failed("killed")

    def _retry(self, updated: Job, exc: BaseException, reason: str, delay: float) -> None:
        """A failed attempt, with attempts left: ``updated`` goes back ``delay`` s from now."""
        queue = self._queues[updated.queue]
        message = jobs.encode(updated, error=reason, ready_at=time.time() + delay)
        self._log_retry(updated, exc, reason, delay)
        retry = lambda: queue.retry(self._consumer_id, updated.id, message, delay)  # noqa: E731
        if self._settle(updated, "retry", RetryJobError, retry):
            self._recorders[updated.queue].failed("retried")
            self.on_due(time.time() + delay)

    def _log_retry(self, updated: Job, exc: BaseException, reason: str, delay: float) -> None:
        """One line per retry: INFO for a requested one (gq.Retry: the plan, not a
        failure), WARNING with the error for an error; the traceback at DEBUG only, since
        the job runs again (a job that goes to dead logs it at ERROR)."""
        attempt, fields = updated.attempt - 1, fields_of(updated)
        if isinstance(exc, Retry):
            log.info("%s: job %s asked for a retry (attempt %d), retrying in %.1f s%s",
                     self._context, updated.id, attempt, delay, _why(exc),
                     extra=fields)  # fmt: skip
            return
        log.warning("%s: job %s failed (attempt %d), retrying in %.1f s: %s", self._context,
                    updated.id, attempt, delay, reason, extra=fields)  # fmt: skip
        log.debug("%s: job %s attempt %d failed here", self._context, updated.id, attempt,
                  exc_info=exc, extra=fields)  # fmt: skip

    def discard(self, job: Job, message: bytes | None, reason: str) -> None:
        """Bad data (SPEC section 6) never runs and never stalls the consumer: an
        undecodable message goes to dead as it is, for a human to inspect; an id without
        a message has nothing to keep and is dropped. ``job`` carries the id and queue."""
        queue = self._queues[job.queue]
        if message is None:
            log.error("%s: dropped job %s: %s", self._context, job.id, reason,
                      extra=fields_of(job))
            self._settle(job, "drop", AckJobError,
                         lambda: queue.ack(self._consumer_id, [job.id])[0])  # fmt: skip
        else:
            log.error("%s: moved job %s to dead: cannot decode: %s", self._context, job.id,
                      reason, extra=fields_of(job))  # fmt: skip
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
        self._acker.released()  # a retry or kill frees the job's room too
        return True

    def _kill(
        self, queue: RedisQueue, job_id: str, message: bytes | None, outcome: Outcome | None = None
    ) -> bool:
        opts = self._opts
        return queue.kill(self._consumer_id, job_id, message, dead_max_jobs=opts.dead_max_jobs,
                          dead_max_age=opts.dead_max_age, outcome=outcome)  # fmt: skip


def _why(retry: Retry) -> str:
    return f": {retry.reason}" if retry.reason else ""


def _names(cancelled: JobCancelled, job: Job) -> bool:
    # A JobCancelled a handler raised itself may name no queue.
    return cancelled.job_id == job.id and cancelled.queue in ("", job.queue)
