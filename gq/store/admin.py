"""The operator's side of the Redis boundary (the ``gq`` command, the dashboard, the
metrics exporter, ``gq.Queue``): counts, listings, moving and deleting jobs. The
consumers' own reports (facts, history) and the queue registry are gq.store.registry's;
the worker's side is ``gq.store.jobs``.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Callable, Optional

from gq.store import base
from gq.store.base import MAX_BATCH, RedisPipeline, as_text, chunks, each_key, flags, optional_int
from gq.store.groupkeys import group_keys
from gq.store.keys import QUEUE_REGISTRY
from gq.store.registry import MAX_REGISTERED_QUEUES as MAX_REGISTERED_QUEUES
from gq.store.registry import ConsumerReports
from gq.store.registry import registered_queues as registered_queues  # (re-exported)

#: A listed job of the dead or scheduled set: (id, its score as unix time, message or None).
Entry = tuple[str, float, Optional[bytes]]
Scored = tuple[str, float]

# History keys live 25 h after their last write (gq.worker.facts.HISTORY_TTL): the hours to delete.
HISTORY_KEEP_HOURS = 26


class QueueAdmin(ConsumerReports):
    """What an operator reads and changes of queue ``name``."""

    # -- flow control (SPEC section 9; the keys are read by fetch.lua) ---------------------

    def flow(self) -> FlowState:
        """The queue's flow settings and how many jobs gq consumers hold, in one round trip."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        pipe.hmget(k.flow, ["paused", "rate", "period", "concurrency", "hold_until"])
        pipe.hvals(k.held)
        (paused, rate, period, concurrency, hold), held = pipe.execute()
        # The hold is on the server's clock: read it only when there is one (on a cluster,
        # from the node that holds the queue; a cluster pipeline cannot send TIME).
        now_ms = self.server_time() * 1000 if hold is not None else 0.0
        return FlowState(
            paused=paused == b"1",
            rate=base.rate_setting(rate, period),
            concurrency=None if concurrency is None else int(concurrency),
            held=sum(int(n) for n in held),
            held_back=base.held_back(hold, now_ms),
        )

    def set_paused(self, paused: bool) -> None:
        """Pause (consumers fetch nothing; running jobs finish) or resume, waking every
        consumer at once (fetch.lua cleared their signal) and lifting a RateLimited hold."""
        pipe = self.client.pipeline(transaction=False)
        if paused:
            pipe.hset(self.keys.flow, "paused", "1")
        else:
            pipe.hdel(self.keys.flow, "paused", "hold_until")
            self._raise_signal(pipe)
        pipe.execute()

    def set_limits(self, changes: Mapping[str, int | None]) -> None:
        """Set (a number) or clear (None) the given settings among "rate", "period" (ms)
        and "concurrency". Consumers are woken: a limit may have grown."""
        given = {name: value for name, value in changes.items() if value is not None}
        cleared = [name for name, value in changes.items() if value is None]
        pipe = self.client.pipeline(transaction=False)
        if given:
            pipe.hset(self.keys.flow, mapping=given)
        if cleared:
            pipe.hdel(self.keys.flow, *cleared)
        if "rate" in changes:
            pipe.delete(self.keys.rate)  # a new rate starts afresh
        self._raise_signal(pipe)
        pipe.execute()

    def _raise_signal(self, pipe: RedisPipeline) -> None:
        pipe.delete(self.keys.signal)
        pipe.lpush(self.keys.signal, "1")

    def cancel(self, ids: Sequence[str]) -> list[str]:
        """Cancel each job: "removed" (it was ready or scheduled), "requested" (in flight:
        its consumer interrupts it within a second) or "" (unknown, or dead)."""
        if not ids:
            return []
        k = self.keys
        keys = [k.active, k.scheduled, k.dead, k.data, k.recovered, k.cancelled,
                *group_keys(k.name), *k.finished_keys, *k.event_keys]  # fmt: skip
        replies = self._run_batches("cancel", keys, [list(chunk) for chunk in chunks(ids)])
        return [as_text(outcome) for reply in replies for outcome in reply]

    def counts(self) -> dict[str, int]:
        """Jobs per state: ready, scheduled, due (scheduled and past their time), dead."""
        now = self.server_time()
        pipe = self.client.pipeline(transaction=False)
        pipe.llen(self.keys.active)
        pipe.zcard(self.keys.scheduled)
        pipe.zcount(self.keys.scheduled, "-inf", repr(now))
        pipe.zcard(self.keys.dead)
        ready, scheduled, due, dead = pipe.execute()
        return {
            "ready": int(ready),
            "scheduled": int(scheduled),
            "due": int(due),
            "dead": int(dead),
        }

    def grouped(self) -> int:
        """Jobs waiting in the groups' lines (group=): neither ready nor scheduled."""
        return int(self._run("grouped", list(group_keys(self.keys.name)), []))

    def oldest_ready(self) -> tuple[str, bytes | None] | None:
        """The id at the head of the active list (the next to run) and its message, if any."""
        head = self.client.lindex(self.keys.active, 0)
        if head is None:
            return None
        job_id = as_text(head)
        message = self.client.hget(self.keys.data, job_id)
        return job_id, message if message is None else bytes(message)

    def consumers(self) -> list[tuple[str, float, int]]:
        """Every registered consumer, least recently seen first:
        (consumer id, last heartbeat in unix seconds, jobs in its in-flight set)."""
        entries = self._scored(self.keys.consumers, 0, -1)
        if not entries:
            return []
        sizes = each_key(self.client, "scard", [key for key, _ in entries])
        prefix = self.keys.inflight("")
        return [
            (key[len(prefix) :] if key.startswith(prefix) else key, score, int(size))
            for (key, score), size in zip(entries, sizes)
        ]

    def dead_jobs(self, limit: int, *, newest_first: bool = True) -> list[Entry]:
        """Up to ``limit`` dead jobs: (id, unix time it was killed, message or None)."""
        return self._page(self.keys.dead, 0, limit, desc=newest_first)

    def scheduled_jobs(self, limit: int) -> list[Entry]:
        """Up to ``limit`` scheduled jobs, soonest first: (id, unix time due, message or None)."""
        return self._page(self.keys.scheduled, 0, limit, desc=False)

    def work_through(self, state: str, operation: Callable[[Sequence[str]], list[bool]]) -> int:
        """Run ``operation`` over the dead or scheduled set from its head (oldest, soonest) in
        batches, on at most as many jobs as it held at the start (a retried job that dies
        again meanwhile cannot keep the loop going); the count it did (``gq ... --all``)."""
        key = self.keys.dead if state == "dead" else self.keys.scheduled
        budget, done = self.counts()[state], 0
        while budget > 0:
            head = self._page(key, 0, min(budget, MAX_BATCH), desc=False)
            ids = [job_id for job_id, _, _ in head]
            if not ids:
                break
            done += sum(operation(ids))
            budget -= len(ids)
        return done

    def _scored(self, key: str, start: int, stop: int, desc: bool = False) -> list[Scored]:
        """Members ``start`` to ``stop`` (-1: the last) of sorted set ``key``, and scores."""
        reply: Any = self.client.zrange(key, start, stop, desc=desc, withscores=True)
        return [(as_text(member), float(score)) for member, score in reply]

    def retry_dead(self, entries: Sequence[tuple[str, bytes | None]]) -> list[bool]:
        """Queue again each (id, new message or None to keep it) still in the dead set."""
        return self._to_tail(self.keys.dead, entries)

    def delete_dead(self, ids: Sequence[str]) -> list[bool]:
        """Delete the given dead jobs and free their ids; True per id that was dead."""
        return self._delete_from(self.keys.dead, ids)

    def delete_scheduled(self, ids: Sequence[str]) -> list[bool]:
        """Delete the given scheduled jobs and free their ids; True per id that was scheduled."""
        return self._delete_from(self.keys.scheduled, ids)

    def _delete_from(self, key: str, ids: Sequence[str]) -> list[bool]:
        if not ids:
            return []
        keys = [key, self.keys.data, self.keys.recovered]
        return flags(self._run_batches("delete_jobs", keys, [list(chunk) for chunk in chunks(ids)]))

    def delete_queue(self) -> int:
        """Delete every key of this queue, in-flight sets included; the count of keys deleted.

        Not atomic, and it takes jobs from under running consumers: for throwaway queues
        (``gq demo``) once their consumers have stopped.
        """
        k = self.keys
        members = self.client.zrange(k.consumers, 0, -1)
        keys = [
            k.data,
            k.active,
            k.scheduled,
            k.dead,
            k.consumers,
            k.signal,
            k.recovered,
            k.periodic,
            k.periodic_rules,
            k.periodic_enqueued,
            *k.finished_keys,
            k.events,
            *(as_text(member) for member in members),
            *self._observability_keys([as_text(member) for member in members]),
        ]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:  # one key per call: a cluster may hold them on different slots
            pipe.delete(key)
        pipe.srem(QUEUE_REGISTRY, k.name)
        return sum(int(n) for n in pipe.execute()[:-1])

    def exists(self) -> bool:
        """Whether Redis holds anything of this queue: jobs, or a registered consumer."""
        k = self.keys
        keys = (k.data, k.active, k.scheduled, k.dead, k.consumers)
        return any(int(n) for n in each_key(self.client, "exists", keys))

    def dead_page(self, offset: int, count: int) -> list[Entry]:
        """Dead jobs from ``offset``, newest first: (id, killed at, message or None)."""
        return self._page(self.keys.dead, offset, count, desc=True)

    def scheduled_page(self, offset: int, count: int) -> list[Entry]:
        """Scheduled jobs from ``offset``, soonest first: (id, due at, message or None)."""
        return self._page(self.keys.scheduled, offset, count, desc=False)

    def _page(self, key: str, offset: int, count: int, *, desc: bool) -> list[Entry]:
        if count <= 0 or offset < 0:
            return []
        entries = self._scored(key, offset, offset + count - 1, desc)
        messages = self.messages([job_id for job_id, _ in entries])
        return [(job_id, score, message) for (job_id, score), message in zip(entries, messages)]

    def run_scheduled(self, ids: Sequence[str]) -> list[bool]:
        """Move the given scheduled jobs to the tail of the queue now, a grouped one to the
        end of its group's line (run_scheduled.lua); True per id moved."""
        if not ids:
            return []
        k = self.keys
        keys = [k.scheduled, k.data, k.active, k.signal, k.cancelled, *group_keys(k.name)]
        return flags(self._run_batches("run_scheduled", keys, [list(c) for c in chunks(ids)]))

    def _to_tail(self, key: str, entries: Sequence[tuple[str, bytes | None]]) -> list[bool]:
        """retry_dead.lua on ``key`` (the dead or the scheduled set, in place of the dead
        one): each (id, new message or None to keep it) still there, to the tail."""
        batches = [[part for job_id, message in chunk for part in (job_id, message or b"")]
                   for chunk in chunks(entries)]  # fmt: skip
        if not batches:
            return []
        keys = [key, *self.keys.retry_dead_keys[1:]]
        return flags(self._run_batches("retry_dead", keys, batches))

    def periodic_state(self) -> dict[str, tuple[str | None, int | None, int | None]]:
        """Each periodic schedule this queue knows: name -> (rule text, cursor, last enqueued)."""
        k = self.keys
        keys = (k.periodic_rules, k.periodic, k.periodic_enqueued)
        replies = each_key(self.client, "hgetall", keys)
        rules, cursors, enqueued = (
            {as_text(name): as_text(value) for name, value in reply.items()} for reply in replies
        )
        return {
            name: (
                rules.get(name),
                optional_int(cursors.get(name)),
                optional_int(enqueued.get(name)),
            )
            for name in sorted({*rules, *cursors, *enqueued})
        }

    def delete_periodic(self, names: Sequence[str]) -> int:
        """Forget periodic schedules (a consumer that still has one starts it afresh);
        the count of names that were known."""
        if not names:
            return 0
        k = self.keys
        keys = (k.periodic, k.periodic_rules, k.periodic_enqueued)
        return max(int(n) for n in each_key(self.client, "hdel", keys, *names))

    def _observability_keys(self, inflight_keys: Sequence[str]) -> list[str]:
        """The facts of the given consumers and the history keys that may still live."""
        prefix = self.keys.inflight("")
        ids = [key[len(prefix) :] for key in inflight_keys if key.startswith(prefix)]
        hour = int(time.time()) // 3600 * 3600
        hours = range(hour - HISTORY_KEEP_HOURS * 3600, hour + 7200, 3600)  # skew both ways
        return [*map(self.keys.facts, ids), *map(self.keys.history, hours)]

    def gauges(self, consumer_timeout: float) -> QueueGauges:
        """The queue-wide numbers of a metrics scrape, in one atomic round trip."""
        k = self.keys
        keys = [k.active, k.scheduled, k.dead, k.data, k.consumers, *group_keys(k.name)]
        reply = self._run("gauges", keys, [repr(float(consumer_timeout))])
        ready, scheduled, dead, stored, consumers, alive = (int(n) for n in reply[:6])
        grouped = int(reply[8])
        return QueueGauges(
            ready=ready,
            scheduled=scheduled,
            dead=dead,
            grouped=grouped,
            # A job in transition between two sets can make this dip for one scrape.
            inflight=max(0, stored - ready - scheduled - dead - grouped),
            consumers_alive=alive,
            consumers_dead=consumers - alive,
            head=bytes(reply[6]) if reply[6] else None,
            now=float(reply[7]),
        )


@dataclass(frozen=True)
class FlowState:
    """What ``QueueAdmin.flow`` reads: the settings, the jobs held by gq consumers (what a
    concurrency limit counts) and the seconds a handler's RateLimited still holds back."""

    paused: bool
    rate: tuple[int, float] | None  # (jobs, per seconds)
    concurrency: int | None
    held: int
    held_back: float


@dataclass(frozen=True)
class QueueGauges:
    """What ``RedisQueue.gauges`` reads: job counts per state, consumers alive and dead,
    the oldest ready job's message, and the server's time."""

    ready: int
    scheduled: int
    dead: int
    grouped: int  # waiting in the groups' lines
    inflight: int
    consumers_alive: int
    consumers_dead: int
    head: bytes | None
    now: float
