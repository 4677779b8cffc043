"""The Producer: enqueues jobs. Works in plain threaded programs as well as under gevent."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Union

import redis

from gq import job as jobs
from gq._config import check_queue_name, resolve_client
from gq.errors import ConfigurationError, JobAlreadyExistsError, MessageTooLargeError
from gq.job import Job, JobLike
from gq.redis_queue import RedisQueue

#: Default ``max_message_bytes``: far above ordinary job payloads, far below what would
#: stall a single-threaded Redis while a script copies the message (docs/decisions.md).
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024

When = Union[datetime, float, int]
Delay = Union[timedelta, float, int]


class Producer:
    """Puts jobs on queue ``queue``.

    A ``redis.ConnectionError`` from any ``perform*`` call means the job may or may not
    be stored: calling again with the same job id is safe, and a ``JobAlreadyExistsError``
    then means the first call went through.

    ``client`` may be a ``redis.Redis``, a ``redis.cluster.RedisCluster`` (the queue name
    then needs a hash tag, ``"{emails}"``) or a Sentinel's ``master_for`` client.
    ``max_message_bytes`` (default 1 MiB, ``None`` for no limit) bounds each encoded
    message: a bigger job raises ``MessageTooLargeError`` before anything is written.
    """

    def __init__(
        self,
        queue: str,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        self.queue = check_queue_name(queue)
        if max_message_bytes is not None and (
            isinstance(max_message_bytes, bool)
            or not isinstance(max_message_bytes, int)
            or max_message_bytes < 1
        ):
            raise ConfigurationError(
                f"max_message_bytes must be a positive int or None, not {max_message_bytes!r}"
            )
        self.max_message_bytes = max_message_bytes
        self._queue = RedisQueue(resolve_client(url, client), self.queue)

    def perform(self, job: JobLike) -> str:
        """Queue ``job`` (bytes or Job) to run as soon as possible; return its id."""
        item = jobs.to_job(job)
        message = self._encode(item, time.time())
        [stored] = self._queue.push([(item.id, message)])
        return _stored_or_raise(item, stored)

    def perform_at(self, when: When, job: JobLike) -> str:
        """Queue ``job`` to run at ``when`` (a datetime or unix seconds); return its id.

        The time is taken as given: a naive datetime is local time, as ``datetime.timestamp``
        reads it.
        """
        at = _unix_time(when)
        item = jobs.to_job(job)
        message = self._encode(item, at)
        [stored] = self._queue.schedule([(item.id, message, at)], relative=False)
        return _stored_or_raise(item, stored)

    def perform_after(self, delay: Delay, job: JobLike) -> str:
        """Queue ``job`` to run ``delay`` (timedelta or seconds) after the Redis server's now."""
        seconds = _seconds(delay)
        item = jobs.to_job(job)
        # ReadyAt is for display: the schedule itself counts the delay on the server's clock.
        message = self._encode(item, time.time() + seconds)
        [stored] = self._queue.schedule([(item.id, message, seconds)], relative=True)
        return _stored_or_raise(item, stored)

    def perform_many(self, batch: Iterable[JobLike]) -> list[str]:
        """Queue many jobs in few round trips; return their ids in order.

        Every job with a new id is stored; if some ids already existed, the call then
        raises ``JobAlreadyExistsError`` whose ``duplicates`` lists the refused jobs.
        """
        items = [jobs.to_job(job) for job in batch]
        if not items:
            return []
        now = time.time()
        # Every message is encoded (and checked) before the first is written.
        messages = [(item.id, self._encode(item, now)) for item in items]
        stored = self._queue.push(messages)
        refused = [item for item, ok in zip(items, stored) if not ok]
        if refused:
            raise JobAlreadyExistsError(refused[0], refused)
        return [item.id for item in items]

    def _encode(self, item: Job, ready_at: float) -> bytes:
        message = jobs.encode(item, ready_at=ready_at)
        if self.max_message_bytes is not None and len(message) > self.max_message_bytes:
            raise MessageTooLargeError(item, len(message), self.max_message_bytes)
        return message

    def close(self) -> None:
        """Release the connections of a client built from ``url``."""
        self._queue.client.close()


def _stored_or_raise(job: Job, stored: bool) -> str:
    if not stored:
        raise JobAlreadyExistsError(job)
    return job.id


def _unix_time(when: When) -> float:
    if isinstance(when, datetime):
        return when.timestamp()
    if isinstance(when, bool) or not isinstance(when, (int, float)) or not math.isfinite(when):
        raise ConfigurationError(f"when must be a datetime or unix seconds, not {when!r}")
    return float(when)


def _seconds(delay: Delay) -> float:
    if isinstance(delay, timedelta):
        delay = delay.total_seconds()
    if isinstance(delay, bool) or not isinstance(delay, (int, float)) or not math.isfinite(delay):
        raise ConfigurationError(f"delay must be a timedelta or seconds, not {delay!r}")
    if delay < 0:
        raise ConfigurationError(f"delay must not be negative, got {delay!r}")
    return float(delay)
