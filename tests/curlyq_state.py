"""Redis state written the way curlyq writes it, for the ports of its consumer_test.go.

These helpers use raw Redis commands and ``gq.job.encode``, never gq's Producer or
scripts, so the consumer is tested against curlyq-shaped state (the Go suite's
``createJobs``, ``enqueueJobs``, ``scheduleJobs``, ``assignJobs`` and
``registerConsumer``).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence

import redis

from gq import job as jobs
from gq.job import Job
from gq.store.keys import QueueKeys


def create_jobs(count: int, attempt: int) -> list[Job]:
    """``count`` jobs with fresh UUID4 ids, whose data is their id."""
    created = []
    for _ in range(count):
        job_id = str(uuid.uuid4())
        created.append(Job(id=job_id, data=job_id.encode(), attempt=attempt))
    return created


def ids(items: Iterable[Job]) -> list[str]:
    return [job.id for job in items]


def server_now(client: redis.Redis) -> float:
    """The Redis server's clock, which gq's scripts use for every comparison."""
    seconds, micros = client.time()
    return seconds + micros / 1e6


def store(client: redis.Redis, keys: QueueKeys, items: Sequence[Job]) -> None:
    client.hset(keys.data, mapping={job.id: jobs.encode(job) for job in items})


def enqueue_jobs(client: redis.Redis, keys: QueueKeys, items: Sequence[Job]) -> None:
    """HSET the messages, RPUSH the ids onto active, and raise the signal (DEL + LPUSH)."""
    store(client, keys, items)
    client.rpush(keys.active, *ids(items))
    client.delete(keys.signal)
    client.lpush(keys.signal, 1)


def schedule_jobs(client: redis.Redis, keys: QueueKeys, items: Sequence[Job], at: float) -> None:
    """HSET the messages and ZADD the ids to the scheduled set at unix time ``at``."""
    store(client, keys, items)
    client.zadd(keys.scheduled, {job.id: at for job in items})


def assign_jobs(client: redis.Redis, keys: QueueKeys, items: Sequence[Job], inflight: str) -> None:
    """HSET the messages and SADD the ids to a consumer's in-flight set."""
    store(client, keys, items)
    client.sadd(inflight, *ids(items))


def register_consumer(client: redis.Redis, keys: QueueKeys, inflight: str, at: float) -> None:
    """ZADD a consumer's in-flight key to the consumers set, last seen at unix time ``at``."""
    client.zadd(keys.consumers, {inflight: at})


def texts(values: Iterable[bytes]) -> list[str]:
    return [value.decode() for value in values]


def stored_job(client: redis.Redis, keys: QueueKeys, job_id: str) -> Job:
    message = client.hget(keys.data, job_id)
    assert message is not None, f"no message stored for {job_id}"
    return jobs.decode(message)
