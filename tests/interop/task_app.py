"""A gq.App for the Go task interop tests (tests/test_interop_tasks.py), run by a real
gq-worker: its tasks record each run, MessagePack-encoded with its types, on the Redis
list <queue>:ran ($GQ_TEST_TASK_QUEUE), so the test compares values and types."""

from __future__ import annotations

import functools
import os
from typing import Any

import gevent
import msgpack

import gq
from gq.store.connection import client_from_url

QUEUE = os.environ.get("GQ_TEST_TASK_QUEUE", "go-tasks")
app = gq.App(queue=QUEUE, retries=5)  # the Go envelope's opts override these defaults


def record(*args: Any, **kwargs: Any) -> int:
    job = gq.current_job()
    assert job is not None
    run = {"id": job.id, "task": job.task, "attempt": job.attempt, "args": list(args),
           "kwargs": kwargs, "headers": dict(job.headers)}  # fmt: skip
    sink().rpush(f"{QUEUE}:ran", msgpack.packb(run, use_bin_type=True, datetime=True))
    return job.attempt


@functools.cache
def sink() -> Any:
    """The worker's Redis, a Cluster too (tests/test_go_sharded_cluster.py)."""
    return client_from_url(os.environ["GQ_REDIS_URL"])


@app.task(name="deliver")
def deliver(url: str, payload: dict[str, Any], *, tenant: str, blob: bytes, when: Any) -> None:
    if record(url, payload, tenant=tenant, blob=blob, when=when) == 0:
        raise gq.Retry(after=0)  # gq retries the Go job once: its envelope must survive


@app.task(name="always_fails")
def always_fails() -> None:
    record()
    raise ValueError("always")


@app.task(name="sleeps")
def sleeps() -> None:
    record()
    gevent.sleep(60)


@app.task(name="never_runs")
def never_runs() -> None:
    record()
