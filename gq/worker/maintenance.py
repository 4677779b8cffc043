"""The consumer's maintenance steps on Redis (SPEC sections 5 and 7): the scheduler moves
due jobs to ready, the custodian recovers the jobs of consumers whose lease ran out and
tidies the dead set and the recovery counts; and the check, at start, that Redis will not
evict jobs. Each step is one iteration for a ``gq.worker.loops.Loop``."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import redis

from gq.options import ConsumerOptions
from gq.store.base import describe
from gq.store.jobs import DEAD_TRIM_BATCH, RedisQueue
from gq.worker.due import DueListener, DueTimes
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.consumer")


class Maintenance:
    """The scheduler and custodian steps of one consumer's queues; ``recorders`` (read at
    each pass: gq.metrics may replace one before the run) count the recoveries."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        recorders: Mapping[str, Recorder],
        context: str,
    ) -> None:
        self._queues = queues
        self._id = consumer_id
        self._opts = opts
        self._recorders = recorders
        self._context = context
        self._tidy_cursors: dict[str, str] = {}  # where each queue's tidy walks are
        self.due = DueTimes()  # when the scheduler wakes (issue 32: retries on time)
        self.listener = DueListener(queues, self.due)

    def scheduler_step(self) -> bool:
        limit = self._opts.scheduler_max_jobs
        moved = [queue.enqueue_due(limit) for queue in self._queues.values()]
        self.due.read_heads(self._queues)
        return max(moved) >= limit

    def custodian_step(self) -> bool:
        full = [self._custodian_pass(queue) for queue in self._queues.values()]
        return any(full)

    def _custodian_pass(self, queue: RedisQueue) -> bool:
        opts = self._opts
        moved, expired = self._recover(queue)
        if moved:
            self._recorders[queue.keys.name].recovered(moved)
            log.warning("%s: recovered %d job(s) from %d dead consumer(s)", self._context,
                        moved, expired)  # fmt: skip
        return moved >= opts.custodian_max_jobs or self._tidy(queue) >= DEAD_TRIM_BATCH

    def _recover(self, queue: RedisQueue) -> tuple[int, int]:
        """Jobs recovered from the consumers whose lease ended, and how many those were."""
        opts = self._opts
        # The lease: a consumer's last heartbeat may be an interval old when its timeout
        # starts (the facts' "lease_seconds" say the same to readers).
        timeout = opts.heartbeat_poll_interval + opts.custodian_consumer_timeout
        expired = queue.expired_consumers(timeout, opts.custodian_max_jobs)
        moved = queue.recover(
            self._id,
            expired,
            timeout=timeout,
            max_jobs=opts.custodian_max_jobs,
            max_recoveries=opts.job_max_recoveries,
            dead_max_jobs=opts.dead_max_jobs,
            dead_max_age=opts.dead_max_age,
        )
        return moved, len(expired)

    def _tidy(self, queue: RedisQueue) -> int:
        """Trim the dead set by age and size on the custodian's timer (not only when a job
        dies), and walk the recovered hash a step for counts whose job is gone; the number
        of dead jobs trimmed."""
        opts = self._opts
        cursor = self._tidy_cursors.get(queue.keys.name, "0")
        cursor, trimmed, dropped = queue.tidy(
            cursor, dead_max_jobs=opts.dead_max_jobs, dead_max_age=opts.dead_max_age
        )
        self._tidy_cursors[queue.keys.name] = cursor
        if trimmed or dropped:
            log.info("%s: trimmed %d dead job(s), dropped %d stale recovery count(s)",
                     self._context, trimmed, dropped)  # fmt: skip
        return trimmed


def check_eviction_policy(queue: RedisQueue, context: str) -> None:
    """Warn when Redis may evict keys, and so jobs, at maxmemory."""
    try:
        policy = queue.eviction_policy()
    except redis.RedisError as exc:  # CONFIG refused (ACL) or unknown: not ours to judge
        log.debug("%s: could not read maxmemory-policy: %s", context, describe(exc))
        return
    if policy is not None and policy != "noeviction":
        log.warning("%s: Redis evicts keys at maxmemory (maxmemory-policy %s): it can drop "
                    "jobs; set maxmemory-policy noeviction", context, policy)  # fmt: skip
