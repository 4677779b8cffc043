"""The consumer's maintenance steps on Redis (SPEC sections 5 and 7): the scheduler moves
due jobs to ready, the custodian recovers the jobs of consumers whose lease ran out and
tidies the dead set and the recovery counts; and the check, at start, that Redis will not
evict jobs. Each step is one iteration for a ``gq.worker.loops.Loop``."""

from __future__ import annotations

import logging
from collections.abc import Mapping

import redis

from gq.options import SHORTEST_LEASE, ConsumerOptions
from gq.store.base import describe
from gq.store.jobs import DEAD_TRIM_BATCH, RedisQueue
from gq.worker.due import DueListener, DueTimes
from gq.worker.facts import lease_seconds
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.consumer")

# The most consumers one custodian pass looks at (silent for the shortest lease any
# consumer can state; each then judged by its own): keys only, so a few curlyq consumers
# within their minute-long beats cannot hide a dead gq consumer behind them.
CANDIDATES = 1000


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
        """Jobs recovered from the consumers whose lease ended, and how many those were.
        Each consumer is judged by the lease its facts state (its own heartbeat interval +
        consumer timeout), one that states none by ``custodian_unstated_lease`` (curlyq's
        default lease): gq's short defaults never take a live Go consumer, beating once a
        minute, for dead."""
        unstated = self._opts.custodian_unstated_lease
        shortest = min(SHORTEST_LEASE, lease_seconds(self._opts), unstated)
        candidates = queue.expired_consumers(shortest, CANDIDATES)
        if not candidates:
            return 0, 0
        by_lease: dict[float, list[str]] = {}
        for key, stated in zip(candidates, queue.stated_leases(candidates)):
            by_lease.setdefault(stated or unstated, []).append(key)
        moved = expired = 0
        for lease, keys in by_lease.items():
            # The script checks each heartbeat against the lease again, on the server's
            # clock: a consumer that beat since it was listed keeps its jobs.
            moved += self.recover_now(queue, keys, lease)
            expired += len(keys)
        return moved, expired

    def recover_now(self, queue: RedisQueue, keys: list[str], lease: float = 0.0) -> int:
        """Recover the jobs of the consumers whose in-flight ``keys`` are given, once their
        heartbeat is ``lease`` s old (0: now, for a predecessor known dead); jobs moved."""
        opts = self._opts
        return queue.recover(
            self._id,
            keys,
            timeout=lease,
            max_jobs=opts.custodian_max_jobs,
            max_recoveries=opts.job_max_recoveries,
            dead_max_jobs=opts.dead_max_jobs,
            dead_max_age=opts.dead_max_age,
        )

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
