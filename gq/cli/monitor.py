"""Greenlets that watch a running consumer from the outside: the periodic report and
``--burst``'s "nothing left to do" check. Neither touches the consumer's internals:
they read ``consumer.stats`` and Redis, and call ``consumer.stop()``."""

from __future__ import annotations

import logging
import time

import gevent
import redis

from gq.store.base import describe
from gq.store.jobs import RedisQueue
from gq.worker.consumer import Consumer

log = logging.getLogger("gq.worker")

BURST_CHECK_INTERVAL = 0.25


def report_loop(consumer: Consumer, interval: float) -> None:
    """Every ``interval`` seconds, log the counters and the rate since the last line."""
    last_done, last_time = 0, time.monotonic()
    while True:
        gevent.sleep(interval)
        stats, now = consumer.stats, time.monotonic()
        rate = (stats.done - last_done) / max(now - last_time, 1e-9)
        log.info(
            "%s: done=%d failed=%d retried=%d killed=%d rate=%.1f jobs/s",
            consumer.context,
            stats.done,
            stats.failed,
            stats.retried,
            stats.killed,
            rate,
        )
        last_done, last_time = stats.done, now


def burst_loop(
    consumer: Consumer, rqs: list[RedisQueue], interval: float = BURST_CHECK_INTERVAL
) -> None:
    """Stop ``consumer`` once nothing is ready (in the active list or in a group's line),
    nothing is due and it holds nothing.

    The counts come from one atomic read, so a job on its way from one place to
    the next (scheduled -> active -> in flight -> acknowledged) is always seen somewhere.
    A job retried later than now does not hold the run: burst means "what is due now".
    """
    while True:
        try:
            left = sum(sum(rq.backlog(consumer.id)) for rq in rqs)
        except redis.RedisError as exc:
            log.warning(
                "%s: burst check failed, trying again: %s", consumer.context, describe(exc)
            )
        else:
            if left == 0:
                log.info("%s: burst: nothing ready, due or in flight; stopping", consumer.context)
                consumer.stop()
                return
        gevent.sleep(interval)
