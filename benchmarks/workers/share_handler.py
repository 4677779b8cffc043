"""The handler of benchmarks/prefetch.py's sharing runs: sleep BENCH_SLEEP_S, then push
this worker's label (BENCH_LABEL) on ``<queue>:bench:ran``."""

from __future__ import annotations

import os

import gevent
import redis

import gq

_client = redis.Redis.from_url(os.environ["BENCH_URL"])
_sleep = float(os.environ.get("BENCH_SLEEP_S", "0.1"))
_label = os.environ.get("BENCH_LABEL", "?")
_key = f"{os.environ['BENCH_QUEUE']}:bench:ran"


def sleep_and_tag(job: gq.Job) -> None:
    gevent.sleep(_sleep)
    _client.rpush(_key, _label)
