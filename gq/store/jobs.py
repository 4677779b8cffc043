"""The worker's and the producer's side of the Redis boundary: a typed method per Lua
script of SPEC section 4 (push, fetch, ack, retry, kill, recover...). The waits for the
signal are ``gq.store.signals``'; the operator's side is ``gq.store.admin``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional

import redis

from gq.store.base import (
    MAX_BATCH,
    ScriptedQueue,
    as_text,
    chunks,
    each_key,
    flags,
    full_queue_errors,
    optional_int,
    permission_errors,
    push_batches,
    schedule_batches,
)
from gq.store.groupkeys import group_keys, message_group
from gq.store.keys import QUEUE_REGISTRY
from gq.store.outcomes import kill_extras, packed, write_dead_outcomes
from gq.store.signals import signalled as signalled  # (re-exported: callers of old)
from gq.store.signals import wait_for_any_signal as wait_for_any_signal
from gq.store.signals import wait_for_signal

if TYPE_CHECKING:
    from gq.tasks.outcome import Outcome

# How long a cancel request for a job in flight is kept (s): its consumer reads it within
# a second; one that never comes back had its jobs recovered, and recover.lua drops them.
CANCEL_KEEP = 3600
# Dead jobs trimmed per script call at most (TRIM_BATCH in scripts/lib/dead.lua).
DEAD_TRIM_BATCH = 100


# Optional, not `bytes | None`: a base class is evaluated at run time (Python 3.9).
class Fetched(list[tuple[str, Optional[bytes]]]):
    """The (id, message or None) pairs of one fetch, with what the fetch script said of it
    (fetch.lua): ``state`` is "ok", "suspect" (a suspect job, alone), "isolate" (a suspect
    waits for this consumer to be idle), "paused", "full" (the concurrency limit is reached)
    or "wait" (the rate limit or a RateLimited hold: fetch again in ``wait`` seconds)."""

    def __init__(
        self, pairs: Iterable[tuple[str, bytes | None]], state: str = "ok", wait: float = 0.0
    ) -> None:
        super().__init__(pairs)
        self.state = state
        self.wait = wait
        self.acked: list[bool] = []  # one flag per id acknowledged with the fetch

    @property
    def suspect(self) -> bool:
        """A suspect is in the batch, or, in an empty batch, waits for an idle consumer."""
        return self.state in ("suspect", "isolate")


class RedisQueue(ScriptedQueue):
    """The Redis state of queue ``name`` as a worker and a producer use it."""

    def push(self, messages: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Store and queue each (id, message) whose id is new; True where stored."""
        with full_queue_errors():
            replies = self._run_batches("push", self.keys.push_keys, push_batches(messages))
        return flags(replies)

    def schedule(
        self, entries: Sequence[tuple[str, bytes, float]], *, relative: bool
    ) -> list[bool]:
        """Store and schedule each (id, message, time) whose id is new; True where stored.

        ``relative`` times are delays added to the server's clock, others unix seconds.
        """
        batches = schedule_batches(entries, relative)
        with full_queue_errors():
            replies = self._run_batches("schedule", self.keys.schedule_keys, batches)
        return flags(replies)

    def register(self, consumer_id: str) -> float:
        """Heartbeat: score this consumer with the server's time, which is returned."""
        inflight = self.keys.inflight(consumer_id)
        return float(self._run("register", [self.keys.consumers], [inflight]))

    def deregister(self, consumer_id: str) -> bool:
        """Leave the consumers set after a clean stop, unless jobs are still in flight."""
        inflight = self.keys.inflight(consumer_id)
        keys = [self.keys.consumers, inflight, self.keys.held, *self.keys.wake_keys]
        return bool(self._run("deregister", keys, [inflight]))

    def wait_for_signal(self, timeout: float) -> bool:
        """Block until the queue may have jobs (True) or ``timeout`` seconds pass (False).

        The element is moved onto its own list, so it stays for the other consumers.
        """
        return wait_for_signal(self, timeout)

    def fetch(
        self,
        consumer_id: str,
        count: int,
        *,
        idle: bool = True,
        acks: Sequence[str] = (),
        outcomes: Sequence[tuple[str, Outcome]] = (),
    ) -> Fetched:
        """Acknowledge ``outcomes`` (ids with what their ack writes: ack_results.lua's
        work) and ``acks`` (ids this consumer finished: ack.lua's), riding on the fetch to
        save a round trip, at most MAX_BATCH in all; then take up to ``count`` jobs into
        this consumer's in-flight set: (id, message or None), and ``Fetched.acked``, one
        flag per ack, ``outcomes``' first.

        A job recovered from a crashed consumer (a suspect) comes alone, and only when
        ``idle`` (this consumer runs nothing once the acks are done); ``Fetched.suspect``
        says a suspect is in the batch, or, in an empty batch, that one waits for this
        consumer to be idle. ``Fetched.state`` says what flow control decided.
        """
        k = self.keys
        inflight = k.inflight(consumer_id)
        keys = [k.consumers, k.active, inflight, k.data, k.signal, k.recovered, k.flow, k.held,
                k.rate, k.cancelled, *group_keys(k.name), *k.outcome_keys]  # fmt: skip
        blob = packed(k, outcomes, keys) if outcomes else b""
        reply = self._run(
            "fetch", [*keys, *k.finished_keys, *k.event_keys],  # (lib/history.lua, lib/events.lua)
            [inflight, min(count, MAX_BATCH), "1" if idle else "0", k.channel, blob,
             *acks[: MAX_BATCH - len(outcomes)]],
        )  # fmt: skip
        first = 3 + int(reply[2])
        pairs = ((as_text(reply[i]), reply[i + 1]) for i in range(first, len(reply), 2))
        fetched = Fetched(pairs, as_text(reply[0]), int(reply[1]) / 1000)
        fetched.acked = [bool(flag) for flag in reply[3:first]]
        return fetched

    def ack(self, consumer_id: str, ids: Sequence[str]) -> list[bool]:
        """Acknowledge the jobs this consumer owns: True per id acknowledged, False if not owned."""
        k = self.keys
        keys = [
            k.inflight(consumer_id), k.data, k.recovered, k.held, k.flow, k.active, k.signal,
            k.cancelled, *group_keys(k.name), *k.finished_keys, *k.event_keys,
        ]  # fmt: skip
        return flags(self._run_batches("ack", keys, [list(chunk) for chunk in chunks(ids)]))

    def retry(self, consumer_id: str, job_id: str, message: bytes, delay: float, *,
              hold: float = 0, group_hold: bool = False) -> bool:  # fmt: skip
        """Schedule an owned job again ``delay`` seconds from now with ``message``; with
        ``hold``, the whole queue also fetches nothing for that many seconds (RateLimited),
        or only the job's group with ``group_hold`` (an ungrouped job holds the queue)."""
        k = self.keys
        keys = [
            k.inflight(consumer_id), k.scheduled, k.data, k.recovered, k.held, k.flow, k.active,
            k.signal, k.cancelled, *group_keys(k.name), *k.event_keys,
        ]  # fmt: skip
        args = [job_id, message, repr(float(delay)), repr(float(hold)),
                "group" if group_hold else "", message_group(message)]  # fmt: skip
        return bool(self._run("retry", keys, args))

    def kill(
        self,
        consumer_id: str,
        job_id: str,
        message: bytes | None,
        *,
        dead_max_jobs: int,
        dead_max_age: float,
        outcome: Outcome | None = None,
    ) -> bool:
        """Move an owned job to dead; ``message=None`` keeps the stored (undecodable) one.
        With ``outcome``, its failure record and follow-ups are written in the same call."""
        k = self.keys
        keys = [
            k.inflight(consumer_id), k.dead, k.data, k.recovered, k.held, k.flow, k.active,
            k.signal, k.cancelled, *group_keys(k.name),
        ]  # fmt: skip
        args = [job_id, message or b"", dead_max_jobs, repr(float(dead_max_age))]
        if outcome is not None:
            args += kill_extras(k, job_id, outcome, keys)
        keys += [*k.finished_keys, *k.event_keys]
        return bool(self._run("kill", keys, args))

    def requeue(self, consumer_id: str, ids: Sequence[str]) -> int:
        """Put owned, never-started jobs back at the head of the queue, in order."""
        keys = [self.keys.inflight(consumer_id), self.keys.active, self.keys.signal,
                self.keys.held, *group_keys(self.keys.name)]  # fmt: skip
        # Later batches go back first so that the whole sequence keeps its order.
        batches = [list(chunk) for chunk in reversed(chunks(ids))]
        return sum(int(n) for n in self._run_batches("requeue", keys, batches)) if ids else 0

    def enqueue_due(self, limit: int) -> int:
        keys = [self.keys.scheduled, self.keys.active, self.keys.signal, self.keys.flow,
                *group_keys(self.keys.name)]  # fmt: skip
        return int(self._run("enqueue_due", keys, [limit]))

    def expired_consumers(self, timeout: float, limit: int) -> list[str]:
        """In-flight keys of consumers silent for ``timeout`` s of server time, oldest first."""
        reply = self._run("expired_consumers", [self.keys.consumers], [repr(float(timeout)), limit])
        return [as_text(key) for key in reply]

    def stated_leases(self, inflight_keys: Sequence[str]) -> list[float | None]:
        """The lease each consumer's facts state (``lease_seconds``), None where there are
        no facts or they state none (a curlyq consumer, gq before leases were stated)."""
        prefix = self.keys.inflight("")
        ids = [key[len(prefix) :] for key in inflight_keys]
        raw = each_key(self.client, "get", map(self.keys.facts, ids)) if ids else []
        return [_stated_lease(value) for value in raw]

    def recover(
        self,
        consumer_id: str,
        inflight_keys: Sequence[str],
        *,
        timeout: float,
        max_jobs: int,
        max_recoveries: int,
        dead_max_jobs: int,
        dead_max_age: float,
    ) -> int:
        """Recover the jobs of the given expired consumers; the count of jobs moved."""
        if not inflight_keys:
            return 0
        k = self.keys
        keys = [
            k.consumers, k.active, k.data, k.dead, k.signal, k.recovered, k.held, k.cancelled,
            k.flow, *group_keys(k.name), k.unwritten, *inflight_keys,
        ]  # fmt: skip
        args = [
            repr(float(timeout)),
            max_jobs,
            max_recoveries,
            k.inflight(consumer_id),
            dead_max_jobs,
            repr(float(dead_max_age)),
        ]
        moved, *unwritten = self._run("recover", keys, args)
        if unwritten:  # (sent to dead: their outcomes, which the script cannot build)
            write_dead_outcomes(self, [as_text(i) for i in unwritten])
        return int(moved)

    def tidy(
        self, cursor: str, *, dead_max_jobs: int, dead_max_age: float, count: int = MAX_BATCH
    ) -> tuple[str, int, int]:
        """Trim the dead set by age and size, drop up to ``count`` recovery counts of jobs
        gone, and a page of the groups' notes of jobs gone and of past rate states, each
        walk from ``cursor`` on (tidy.lua's, opaque here; "0" starts them all).

        Returns (next cursor, "0" when every walk is complete; dead jobs trimmed; counts dropped).
        """
        k = self.keys
        reply = self._run(
            "tidy",
            [k.dead, k.data, k.recovered, k.held, k.consumers, k.cancelled, *k.wake_keys,
             *group_keys(k.name)],
            [dead_max_jobs, repr(float(dead_max_age)), cursor, count, CANCEL_KEEP],
        )
        return as_text(reply[0]), int(reply[1]), int(reply[2])

    def cancel_requested(self, ids: Sequence[str]) -> set[str]:
        """Of ``ids`` (jobs this consumer holds), those with a cancel request
        (gq.Queue.cancel): ZMSCORE, at most MAX_BATCH ids per command, in one round trip."""
        pipe = self.client.pipeline(transaction=False)
        batches = chunks(ids)
        for batch in batches:
            pipe.zmscore(self.keys.cancelled, list(batch))
        with permission_errors("ZMSCORE"):
            replies = pipe.execute()
        pairs = (pair for batch, scores in zip(batches, replies) for pair in zip(batch, scores))
        return {job_id for job_id, score in pairs if score is not None}

    def inflight_ids(self, consumer_id: str) -> set[str]:
        """The ids in this consumer's in-flight set (at most buffer + concurrency + one
        lost fetch, so one SMEMBERS is bounded)."""
        with permission_errors("SMEMBERS"):
            members = self.client.smembers(self.keys.inflight(consumer_id))
        return {as_text(member) for member in members}

    def eviction_policy(self) -> str | None:
        """The server's ``maxmemory-policy``, or None where CONFIG is refused or meaningless
        (an ACL user without CONFIG, a cluster, the embedded server)."""
        if self.cluster or self._embedded:
            return None
        reply = self.client.config_get("maxmemory-policy")
        value = reply.get("maxmemory-policy") or reply.get(b"maxmemory-policy")
        return None if value is None else as_text(value)

    def for_thread(self) -> RedisQueue | None:
        """A twin of this queue on a client of its own, for use from a native OS thread;
        None where the client cannot be cloned (cluster, Sentinel, fakeredis, a custom
        client). A gevent socket belongs to one thread's hub, so the twin shares nothing."""
        client = self.client
        pool: Any = getattr(client, "connection_pool", None)
        if type(client) is not redis.Redis or type(pool) not in (
            redis.ConnectionPool,
            redis.BlockingConnectionPool,
        ):
            return None
        twin = redis.ConnectionPool(
            connection_class=pool.connection_class, max_connections=1, **pool.connection_kwargs
        )
        return RedisQueue(redis.Redis(connection_pool=twin), self.keys.name)

    def enqueue_periodic(self, occurrence: PeriodicOccurrence) -> PeriodicReply:
        """Enqueue one occurrence of a periodic schedule unless the script, on the server's
        clock, finds it handled, early or too late (periodic.lua says which)."""
        o = occurrence
        args = [o.name, o.at, o.following, o.job_id, o.message, o.rule,
                repr(float(o.late_limit)), "1" if o.runtime else "0"]  # fmt: skip
        with full_queue_errors():
            outcome, now, cursor = self._run("periodic", self.keys.periodic_keys, args)
        return PeriodicReply(
            as_text(outcome), float(now), None if cursor is None else int(as_text(cursor))
        )

    def periodic_cursors(self, names: Sequence[str]) -> dict[str, int | None]:
        """The cursor (last occurrence handled) of each named schedule, None if it has none."""
        values = self.client.hmget(self.keys.periodic, list(names)) if names else []
        return {
            name: optional_int(as_text(v) if v is not None else None)
            for name, v in zip(names, values)
        }

    def report(
        self,
        consumer_id: str,
        facts: str | None,
        ttl: float,
        history: Mapping[tuple[int, str], int],
        history_ttl: int,
    ) -> tuple[dict[tuple[int, str], int], list[Exception]]:
        """One pipelined round trip: add this queue to the registry, store this consumer's
        facts (JSON) for ``ttl`` seconds (``facts=None`` deletes them), and add the
        (minute, kind) counts to the hourly history keys, each kept ``history_ttl`` s.

        Plain commands, not a script: the registry lives in another slot on a cluster.
        Returns the counts Redis refused (OOM, ACL) and the errors of the refused
        commands; raises only when the round trip itself failed.
        """
        pipe = self.client.pipeline(transaction=False)
        pipe.sadd(QUEUE_REGISTRY, self.keys.name)
        if facts is None:
            pipe.delete(self.keys.facts(consumer_id))
        else:
            pipe.set(self.keys.facts(consumer_id), facts, px=max(1, int(ttl * 1000)))
        counts = sorted(history.items())
        for (minute, kind), count in counts:
            pipe.hincrby(self.keys.history(minute // 3600 * 3600), f"{kind}:{minute}", count)
        for hour in sorted({minute // 3600 * 3600 for (minute, _), _ in counts}):
            pipe.expire(self.keys.history(hour), history_ttl)
        # Each command stands alone: a refused one must not hide which increments landed
        # (giving those back would count them twice).
        replies = pipe.execute(raise_on_error=False)
        refused = {key: n for (key, n), r in zip(counts, replies[2:]) if isinstance(r, Exception)}
        return refused, [r for r in replies if isinstance(r, Exception)]


def not_registered(exc: redis.ResponseError) -> bool:
    """Whether fetch.lua refused because this consumer is not registered (GQNOTREGISTERED)."""
    return "GQNOTREGISTERED" in str(exc)


@dataclass(frozen=True)
class PeriodicOccurrence:
    """What a consumer proposes to enqueue: schedule ``name``'s occurrence ``at`` (unix
    seconds), the occurrence after it, the job, the rule text, the catch-up limit, and
    ``runtime`` for one added at runtime (enqueued only while kept and not paused)."""

    name: str
    at: int
    following: int
    job_id: str
    message: bytes
    rule: str
    late_limit: float
    runtime: bool = False


@dataclass(frozen=True)
class PeriodicReply:
    """The script's answer: its outcome, the server's time, the cursor after the call."""

    outcome: str
    server_now: float
    cursor: int | None


def _stated_lease(raw: Any) -> float | None:
    """``lease_seconds`` of a consumer's facts (JSON written by any version, or by hand)."""
    try:
        facts = json.loads(raw) if raw is not None else None
    except ValueError:
        return None
    lease = facts.get("lease_seconds") if isinstance(facts, dict) else None
    if isinstance(lease, bool) or not isinstance(lease, (int, float)) or not lease > 0:
        return None
    return float(lease)
