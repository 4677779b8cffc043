"""``gq.aio.Producer``: the Producer's methods as coroutines on ``redis.asyncio``.

For asyncio programs (FastAPI, Starlette, aiohttp), where a blocking redis-py call would
stall every request of the event loop. It runs the same scripts with the same arguments
and writes the same messages as ``gq.Producer``, whose argument building and reply
reading it shares (``gq.producer.ProducerCore``); only the Redis calls are awaited.
Nothing here needs gevent: it works in a plain, unpatched process.
"""

from __future__ import annotations

import inspect
import time
from collections.abc import AsyncIterator, Iterable
from typing import Any

import redis.asyncio
from redis.asyncio.retry import Retry
from redis.backoff import NoBackoff

from gq import events as job_events
from gq import sharded_reads
from gq.errors import ConfigurationError
from gq.job import JobLike
from gq.producer import (
    DEFAULT_MAX_MESSAGE_BYTES,
    Delay,
    ProducerCore,
    When,
    all_stored_or_raise,
    stored_or_raise,
)
from gq.store.aio import AsyncRedisQueue
from gq.store.connection import (
    CLUSTER_SCHEMES,
    FAKEREDIS_SCHEME,
    SCHEMES_HELP,
    SENTINEL_SCHEMES,
    checked_url,
    embedded_server,
    redact_url,
)
from gq.store.reshard import REFRESH as RESHARD_REFRESH
from gq.store.shards import Layout, adeclare, check_shards, layout, positions

__all__ = ["Producer", "client_from_url"]


class Producer(ProducerCore):
    """Puts jobs on queue ``queue`` from asyncio code; ``gq.Producer`` with awaited methods.

    ``client`` may be a ``redis.asyncio.Redis`` (a Sentinel's ``master_for`` client is one)
    or a ``redis.asyncio.cluster.RedisCluster`` (the queue name then needs a hash tag,
    ``"{emails}"``); ``url`` takes the URLs ``gq.Producer`` takes (``redis://``,
    ``rediss://``, ``unix://``, ``redis+cluster://``, ``redis+sentinel://``,
    ``fakeredis://``, and the ``valkey`` forms of each). Errors, duplicates,
    ``max_message_bytes`` and the safe retry after a ``redis.ConnectionError`` are those
    of ``gq.Producer``; ``shards=N`` routes to a sharded queue's shards as it does. Use it
    as ``async with``, or call ``await producer.close()``, to
    release the connections of a client built from ``url``.
    """

    def __init__(
        self,
        queue: str,
        *,
        url: str | None = None,
        client: Any | None = None,
        max_message_bytes: int | None = DEFAULT_MAX_MESSAGE_BYTES,
        shards: int | None = None,
    ) -> None:
        super().__init__(queue, max_message_bytes)
        if client is None and url is None:
            raise ConfigurationError("pass url= or client= to reach Redis")
        if client is not None:
            _check_asyncio_client(client)
        self._owns_client = client is None
        self._shards = None if shards is None else check_shards(self.queue, shards)
        self._plan: Layout | None = None  # declared in Redis at the first write
        self._plan_until = 0.0  # when to look at Redis's layout again (a reshard moves it)
        first = queue if self._shards is None else layout(queue, self._shards).queues[0]
        self._queue = AsyncRedisQueue(client if client is not None else client_from_url(url), first)
        self._queues = {first: self._queue}

    async def _route(self, job_ids: list[str]) -> list[tuple[AsyncRedisQueue, list[int]]]:
        """Each queue the jobs ``job_ids`` go to, with their positions (``gq.Producer``'s
        routing: a sharded queue's shard by id, gq/store/shards.py)."""
        if self._shards is None:
            return [(self._queue, list(range(len(job_ids))))]
        plan = self._plan
        if plan is None or time.monotonic() >= self._plan_until:  # as gq.Producer does
            plan = self._plan = await adeclare(self._queue.client, self.queue, self._shards)
            self._plan_until = time.monotonic() + RESHARD_REFRESH
        parts = positions([plan.for_id(job_id) for job_id in job_ids])
        return [(self._shard(name), where) for name, where in parts.items()]

    def _shard(self, name: str) -> AsyncRedisQueue:
        queue = self._queues.get(name)
        if queue is None:
            queue = self._queues[name] = AsyncRedisQueue(self._queue.client, name)
        return queue

    async def _one(self, job_id: str) -> AsyncRedisQueue:
        return (await self._route([job_id]))[0][0]

    async def perform(self, job: JobLike) -> str:
        """Queue ``job`` (bytes or Job) to run as soon as possible; return its id."""
        item, messages = self._push_args(job)
        return stored_or_raise(item, await (await self._one(item.id)).push(messages))

    async def perform_at(self, when: When, job: JobLike) -> str:
        """Queue ``job`` to run at ``when`` (a datetime or unix seconds, taken as given)."""
        item, entries = self._at_args(when, job)
        queue = await self._one(item.id)
        return stored_or_raise(item, await queue.schedule(entries, relative=False))

    async def perform_after(self, delay: Delay, job: JobLike) -> str:
        """Queue ``job`` to run ``delay`` (timedelta or seconds) after the Redis server's now."""
        item, entries = self._after_args(delay, job)
        queue = await self._one(item.id)
        return stored_or_raise(item, await queue.schedule(entries, relative=True))

    async def perform_many(self, batch: Iterable[JobLike]) -> list[str]:
        """Queue many jobs in few round trips; return their ids in order (see
        ``gq.Producer.perform_many`` for duplicates)."""
        items, messages = self._many_args(batch)
        if not items:
            return []
        stored = [False] * len(items)
        for queue, where in await self._route([item.id for item in items]):
            for position, reply in zip(where, await queue.push([messages[i] for i in where])):
                stored[position] = reply
        return all_stored_or_raise(items, stored)

    async def close(self) -> None:
        """Release the connections of a client built from ``url`` (a given client is the
        caller's to close)."""
        if self._owns_client:
            client = self._queue.client
            await (client.aclose() if hasattr(client, "aclose") else client.close())

    async def __aenter__(self) -> Producer:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def events(queue: str, *, client: Any, since: str | None = None, block: float | None = None,
           count: int = job_events.DEFAULT_COUNT,
           shards: int | None = None) -> AsyncIterator[job_events.Event]:  # fmt: skip
    """``gq.Queue.events`` for asyncio code, on a ``redis.asyncio`` client (its own
    connection while it blocks): ``async for event in gq.aio.events("emails", client=c,
    since="0", block=5.0)``. Turn the stream on with ``gq.Queue.enable_events``. With
    ``shards=N``, a sharded queue's events merged over its shards, as its ``gq.Queue``
    reads them (each names its ``shard`` and the ``cursor`` to resume after it)."""
    _check_asyncio_client(client)
    if shards is None:
        return job_events.aread(client, queue, since, block=block, count=count)
    check_shards(queue, shards)
    return sharded_reads.aread_events(client, queue, shards, since, block=block, count=count)


