"""The Producer: enqueues jobs. Works in plain threaded programs as well as under gevent."""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime, timedelta
from typing import Any, Union

import redis

from gq import job as jobs
from gq.errors import ConfigurationError, JobAlreadyExistsError, MessageTooLargeError
from gq.job import Job, JobLike
from gq.store.config import check_queue_name, resolve_client
from gq.store.jobs import RedisQueue

#: Default ``max_message_bytes``: far above ordinary job payloads, far below what would
#: stall a single-threaded Redis while a script copies the message (docs/decisions.md).
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024

When = Union[datetime, float, int]
Delay = Union[timedelta, float, int]


class ProducerCore:
    """What ``Producer`` and ``gq.aio.Producer`` share: checks, messages, script arguments
    and the reading of replies. Only the Redis calls differ (blocking or awaited)."""

    def __init__(self, queue: str, max_message_bytes: int | None) -> None:
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

    def _push_args(self, job: JobLike) -> tuple[Job, list[tuple[str, bytes]]]:
        item = jobs.to_job(job)
        return item, [(item.id, self._encode(item, time.time()))]

    def _at_args(self, when: When, job: JobLike) -> tuple[Job, list[tuple[str, bytes, float]]]:
        at = _unix_time(when)
        item = jobs.to_job(job)
        return item, [(item.id, self._encode(item, at), at)]

    def _after_args(self, delay: Delay, job: JobLike) -> tuple[Job, list[tuple[str, bytes, float]]]:
        seconds = _seconds(delay)
        item = jobs.to_job(job)
        # ReadyAt is for display: the schedule itself counts the delay on the server's clock.
        return item, [(item.id, self._encode(item, time.time() + seconds), seconds)]

    def _many_args(self, batch: Iterable[JobLike]) -> tuple[list[Job], list[tuple[str, bytes]]]:
        items = [jobs.to_job(job) for job in batch]
        now = time.time()
        # Every message is encoded (and checked) before the first is written.
        return items, [(item.id, self._encode(item, now)) for item in items]

    def _encode(self, item: Job, ready_at: float) -> bytes:
        message = jobs.encode(item, ready_at=ready_at)
        if self.max_message_bytes is not None and len(message) > self.max_message_bytes:
            raise MessageTooLargeError(item, len(message), self.max_message_bytes)
        return message


class Producer(ProducerCore):
    """Puts jobs on queue ``queue``.

    A ``redis.ConnectionError`` from any ``perform*`` call means the job may or may not
    be stored: calling again with the same job id is safe, and a ``JobAlreadyExistsError``
    then means the first call went through.

    ``client`` may be a ``redis.Redis``, a ``redis.cluster.RedisCluster`` (the queue name
    then needs a hash tag, ``"{emails}"``) or a Sentinel's ``master_for`` client.
    ``max_message_bytes`` (default 1 MiB, ``None`` for no limit) bounds each encoded
    message: a bigger job raises ``MessageTooLargeError`` before anything is written.
    ``gq.aio.Producer`` is the same for asyncio programs.
    """

    def __init__(
        self,
        queue: str,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
    ) -> None:
        super().__init__(queue, max_message_bytes)
        self._queue = RedisQueue(resolve_client(url, client), self.queue)

    def perform(self, job: JobLike) -> str:
        """Queue ``job`` (bytes or Job) to run as soon as possible; return its id."""
        item, messages = self._push_args(job)
        return stored_or_raise(item, self._queue.push(messages))

    def perform_at(self, when: When, job: JobLike) -> str:
        """Queue ``job`` to run at ``when`` (a datetime or unix seconds); return its id.

        The time is taken as given: a naive datetime is local time, as ``datetime.timestamp``
        reads it.
        """
        item, entries = self._at_args(when, job)
        return stored_or_raise(item, self._queue.schedule(entries, relative=False))

    def perform_after(self, delay: Delay, job: JobLike) -> str:
        """Queue ``job`` to run ``delay`` (timedelta or seconds) after the Redis server's now."""
        item, entries = self._after_args(delay, job)
        return stored_or_raise(item, self._queue.schedule(entries, relative=True))

    def perform_many(self, batch: Iterable[JobLike]) -> list[str]:
        """Queue many jobs in few round trips; return their ids in order.

        Every job with a new id is stored; if some ids already existed, the call then
        raises ``JobAlreadyExistsError`` whose ``duplicates`` lists the refused jobs.
        """
        items, messages = self._many_args(batch)
        if not items:
            return []
        return all_stored_or_raise(items, self._queue.push(messages))

    def close(self) -> None:
        """Release the connections of a client built from ``url``."""
        self._queue.client.close()


def stored_or_raise(job: Job, stored: list[bool]) -> str:
    """The id of a job that one script call stored, or ``JobAlreadyExistsError``."""
    if not stored[0]:
        raise JobAlreadyExistsError(job)
    return job.id


def all_stored_or_raise(items: list[Job], stored: list[bool]) -> list[str]:
    """The ids of a batch, or ``JobAlreadyExistsError`` listing the jobs refused."""
    refused = [item for item, ok in zip(items, stored) if not ok]
    if refused:
        raise JobAlreadyExistsError(refused[0], refused)
    return [item.id for item in items]


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
