"""The handler of benchmarks/recovery.py: sleep BENCH_SLEEP_S (simulated I/O), then push
"<id> <unix time>" on ``<queue>:bench:done`` so the benchmark sees when each job ended."""

from __future__ import annotations

import os
import time

import gevent
import redis

import gq

_client = redis.Redis.from_url(os.environ["BENCH_URL"])
_sleep = float(os.environ.get("BENCH_SLEEP_S", "0.3"))
_done_key = f"{os.environ['BENCH_QUEUE']}:bench:done"


def sleep_and_record(job: gq.Job) -> None:
    gevent.sleep(_sleep)
    _client.rpush(_done_key, f"{job.id} {time.time()}")
