"""Handlers of the fault suite, run by ``tests.fault_worker tests.fault_handlers:record``.

Every finished job's id is pushed on ``<queue>:test:done`` (a list: a job run twice shows
up twice, each run with a token of its own) on ``GQ_TEST_HANDLER_URL``, through a client
named ``gq-test-recorder`` that the suite never cuts and that retries through a Redis
restart. A job's data says what to do:

- empty or a number: wait that many seconds (simulated I/O), then record;
- ``poison``: kill the worker process, as an OOM kill or a segfault would;
- ``busy:N``: compute for N seconds without yielding to the gevent hub, then record;
- ``spin``: compute forever without yielding (only ``job_timeout`` and the watchdog stop it);
- ``freeze:N``: hold the hub for N seconds in C code (an unpatched sleep), the first time
  only (a flag on the recorder), as an uninterruptible C call would; then record.
"""

from __future__ import annotations

import os
import time
import uuid

import gevent
import redis
from gevent import monkey
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

import gq

RECORDER = "gq-test-recorder"
POISON_EXIT = 17

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(
            os.environ["GQ_TEST_HANDLER_URL"],
            client_name=RECORDER,
            retry=Retry(ExponentialBackoff(cap=0.5, base=0.05), 100),
            retry_on_error=[redis.ConnectionError, redis.TimeoutError, redis.BusyLoadingError],
        )
    return _client


def record(job: gq.Job) -> None:
    data = job.data.decode()
    if data == "poison":
        os._exit(POISON_EXIT)
    if data == "spin":
        while True:
            pass
    if data.startswith("freeze:"):
        if _redis().set(f"{os.environ['GQ_QUEUE']}:test:frozen:{job.id}", 1, nx=True):
            monkey.get_original("time", "sleep")(float(data[7:]))
    elif data.startswith("busy:"):
        deadline = time.monotonic() + float(data[5:])
        while time.monotonic() < deadline:  # never yields: the hub is starved meanwhile
            pass
    elif data:
        gevent.sleep(float(data))
    # A token per run: a push that the recorder's client re-sent after a lost reply then
    # shows up as the same run twice, which the count ignores; a job run twice does not.
    _redis().rpush(f"{os.environ['GQ_QUEUE']}:test:done", f"{job.id} {uuid.uuid4().hex}")
