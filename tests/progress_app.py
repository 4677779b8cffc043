"""A task app for the progress tests' gq-worker: ``steps`` reports its progress in a
tight loop, then holds until the test pushes to <queue>:release (BLPOP), so that the
test reads its progress from another process while it runs."""

from __future__ import annotations

import os

import redis

import gq

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "progress")
app = gq.App(queue=QUEUE)


@app.task(name="steps", result_ttl=60)
def steps(total: int) -> int:
    job = gq.current_job()
    assert job is not None
    for done in range(total):
        job.progress(done / total, note=f"{done} of {total} files")
    client = redis.Redis.from_url(os.environ["GQ_REDIS_URL"])
    client.blpop([f"{QUEUE}:release"], 30)
    return total
