"""Worker facts and throughput history: what a consumer writes about itself with each
heartbeat, for ``gq consumers`` and the dashboard (SPEC section 10).

With each heartbeat, one pipelined round trip adds the queue to the registry
(``gq:queues``), stores the consumer's facts (``Q:facts:<id>``, JSON, expiring with the
consumer's lease) and adds the per-minute counts of its ``Recorder`` to the hourly history
keys (``Q:history:<hour>``). A failed write never fails the heartbeat: the counts go back
for the next one, and the facts are rewritten anyway.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from typing import Any

import psutil
import redis

import gq
from gq.options import ConsumerOptions
from gq.recorder import Recorder
from gq.redis_queue import RedisQueue

log = logging.getLogger("gq.heartbeat")

#: How long a history key lives after its last write (25 h: the last 24 h stay readable).
HISTORY_TTL = 90_000


class Reporter:
    """Writes one consumer's facts and history; ``beat`` with each heartbeat."""

    def __init__(
        self,
        queue: RedisQueue,
        consumer_id: str,
        opts: ConsumerOptions,
        recorder: Recorder,
        context: str,
    ) -> None:
        self._queue = queue
        self._id = consumer_id
        self._opts = opts
        self._recorder = recorder
        self._context = context
        self._started_at = time.time()
        self._host = socket.gethostname()
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first reading is 0.0: prime it now
        self._failing = False

    def beat(self, server_now: float) -> None:
        """Write the facts and the counts so far; ``server_now`` is the heartbeat's time."""
        self._recorder.history.offset = server_now - time.time()
        self._write(json.dumps(self.facts(server_now)))

    def final(self) -> None:
        """At a graceful stop: write the last counts and delete the facts."""
        self._write(None)

    def facts(self, now: float) -> dict[str, Any]:
        """The facts object of the cross-branch contract (docs/metrics.md)."""
        recorder, opts = self._recorder, self._opts
        with self._process.oneshot():
            rss = int(self._process.memory_info().rss)
            cpu = float(self._process.cpu_percent(None))
        return {
            "id": self._id,
            "host": self._host,
            "pid": os.getpid(),
            "started_at": self._started_at,
            "version": gq.__version__,
            "queues": [self._queue.keys.name],
            "concurrency": opts.processor_concurrency,
            "running": recorder.running(),
            "jobs_done": recorder.totals["done"],
            "jobs_failed": recorder.failures,
            "rss_bytes": rss,
            "cpu_percent": cpu,
            "updated_at": now,
        }

    def _write(self, facts: str | None) -> None:
        history = self._recorder.history
        counts = history.take()
        # The facts expire with the consumer's lease: a reader never shows a dead one's.
        ttl = self._opts.heartbeat_poll_interval + self._opts.custodian_consumer_timeout
        try:
            refused, errors = self._queue.report(self._id, facts, ttl, counts, HISTORY_TTL)
        except redis.RedisError as exc:  # the round trip failed: nothing is known written
            refused, errors = counts, [exc]
        history.restore(refused)
        # The heartbeat itself went through (or its own failure is reported by its loop):
        # facts and history are worth a warning (once per failing spell), not the
        # consumer's life.
        if errors and not self._failing:
            log.warning("%s: could not write facts and history: %r", self._context, errors[0])
        self._failing = bool(errors)
