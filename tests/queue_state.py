"""Reading and writing a queue's Redis state the way curlyq would, for assertions.

Tests build state with raw commands (not gq's scripts) so that gq is checked against
what a curlyq peer leaves in Redis, and read it back without going through gq.
"""

from __future__ import annotations

from collections.abc import Iterable

import redis

from gq import job as jobs
from gq.job import Job
from gq.store.keys import QueueKeys


def enqueue_raw(client: redis.Redis, queue: str, items: Iterable[Job]) -> list[str]:
    """curlyq's test helper: HSET the messages, RPUSH the ids, reset the signal."""
    keys = QueueKeys(queue)
    items = list(items)
    client.hset(keys.data, mapping={job.id: jobs.encode(job) for job in items})
    client.rpush(keys.active, *[job.id for job in items])
    client.delete(keys.signal)
    client.lpush(keys.signal, 1)
    return [job.id for job in items]


def active(client: redis.Redis, queue: str) -> list[str]:
    return [x.decode() for x in client.lrange(QueueKeys(queue).active, 0, -1)]


def scheduled(client: redis.Redis, queue: str) -> dict[str, float]:
    return {
        k.decode(): s for k, s in client.zrange(QueueKeys(queue).scheduled, 0, -1, withscores=True)
    }


def dead(client: redis.Redis, queue: str) -> dict[str, float]:
    return {k.decode(): s for k, s in client.zrange(QueueKeys(queue).dead, 0, -1, withscores=True)}


def inflight(client: redis.Redis, queue: str, consumer_id: str) -> set[str]:
    return {x.decode() for x in client.smembers(QueueKeys(queue).inflight(consumer_id))}


def message(client: redis.Redis, queue: str, job_id: str) -> bytes | None:
    return client.hget(QueueKeys(queue).data, job_id)  # type: ignore[no-any-return]


def signal(client: redis.Redis, queue: str) -> list[bytes]:
    return client.lrange(QueueKeys(queue).signal, 0, -1)  # type: ignore[no-any-return]


def server_time(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds + micros / 1e6
