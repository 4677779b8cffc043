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
from gq.store.reshard import REFRESH as RESHARD_REFRESH
from gq.store.shards import Layout, check_shards, declare, layout, positions

#: Default ``max_message_bytes``: far above ordinary job payloads, far below what would
#: stall a single-threaded Redis while a script copies the message (docs/decisions.md).
DEFAULT_MAX_MESSAGE_BYTES = 1024 * 1024

#: The latest time a job may be scheduled for: the last second of year 9999 (UTC), the
#: end of the calendar the pages and ``gq`` show times in. A later time is a unit bug
#: (milliseconds given as seconds) and could only be shown as "after year 9999".
MAX_SCHEDULE_TIME = 253402300799.0

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
    ``shards=N`` makes ``queue`` a sharded queue (docs/deployment.md, "One queue over
    many masters"): each job goes to one of N plain queues, chosen by its id.
    ``gq.aio.Producer`` is the same for asyncio programs, shards included.
    """

    def __init__(
        self,
        queue: str,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
        shards: int | None = None,
    ) -> None:
        super().__init__(queue, max_message_bytes)
        redis_client = resolve_client(url, client)
        self._shards = None if shards is None else check_shards(self.queue, shards)
        self._plan: Layout | None = None  # declared in Redis at the first write
        self._plan_until = 0.0  # when to look at Redis's layout again
        self._queues: dict[str, RedisQueue] = {}
        first = self.queue if self._shards is None else layout(self.queue, self._shards).queues[0]
        self._queue = RedisQueue(redis_client, first)  # (a sharded queue's: its first shard)

    def _route(self, job_ids: list[str]) -> list[tuple[RedisQueue, list[int]]]:
        """Each queue the jobs ``job_ids`` go to, with their positions."""
        if self._shards is None:
            return [(self._queue, list(range(len(job_ids))))]
        plan = self._plan
        if plan is None or time.monotonic() >= self._plan_until:  # a reshard may move it
            plan = self._plan = declare(self._queue.client, self.queue, self._shards)
            self._plan_until = time.monotonic() + RESHARD_REFRESH
        parts = positions([plan.for_id(job_id) for job_id in job_ids])
        return [(self._shard(name), where) for name, where in parts.items()]

    def _shard(self, name: str) -> RedisQueue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = RedisQueue(self._queue.client, name)
        return queue

    def _one(self, job: Job) -> RedisQueue:
        return self._route([job.id])[0][0]

    def perform(self, job: JobLike) -> str:
        """Queue ``job`` (bytes or Job) to run as soon as possible; return its id."""
        item, messages = self._push_args(job)
        return stored_or_raise(item, self._one(item).push(messages))

    def perform_at(self, when: When, job: JobLike) -> str:
        """Queue ``job`` to run at ``when`` (a datetime or unix seconds); return its id.

        The time is taken as given: a naive datetime is local time, as ``datetime.timestamp``
        reads it.
        """
        item, entries = self._at_args(when, job)
        return stored_or_raise(item, self._one(item).schedule(entries, relative=False))

    def perform_after(self, delay: Delay, job: JobLike) -> str:
        """Queue ``job`` to run ``delay`` (timedelta or seconds) after the Redis server's now."""
        item, entries = self._after_args(delay, job)
        return stored_or_raise(item, self._one(item).schedule(entries, relative=True))

    def perform_many(self, batch: Iterable[JobLike]) -> list[str]:
        """Queue many jobs in few round trips; return their ids in order.

        Every job with a new id is stored; if some ids already existed, the call then
        raises ``JobAlreadyExistsError`` whose ``duplicates`` lists the refused jobs.
        """
        items, messages = self._many_args(batch)
        if not items:
            return []
        stored = [False] * len(items)
        for queue, where in self._route([item.id for item in items]):
            replies = queue.push([messages[i] for i in where])
            for position, reply in zip(where, replies):
                stored[position] = reply
        return all_stored_or_raise(items, stored)

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
    at = _finite(when.timestamp() if isinstance(when, datetime) else when, "when")
    if at > MAX_SCHEDULE_TIME:
        raise ConfigurationError(f"when must be at most the end of year 9999, got {when!r}")
    return at


def _seconds(delay: Delay) -> float:
    seconds = _finite(delay.total_seconds() if isinstance(delay, timedelta) else delay, "delay")
    if seconds < 0:
        raise ConfigurationError(f"delay must not be negative, got {delay!r}")
    if time.time() + seconds > MAX_SCHEDULE_TIME:
        raise ConfigurationError(f"delay must end at most at the end of year 9999, got {delay!r}")
    return seconds


def _finite(value: object, name: str) -> float:
    """``value`` as finite float seconds, or the error that names ``name``."""
    kind = "a datetime or unix seconds" if name == "when" else "a timedelta or seconds"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        try:
            seconds = float(value)
        except OverflowError:  # an int beyond any float
            seconds = math.inf
        if math.isfinite(seconds):
            return seconds
    raise ConfigurationError(f"{name} must be {kind}, not {value!r}")
