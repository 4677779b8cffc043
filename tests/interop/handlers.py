"""The gq-worker handler of the interop tests: ``tests.interop.handlers:record``.

Each job it runs is pushed, as ``[id, attempt, data]`` JSON, on ``<queue>:test:done`` of
``GQ_TEST_HANDLER_URL``; data ``sleep:N`` makes it wait N seconds first (a job held in
flight), and ``GQ_TEST_SLEEP`` (seconds) slows every job a little (a fleet that shares).
"""

from __future__ import annotations

import json
import os

import gevent
import redis

import gq

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["GQ_TEST_HANDLER_URL"])
    return _client


def record(job: gq.Job) -> None:
    if job.data.startswith(b"sleep:"):
        gevent.sleep(float(job.data[6:]))
    gevent.sleep(float(os.environ.get("GQ_TEST_SLEEP") or 0))
    entry = json.dumps([job.id, job.attempt, job.data.decode("utf-8", "replace")])
    _redis().rpush(f"{os.environ['GQ_QUEUE']}:test:done", entry)