def _check_asyncio_client(client: Any) -> None:
    # A blocking client would write the job and then fail on `await`: refuse it up front.
    if not inspect.iscoroutinefunction(getattr(client, "execute_command", None)):
        raise ConfigurationError(
            f"gq.aio.Producer needs a redis.asyncio client, not {type(client).__name__}; "
            "use gq.Producer for a blocking client"
        )


def client_from_url(url: str | None) -> Any:
    """A ``redis.asyncio`` client for ``url``, with redis-py's retries off as in
    ``gq.store.connection`` (gq's callers decide about failures: a retried push would report
    the job's own id as a duplicate). The pool of a single-host URL waits, rather than
    fails, when full; cluster and sentinel pools are unbounded, as for ``gq.Producer``."""
    url = checked_url(url)
    scheme = url.split(":", 1)[0].lower()
    if scheme == FAKEREDIS_SCHEME:
        import fakeredis

        # In-process connections cost nothing: no pool limit for 1,000 concurrent performs.
        return fakeredis.FakeAsyncRedis(server=embedded_server(url), max_connections=2**31)
    if scheme in CLUSTER_SCHEMES or scheme in SENTINEL_SCHEMES:
        return _topology_client(url, scheme)
    if scheme not in ("redis", "rediss", "unix"):
        raise ConfigurationError(
            f"unsupported Redis URL scheme {scheme!r} in {redact_url(url)}; {SCHEMES_HELP}"
        )
    try:
        pool = redis.asyncio.BlockingConnectionPool.from_url(
            url, retry=Retry(NoBackoff(), 0), timeout=None
        )
    except ValueError as exc:
        raise ConfigurationError(f"bad Redis URL {redact_url(url)}: {exc}") from None
    return redis.asyncio.Redis(connection_pool=pool)


def _topology_client(url: str, scheme: str) -> Any:
    """redis.asyncio's cluster or sentinel client for gq's URL forms (``gq.store.topology``)."""
    from gq.store import topology

    try:
        if scheme in CLUSTER_SCHEMES:
            return topology.async_cluster_client(url, Retry(NoBackoff(), 0))
        return topology.async_sentinel_client(url, Retry(NoBackoff(), 0))
    except ValueError as exc:  # a malformed URL
        message = topology.scrub(str(exc), url)
        raise ConfigurationError(f"bad Redis URL {redact_url(url)}: {message}") from None
