"""Tasks for tests/test_retry_logs.py's gq-worker run: one asks for a retry, one fails
once, one always fails. Their queue is $GQ_TEST_TASK_QUEUE; each success is recorded on
the list <queue>:ran."""

from __future__ import annotations

import os

import redis

import gq

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "tasks")
app = gq.App(queue=QUEUE)


def record(what: str) -> None:
    redis.Redis.from_url(os.environ["GQ_REDIS_URL"]).rpush(f"{QUEUE}:ran", what)


def attempt() -> int:
    job = gq.current_job()
    assert job is not None
    return job.attempt


@app.task(name="asks")
def asks() -> None:
    if attempt() == 0:
        raise gq.Retry(after=0.2, reason="the receiver said 429")
    record("asks")


@app.task(name="flaky")
def flaky() -> None:
    if attempt() == 0:
        raise ConnectionError("reset by peer")
    record("flaky")


@app.task(name="broken", retries=1, backoff=0.1)
def broken() -> None:
    raise ValueError("broken for good")
