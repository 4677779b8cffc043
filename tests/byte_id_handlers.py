"""A handler for job ids that are not UTF-8 (curlyq's Go strings hold any bytes), run by
``gq-worker tests.byte_id_handlers:by_prefix``. It records every run in
``<queue>:test:runs`` as the id's exact bytes, a space and the attempt, then acts on the
id's prefix: "ok" succeeds, "retry" fails its first attempt, "kill" always fails."""

from __future__ import annotations

import os

import redis

import gq

_client: redis.Redis | None = None


def raw_id(job: gq.Job) -> bytes:
    """The id's bytes as they are in Redis (gq decodes ids with surrogateescape)."""
    return job.id.encode("utf-8", "surrogateescape")


def record_and_act(client: redis.Redis, queue: str, job: gq.Job) -> None:
    raw = raw_id(job)
    client.rpush(f"{queue}:test:runs", raw + b" %d" % job.attempt)
    if raw.startswith(b"kill") or (raw.startswith(b"retry") and job.attempt == 0):
        raise RuntimeError("failed on purpose")


def by_prefix(job: gq.Job) -> None:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["GQ_TEST_HANDLER_URL"])
    record_and_act(_client, os.environ["GQ_QUEUE"], job)
