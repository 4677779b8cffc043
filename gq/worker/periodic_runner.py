"""The consumer's Periodic loop: enqueue the due occurrences of its schedules.

Every consumer that has a schedule runs this; none is a leader. The consumer only
*proposes* an occurrence, computed from the Redis server's time (a clock offset taken
from the last script reply, carried forward on the monotonic clock: the host's wall
clock is never read), and periodic.lua *decides* on the server's TIME, atomically:
never an occurrence in the future, never one at or before the schedule's cursor. See
docs/periodic.md for the whole argument.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping, Sequence
from typing import Callable

from gq import job as jobs
from gq import schedules
from gq.periodic import Periodic
from gq.store.jobs import PeriodicOccurrence, PeriodicReply, RedisQueue

log = logging.getLogger("gq.periodic")

# An occurrence at most this many seconds late (a slow tick, a busy host, a quick
# restart) is still enqueued, each one in turn; one later than that was missed (no
# consumer ran), and of the missed ones only the most recent is enqueued, once.
LATE_LIMIT = 10.0
# Script calls for one schedule in one step: a catch-up of LATE_LIMIT one-second
# occurrences, plus a few answers that only correct this consumer's view.
MAX_CALLS = 16
# Woken this long after an occurrence, so that the server's clock has surely reached it.
WAKE_MARGIN = 0.002


class PeriodicRunner:
    """Proposes each schedule's due occurrence to Redis; ``step`` is one pass of the loop
    and ``delay`` how long the loop may sleep before the next occurrence."""

    def __init__(
        self,
        queue: RedisQueue | Mapping[str, RedisQueue],
        schedules: Sequence[Periodic],
        context: str,
        clock: Callable[[], float] = time.monotonic,
        reload_every: float | None = None,
    ) -> None:
        # ``queue``: one queue, or the consumer's queues by name, the first the default.
        served = dict(queue) if isinstance(queue, Mapping) else {queue.keys.name: queue}
        # The runtime schedules (gq/schedules.py) of the queues it serves are read every
        # ``reload_every`` seconds (the heartbeat's interval; None: never).
        self._served = dict(served)
        self._code = {s.name for s in schedules}
        self._runtime: set[str] = set()
        self._reload_every = reload_every
        self._reloaded_at: float | None = None
        self._queue = queue = next(iter(served.values()))
        # Each schedule's own queue (Periodic.queue: a task's, from app.periodic), else
        # the default; one the consumer does not serve is still written to, on its client.
        self._queues = {s.name: _queue_of(s, queue, served) for s in schedules}
        self._clock = clock  # monotonic; a test passes one it controls
        self.schedules = list(schedules)
        self._context = context
        self._cursor: dict[str, int | None] = {s.name: None for s in self.schedules}
        self._due: dict[str, float] = {s.name: 0.0 for s in self.schedules}  # server time
        self._offset: float | None = None  # server time - time.monotonic()
        self._loaded = False  # the cursors were read from Redis
        self.enqueued = 0  # occurrences this consumer enqueued
        self.proposed = 0  # script calls (the others answer "done" to most of them)

    def now(self) -> float:
        """The Redis server's time, as last heard from it and carried on the monotonic clock."""
        if self._offset is None:
            self._sync(self._queue.server_time())
        assert self._offset is not None
        return self._clock() + self._offset

    def _sync(self, server_now: float) -> None:
        self._offset = server_now - self._clock()

    def step(self) -> bool:
        if self._reload_due():
            self._reload()
        if not self._loaded:  # the cursors first: a restart must not skip what is on time
            self._load()
        for schedule in self.schedules:
            if self._due[schedule.name] <= self.now():
                self._run(schedule)
        return False

    def _load(self) -> None:
        for queue, names in _by_queue(self._queues).items():
            self._cursor.update(queue.periodic_cursors(names))
        if not self.schedules:
            self._loaded = True
            return
        log.info(
            "%s: periodic schedules: %s",
            self._context,
            ", ".join(f"{s.name} ({s.summary})" for s in self.schedules),
        )
        self._loaded = True

    def _reload_due(self) -> bool:
        every, last = self._reload_every, self._reloaded_at
        return every is not None and (last is None or self._clock() - last >= every)

    def _reload(self) -> None:
        """Take up the runtime schedules as Redis has them now: new, changed, paused and
        removed ones (a name a code schedule holds stays the code schedule's)."""
        self._reloaded_at = self._clock()
        found = {p.name: p for name, queue in self._served.items()
                 for p in schedules.runnable(queue.client, name)}  # fmt: skip
        for name in self._code & set(found):
            log.warning("%s: periodic %s: given in code here; the runtime schedule of that "
                        "name is ignored", self._context, name)  # fmt: skip
            del found[name]
        for name in self._runtime - set(found):
            self._drop(name)
        current = {s.name: s for s in self.schedules}
        for name, schedule in found.items():
            if current.get(name) != schedule or name not in self._runtime:
                self._take(schedule)

    def _drop(self, name: str) -> None:
        log.info("%s: periodic %s: paused or removed", self._context, name)
        self.schedules = [s for s in self.schedules if s.name != name]
        self._runtime.discard(name)
        for held in (self._cursor, self._due, self._queues):
            held.pop(name, None)

    def _take(self, schedule: Periodic) -> None:
        name = schedule.name
        log.info("%s: periodic %s: runs %s", self._context, name, schedule.summary)
        self.schedules = [s for s in self.schedules if s.name != name] + [schedule]
        self._runtime.add(name)
        queue = self._served[schedule.queue or ""]
        self._queues[name] = queue
        # Nothing at or before now: what came due while it was paused (or before this
        # consumer took it up) is not caught up; every consumer taking it up agrees.
        cursor = queue.periodic_cursors([name]).get(name)
        self._cursor[name] = max(cursor or 0, schedule.latest(self.now()) or 0) or None
        self._due[name] = 0.0

    def delay(self, cap: float) -> float:
        """Seconds until the next occurrence is due (or the runtime schedules are read
        again), at most ``cap``."""
        if self._reload_every is not None and self._reloaded_at is not None:
            cap = min(cap, max(0.0, self._reloaded_at + self._reload_every - self._clock()))
        if self._offset is None or not self._due:
            return cap
        wait = min(self._due.values()) - self.now() + WAKE_MARGIN
        return min(cap, max(wait, 0.0))

    def _run(self, schedule: Periodic) -> None:
        name = schedule.name
        stale: int | None = None  # the occurrence the script found too late, if any
        for _ in range(MAX_CALLS):
            occurrence = self._candidate(schedule, self.now(), catch_up=stale is not None)
            if occurrence is None:
                break
            reply = self._propose(schedule, occurrence)
            if reply.outcome == "withdrawn":  # removed or paused: before the next read
                self._drop(name)
                return
            if reply.outcome == "early":  # this consumer's view ran ahead: wait for it
                self._due[name] = occurrence
                return
            if stale is not None and reply.outcome in ("enqueued", "duplicate"):
                self._report_missed(schedule, stale, occurrence)
            stale = occurrence if reply.outcome == "stale" else None
        cursor = self._cursor[name]
        self._due[name] = schedule.next_after(self.now() if cursor is None else cursor)

    def _candidate(self, schedule: Periodic, now: float, *, catch_up: bool) -> int | None:
        """The occurrence to propose: the one after the cursor, or the most recent one
        once the script said that one is too late (missed ones are not replayed). The
        decision is the script's, on the server's clock and the true cursor: this
        consumer's view of the cursor may be behind."""
        latest = schedule.latest(now)
        cursor = self._cursor[schedule.name]
        if latest is None or (cursor is not None and latest <= cursor):
            return None
        if cursor is None or catch_up:
            return latest
        return schedule.next_after(cursor)

    def _report_missed(self, schedule: Periodic, first: int, enqueued: int) -> None:
        log.warning(
            "%s: periodic %s: no consumer enqueued the occurrences from %d until %d in "
            "time (missed); only the most recent, %d, runs",
            self._context,
            schedule.name,
            first,
            enqueued,
            enqueued,
        )

    def _propose(self, schedule: Periodic, occurrence: int) -> PeriodicReply:
        job_id = schedule.job_id(occurrence)
        message = jobs.encode(jobs.Job(job_id, schedule.data), ready_at=occurrence)
        reply = self._queues[schedule.name].enqueue_periodic(
            PeriodicOccurrence(
                schedule.name,
                occurrence,
                schedule.next_after(occurrence),
                job_id,
                message,
                schedule.rule,
                LATE_LIMIT,
                runtime=schedule.name in self._runtime,
            )
        )
        self.proposed += 1
        self._sync(reply.server_now)
        self._cursor[schedule.name] = reply.cursor
        self._report(schedule, occurrence, reply)
        return reply

    def _report(self, schedule: Periodic, occurrence: int, reply: PeriodicReply) -> None:
        if reply.outcome == "enqueued":
            self.enqueued += 1
            log.info("%s: periodic %s: enqueued job %s", self._context, schedule.name,
                     schedule.job_id(occurrence))  # fmt: skip
        elif reply.outcome in ("skipped", "duplicate"):
            log.info(
                "%s: periodic %s: occurrence %d not enqueued (%s)",
                self._context,
                schedule.name,
                occurrence,
                "a new or changed rule does not catch up"
                if reply.outcome == "skipped"
                else "its job id is still in the queue",
            )


def _queue_of(schedule: Periodic, default: RedisQueue, served: dict[str, RedisQueue]) -> RedisQueue:
    if schedule.queue is None:
        return default
    if schedule.queue not in served:
        served[schedule.queue] = RedisQueue(default.client, schedule.queue)
    return served[schedule.queue]


def _by_queue(queues: Mapping[str, RedisQueue]) -> dict[RedisQueue, list[str]]:
    grouped: dict[RedisQueue, list[str]] = {}
    for name, queue in queues.items():
        grouped.setdefault(queue, []).append(name)
    return grouped
