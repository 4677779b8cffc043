"""Worker facts and throughput history: what a consumer writes about itself every
``report_interval`` (5 s), for ``gq consumers`` and the dashboard (SPEC section 10).

Every report interval, one pipelined round trip per queue of the consumer adds the queue to
the registry (``gq:queues``), stores the consumer's facts (``Q:facts:<id>``, JSON, expiring
with the consumer's lease) and adds the per-minute counts of that queue's ``Recorder`` to
the hourly history keys (``Q:history:<hour>``). A failed write never fails the heartbeat:
the counts go back for the next one, and the facts are rewritten anyway.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import time
from collections.abc import Mapping
from typing import Any, Callable

import psutil
import redis

from gq.options import UNSTATED_LEASE, ConsumerOptions
from gq.store.base import describe
from gq.store.jobs import RedisQueue
from gq.version import __version__
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.heartbeat")

#: How long a history key lives after its last write (25 h: the last 24 h stay readable).
HISTORY_TTL = 90_000
#: Facts and history are written this often (or with each heartbeat, if more often): the
#: counts an operator sees are never older than this, at one round trip per queue.
REPORT_SECONDS = 5.0


def lease_seconds(opts: ConsumerOptions) -> float:
    """How long after its last heartbeat a custodian may recover a consumer's jobs: its
    last heartbeat may be an interval old when its timeout starts."""
    return opts.heartbeat_poll_interval + opts.custodian_consumer_timeout


def report_interval(opts: ConsumerOptions) -> float:
    """Seconds between two writes of a consumer's facts and history."""
    return min(REPORT_SECONDS, opts.heartbeat_poll_interval)


class Reporter:
    """Writes one consumer's facts and history under each of its queues: ``beat`` every
    report interval and with each heartbeat, which also gives it the server's time.
    ``recorders`` holds one ``Recorder`` per name of ``queues``, in the same order;
    ``running`` reads the consumer's handlers running."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        recorders: Mapping[str, Recorder],
        context: str,
        running: Callable[[], int] = lambda: 0,
    ) -> None:
        self._queues = queues
        self._names = list(queues)
        self._id = consumer_id
        self._opts = opts
        self._recorders = recorders
        self._running = running
        self._context = context
        self._started_at = time.time()
        self._host = socket.gethostname()
        self._process = psutil.Process()
        self._process.cpu_percent(None)  # the first reading is 0.0: prime it now
        self._failing = False
        self._offset = 0.0  # the Redis server's clock minus this host's
        self._heartbeat_at = 0.0  # the server's time of the last heartbeat
        # The consumer's name and the process behind it (gq/worker/identity.py), once named.
        self.identity: dict[str, Any] = {}

    def learn_clock(self, server_now: float) -> None:
        """A heartbeat went through at ``server_now`` (the server's time)."""
        self._offset = offset = server_now - time.time()
        self._heartbeat_at = server_now
        for recorder in self._recorders.values():
            recorder.history.offset = offset

    def beat(self, server_now: float | None = None) -> None:
        """Write the facts and the counts so far; ``server_now`` is given by a heartbeat
        (the server's time it answered), else taken from the clock it taught."""
        if server_now is None:
            server_now = time.time() + self._offset
        else:
            self.learn_clock(server_now)
        # One reading per write: the CPU is measured since the previous reading.
        usage = self._usage()
        self._write_all(
            {name: json.dumps(self._facts(name, server_now, usage)) for name in self._names}
        )

    def final(self) -> None:
        """At a graceful stop: write the last counts and delete the facts."""
        self._write_all(dict.fromkeys(self._names))

    def facts(self, now: float, queue: str | None = None) -> dict[str, Any]:
        """The facts object written under ``queue`` (default: the first) (docs/metrics.md)."""
        return self._facts(queue or self._names[0], now, self._usage())

    def _usage(self) -> tuple[int, float]:
        with self._process.oneshot():
            return int(self._process.memory_info().rss), float(self._process.cpu_percent(None))

    def _facts(self, queue: str, now: float, usage: tuple[int, float]) -> dict[str, Any]:
        # The counts are this queue's; everything else, running included, the consumer's.
        recorder, opts = self._recorders[queue], self._opts
        return {
            "id": self._id,
            "host": self._host,
            "pid": os.getpid(),
            "started_at": self._started_at,
            "version": __version__,
            "queues": self._names,
            "concurrency": opts.processor_concurrency,
            "running": self._running(),
            "jobs_done": recorder.totals["done"],
            "jobs_failed": recorder.failures,  # retried + dead, as before "jobs_retried"
            "jobs_retried": recorder.totals["retried"],
            "jobs_dead": recorder.totals["killed"],
            "rss_bytes": usage[0],
            "cpu_percent": usage[1],
            "updated_at": now,
            "heartbeat_at": self._heartbeat_at,
            "report_interval": report_interval(opts),
            "heartbeat_interval": opts.heartbeat_poll_interval,
            # A custodian may recover this consumer's jobs once its last heartbeat is this
            # old (Consumer._custodian_pass): what a reader shows as "to be recovered at".
            "lease_seconds": lease_seconds(opts),
            **self.identity,
        }

    def _write_all(self, facts: Mapping[str, str | None]) -> None:
        errors = [error for name, text in facts.items() for error in self._write(name, text)]
        # The heartbeat itself went through (or its own failure is reported by its loop):
        # facts and history are worth a warning (once per failing spell), not the
        # consumer's life.
        if errors and not self._failing:
            log.warning(
                "%s: could not write facts and history: %s", self._context, describe(errors[0])
            )
        self._failing = bool(errors)

    def _write(self, queue: str, facts: str | None) -> list[Exception]:
        """One queue's facts and counts, in one round trip; the errors of what failed."""
        history = self._recorders[queue].history
        counts = history.take()
        # The facts outlive the lease by the unstated one: a custodian judges a consumer
        # whose facts are gone by curlyq's lease, so a dead gq consumer's must still be
        # there when its own lease ends (readers show a dead one's as last reported).
        ttl = lease_seconds(self._opts) + UNSTATED_LEASE
        try:
            refused, errors = self._queues[queue].report(self._id, facts, ttl, counts, HISTORY_TTL)
        except redis.RedisError as exc:  # the round trip failed: nothing is known written
            refused, errors = counts, [exc]
        history.restore(refused)
        return errors
