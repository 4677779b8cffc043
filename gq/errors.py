"""The error tree of gq. Every error gq raises to its caller derives from GQError and keeps
its data on attributes. The signals a handler raises or receives do not, rightly: a
handler's ``except GQError`` (or ``except Exception``) must not swallow them.
``JobTimeout`` and ``JobCancelled`` derive from BaseException (they interrupt a handler,
as ``gevent.Timeout`` does), ``RateLimited``, ``Retry`` and ``Kill`` from Exception (a
handler raises them to say what becomes of its job)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from redis.exceptions import NoPermissionError

if TYPE_CHECKING:
    from gq.job import Job


class GQError(Exception):
    """Base class of every error gq raises."""


class ConfigurationError(GQError, ValueError):
    """A bad argument or option, raised at construction (or when a run starts)."""


class JobAlreadyExistsError(GQError):
    """A job with this id is still in the queue (ready, scheduled, running or dead).

    ``perform_many`` stores every new job of the batch before raising; ``duplicates``
    lists every job that was refused, ``job`` is the first of them.
    """

    def __init__(self, job: Job, duplicates: Sequence[Job] = ()) -> None:
        self.job = job
        self.duplicates = list(duplicates) or [job]
        super().__init__(f"a job with id {job.id!r} already exists")


class _JobOperationError(GQError):
    """A write about one job failed; the consumer aborts rather than guess its state."""

    verb = "process"

    def __init__(self, job: Job, cause: BaseException) -> None:
        self.job = job
        self.cause = cause
        super().__init__(f"failed to {self.verb} job {job.id!r}: {cause}")


class AckJobError(_JobOperationError):
    verb = "acknowledge"


class RetryJobError(_JobOperationError):
    verb = "retry"


class KillJobError(_JobOperationError):
    verb = "kill"


class MaxBackoffExceededError(GQError):
    """A maintenance loop failed ``attempt`` times in a row and its budget is spent."""

    def __init__(self, process: str, attempt: int) -> None:
        self.process = process
        self.attempt = attempt
        super().__init__(f"{process} failed {attempt} times in a row; giving up")


class ShutdownTimeoutError(GQError):
    """Handlers were still running when the shutdown grace period ran out.

    Their jobs stay in the consumer's in-flight set; another consumer's custodian
    recovers them once this consumer's heartbeat has expired.
    """

    def __init__(self, unfinished: int, grace_period: float | None) -> None:
        self.unfinished = unfinished
        self.grace_period = grace_period
        why = f"after the {grace_period:g} s grace period" if grace_period else "on a forced stop"
        super().__init__(f"{unfinished} job(s) still running {why}; left for recovery")


class JobTimeout(BaseException):
    """Raised inside a handler that ran past ``job_timeout``; counts as a failed attempt.

    A ``BaseException``, like ``gevent.Timeout``, so that a handler's ``except Exception``
    cannot swallow it.
    """

    def __init__(self, seconds: float | None) -> None:
        self.seconds = seconds
        super().__init__(f"job ran past its {seconds:g} s timeout" if seconds else "job timed out")


class JobCancelled(BaseException):
    """Raised inside a handler whose job was cancelled (``gq.Queue.cancel``, ``gq cancel``)
    while it ran; the job is then acknowledged, not retried.

    A ``BaseException``, like ``JobTimeout``, so that a handler's ``except Exception``
    cannot swallow it; a handler may catch it to clean up, and should re-raise it.
    """

    def __init__(self, job_id: str, queue: str = "") -> None:
        self.job_id = job_id
        self.queue = queue  # of the job: two queues of one consumer may hold the same id
        super().__init__(f"job {job_id} was cancelled")


class RateLimited(Exception):
    """Raised by a handler whose service said "slow down" (HTTP 429, a quota): the job goes
    back to the queue ``after`` seconds from now without an attempt charged, and the whole
    queue fetches nothing for ``after`` seconds, on every consumer (SPEC section 9).
    ``after`` must be a finite number of seconds above 0; more than ``MAX_AFTER`` (a day)
    is cut to it. An operator lifts the hold with ``gq.Queue.resume()`` (``gq resume``).
    With ``group=True`` only the job's group is held (a partner's 429 for one tenant).
    """

    #: The longest hold, in seconds: a quota that resets daily is the longest wait a
    #: service asks for; anything longer is a bug on one side, not a reason to stop a queue.
    MAX_AFTER = 86400.0

    def __init__(self, after: float, reason: str = "", *, group: bool = False) -> None:
        try:
            seconds = float(after)
        except (TypeError, ValueError):
            seconds = math.nan
        if not (math.isfinite(seconds) and seconds > 0):
            raise ValueError(
                f"RateLimited(after=...) needs a finite, positive number of seconds, not {after!r}"
            )
        self.after = min(seconds, self.MAX_AFTER)
        # Only the job's group is held (SPEC section 17); a job without a group holds the
        # queue, as the group it does not have cannot be told apart from the rest.
        self.group = bool(group)
        held = "group" if self.group else "queue"
        super().__init__(reason or f"rate limited: {held} held back for {after:g} s")


class MessageTooLargeError(ConfigurationError):
    """A job's encoded message is larger than the producer's ``max_message_bytes``.

    Raised before anything is written; ``perform_many`` refuses the whole batch.
    """

    def __init__(self, job: Job, size: int, limit: int) -> None:
        self.job = job
        self.size = size
        self.limit = limit
        super().__init__(
            f"job {job.id!r} is {size} bytes encoded, over the producer's limit of "
            f"{limit} bytes (max_message_bytes); store large data elsewhere and enqueue a reference"
        )


class QueueFullError(GQError):
    """Redis refused to store a job: it is at ``maxmemory`` (with ``noeviction``).

    Nothing of the refused call was written; jobs already queued are untouched. ``cause``
    is Redis's OOM error. Free memory (let workers drain, raise ``maxmemory``) and retry.
    """

    def __init__(self, cause: BaseException) -> None:
        self.cause = cause
        super().__init__(f"Redis is out of memory and refused the job(s): {cause}")


class PermissionDeniedError(GQError, NoPermissionError):
    """Redis refused an operation to this user (ACL): retrying would change nothing.

    Also a ``redis.exceptions.NoPermissionError``, which callers of redis-py catch.

    ``operation`` names what was refused (a command, or the gq script that ran it),
    ``cause`` is Redis's error, ``process`` the loop that stopped on it (None at start).
    See the ACL rule in docs/deployment.md.
    """

    def __init__(self, operation: str, cause: BaseException, process: str | None = None) -> None:
        self.operation = operation
        self.cause = cause
        self.process = process
        super().__init__(
            f"Redis refused {operation} to this user (ACL; see the rule in docs/deployment.md): "
            f"{cause}"
        )


class EnvelopeError(GQError, ValueError):
    """A task job's Data is not a well-formed envelope (gq/envelope.py, docs/wire.md):
    the job goes to dead at once with this as its error, since no worker can read it."""


class Retry(Exception):
    """Raised by a task to run its job again: an attempt is charged, and the job runs
    after ``after`` seconds (the task's backoff when None) while attempts remain, else it
    goes to dead (SPEC section 14)."""

    #: The longest delay, in seconds (about 31 years, as gq.tasks.options.MAX_SECONDS).
    MAX_AFTER = 1e9

    def __init__(self, after: float | None = None, reason: str = "") -> None:
        if after is not None:
            try:
                seconds = float(after)
            except (TypeError, ValueError):
                seconds = math.nan
            # inf (or 1e300) would park the job for ever: it would never run again, nor die.
            if isinstance(after, bool) or not 0 <= seconds <= self.MAX_AFTER:
                raise ValueError(f"Retry(after=...) needs a number of seconds >= 0 and <= "
                                 f"{self.MAX_AFTER:g}, not {after!r}")  # fmt: skip
        self.after = None if after is None else float(after)
        self.reason = reason  # the task's own words, if any (the log line says them)
        super().__init__(reason or ("retry requested" + (f" in {after:g} s" if after else "")))


class Kill(Exception):
    """Raised by a task to send its job to dead at once, with ``reason`` as its error."""

    def __init__(self, reason: str) -> None:
        self.reason = str(reason)
        super().__init__(self.reason)


class UnknownTaskError(GQError):
    """A task job names a task this worker does not know: an ordinary failure, retried
    with the backoff (a newer worker of a rolling deploy may know it), then dead."""

    def __init__(self, task: str) -> None:
        self.task = task
        super().__init__(f"unknown task {task}")


class TaskFailed(GQError):
    """``Result.get()`` on a job (or a workflow step or member) that failed: ``error``
    (its last error), ``status`` ("failed": in dead; "done": it ran, but its return value
    could not be kept), ``task`` and ``id`` (the job that failed), ``traceback`` (the
    failure's, bounded, when its record kept one; else None)."""

    #: The failure's traceback as kept with its record (None: none kept).
    traceback: str | None = None

    def __init__(self, id: str, task: str, error: str, status: str = "failed") -> None:
        super().__init__(f"job {id} of task {task or '?'} {status}: {error}")
        self.id = id
        self.task = task
        self.error = error
        self.status = status


class ResultUnavailable(GQError):
    """``Result.get()`` where no outcome will come: the task keeps no results
    (``result_ttl`` unset), or gq knows nothing of the id on that queue (never enqueued
    there, cancelled, or its result expired)."""


class ConsumerAlive(GQError):
    """``gq.Queue.recover_consumer`` refused a consumer that heartbeats on time
    (``.consumer_id``, ``.heartbeat_at``: server time of its last heartbeat)."""

    def __init__(self, consumer_id: str, heartbeat_at: float) -> None:
        self.consumer_id = consumer_id
        self.heartbeat_at = heartbeat_at
        super().__init__(
            f"consumer {consumer_id} is alive (its heartbeats are on time): recovering its "
            "jobs would run them twice; stop it, or force it"
        )
