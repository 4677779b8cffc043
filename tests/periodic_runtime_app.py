"""A task app for the runtime periodic tests' gq-worker processes: ``stamp`` records the
id of each job it runs on the list <queue>:ran."""

from __future__ import annotations

import os

import redis

import gq

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "periodic-runtime")
app = gq.App(queue=QUEUE)


@app.task(name="stamp")
def stamp(label: str) -> None:
    job = gq.current_job()
    assert job is not None and label == "rt"
    redis.Redis.from_url(os.environ["GQ_REDIS_URL"]).rpush(f"{QUEUE}:ran", job.id)
