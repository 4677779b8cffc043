"""The handler of benchmarks/restart_recovery.py: push "<id> <unix time>" on
``<queue>:bench:started``, then sleep BENCH_SLEEP_S (a slow call to a tenant's API)."""

from __future__ import annotations

import os
import time

import gevent
import redis

import gq

_client = redis.Redis.from_url(os.environ["BENCH_URL"])
_sleep = float(os.environ.get("BENCH_SLEEP_S", "2"))
_started_key = f"{os.environ['BENCH_QUEUE']}:bench:started"


def start_and_sleep(job: gq.Job) -> None:
    _client.rpush(_started_key, f"{job.id} {time.time()}")
    gevent.sleep(_sleep)
