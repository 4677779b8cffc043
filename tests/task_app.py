"""A task module for the gq-worker tests: an app with no Redis of its own (the worker
gives it its --url), tasks on two queues named by $GQ_TEST_TASK_QUEUE, a raw handler,
and a periodic entry. Each run is recorded in Redis, on the list <queue>:ran."""

from __future__ import annotations

import os

import redis

import gq

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "tasks")
app = gq.App(queue=QUEUE)


def record(what: str) -> None:
    redis.Redis.from_url(os.environ["GQ_REDIS_URL"]).rpush(f"{QUEUE}:ran", what)


@app.task(name="hello")
def hello(name: str) -> str:
    job = gq.current_job()
    assert job is not None
    record(f"hello {name} {job.queue} {job.attempt}")
    return name


@app.task(name="other", queue=f"{QUEUE}-b")
def other(n: int) -> None:
    record(f"other {n}")


@app.task(name="fails")
def fails() -> None:
    record("fails")
    raise ValueError("always")


@app.raw(queue=f"{QUEUE}-b")
def legacy(job: gq.Job) -> None:
    record(f"raw {job.data.decode()}")


if os.environ.get("GQ_TEST_TASK_PERIODIC"):
    app.periodic("tick", hello.s("tick"), every=1)
