"""The one module that talks to Redis: a typed method per Lua script (SPEC section 4).

Everything above this module works with ids, messages and numbers; nothing above it
builds a key or a Redis command.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import redis
from redis.commands.core import Script

from gq import scripts, topology
from gq.errors import ConfigurationError, QueueFullError
from gq.keys import REGISTRY, QueueKeys

# Bounds on one script call (SPEC: "bounded in the work it does per call"); longer
# batches are split into several calls sent in one pipeline.
MAX_BATCH = 1000
# How often a consumer on the embedded server (fakeredis) looks for the signal.
EMBEDDED_POLL = 0.01
# How often a consumer looks for jobs while Redis refuses the blocking wait (maxmemory).
OOM_POLL = 0.5
# History keys live 25 h after their last write (gq.facts.HISTORY_TTL): the hours to delete.
HISTORY_KEEP_HOURS = 26

T = TypeVar("T")


def chunks(items: Sequence[T], size: int = MAX_BATCH) -> list[Sequence[T]]:
    return [items[i : i + size] for i in range(0, len(items), size)]


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


@contextmanager
def _full_queue_errors() -> Iterator[None]:
    """Redis's OOM refusal (maxmemory with noeviction) as gq's QueueFullError. Scripts
    without flags fail at their first memory-growing write, before anything is written."""
    try:
        yield
    except redis.ResponseError as exc:
        if _out_of_memory(exc):
            raise QueueFullError(exc) from exc
        raise


def _out_of_memory(exc: redis.ResponseError) -> bool:
    # redis-py 4.4+ raises OutOfMemoryError (its text without the "OOM" code); older
    # versions a ResponseError that keeps it.
    oom = getattr(redis.exceptions, "OutOfMemoryError", ())
    return isinstance(exc, oom) or str(exc).startswith("OOM")


class Fetched(list):
    """The (id, message or None) pairs of one fetch, and whether it concerns a suspect job."""

    def __init__(self, pairs: Iterable[tuple[str, bytes | None]], suspect: bool) -> None:
        super().__init__(pairs)
        self.suspect = suspect


class RedisQueue:
    """The Redis state of queue ``name``, reached through ``client``."""

    def __init__(self, client: redis.Redis | Any, name: str) -> None:
        encoder = getattr(client, "get_encoder", None)
        if encoder is not None and encoder().decode_responses:
            raise ConfigurationError(
                "gq needs a Redis client with decode_responses=False: job data is bytes"
            )
        self.cluster = topology.is_cluster(client)
        if self.cluster and not topology.hash_tag(name):
            raise ConfigurationError(
                f"queue name {name!r} has no hash tag: on Redis Cluster every key of a queue "
                f"must be in one slot; put the name in braces, e.g. '{{{name}}}' "
                f"(curlyq and gq keys are '<queue>:data', '<queue>:active'...)"
            )
        self.client: Any = client
        self.keys = QueueKeys(name)
        self._embedded = type(client).__module__.startswith("fakeredis")
        self._scripts: dict[str, Script] = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        return self._scripts[name](keys=list(keys), args=list(args))

    def _run_batches(self, name: str, keys: Sequence[str], batches: list[list[Any]]) -> list[Any]:
        """Run one script call per batch: a single call directly, several in one pipeline.

        redis-py's cluster pipeline cannot run scripts: on a cluster, one call after another.
        """
        if len(batches) == 1 or self.cluster:
            return [self._run(name, keys, args) for args in batches]
        pipe = self.client.pipeline(transaction=False)
        for args in batches:
            self._scripts[name](keys=list(keys), args=args, client=pipe)
        return list(pipe.execute())

    # -- producer ---------------------------------------------------------------------

    def push(self, messages: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Store and queue each (id, message) whose id is new; True where stored."""
        batches = [[part for pair in chunk for part in pair] for chunk in chunks(messages)]
        with _full_queue_errors():
            replies = self._run_batches(
                "push", [self.keys.data, self.keys.active, self.keys.signal], batches
            )
        return [bool(flag) for reply in replies for flag in reply]

    def schedule(
        self, entries: Sequence[tuple[str, bytes, float]], *, relative: bool
    ) -> list[bool]:
        """Store and schedule each (id, message, time) whose id is new; True where stored.

        ``relative`` times are delays added to the server's clock, others unix seconds.
        """
        mode = "after" if relative else "at"
        batches = [
            [mode, *(part for entry in chunk for part in (entry[0], entry[1], repr(entry[2])))]
            for chunk in chunks(entries)
        ]
        with _full_queue_errors():
            replies = self._run_batches("schedule", [self.keys.data, self.keys.scheduled], batches)
        return [bool(flag) for reply in replies for flag in reply]

    # -- consumer: liveness ------------------------------------------------------------

    def register(self, consumer_id: str) -> float:
        """Heartbeat: score this consumer with the server's time, which is returned."""
        inflight = self.keys.inflight(consumer_id)
        return float(self._run("register", [self.keys.consumers], [inflight]))

    def deregister(self, consumer_id: str) -> bool:
        """Leave the consumers set after a clean stop, unless jobs are still in flight."""
        inflight = self.keys.inflight(consumer_id)
        return bool(self._run("deregister", [self.keys.consumers, inflight], [inflight]))

    # -- consumer: jobs -----------------------------------------------------------------

    def wait_for_signal(self, timeout: float) -> bool:
        """Block until the queue may have jobs (True) or ``timeout`` seconds pass (False).

        The element is moved onto its own list, so it stays for the other consumers.
        """
        key = self.keys.signal
        if self._embedded:
            # fakeredis answers BLMOVE at once (2.41), and a greenlet killed inside its
            # blocking commands releases the server's lock twice: poll instead, so that
            # a stop interrupts a sleep, never fakeredis.
            deadline = time.monotonic() + timeout
            while self.client.lmove(key, key, "LEFT", "LEFT") is None:
                if time.monotonic() >= deadline:
                    return False
                time.sleep(EMBEDDED_POLL)  # gevent.sleep in a patched process
            return True
        try:
            return self.client.blmove(key, key, timeout, "LEFT", "LEFT") is not None
        except redis.ResponseError as exc:
            if not _out_of_memory(exc):
                raise
            # At maxmemory (noeviction) Redis refuses BLMOVE before it looks at the list,
            # but fetch still runs (fetch.lua) and is what frees memory: poll instead.
            time.sleep(min(timeout, OOM_POLL))  # gevent.sleep in a patched process
            return True

    def fetch(self, consumer_id: str, count: int, *, idle: bool = True) -> Fetched:
        """Take up to ``count`` jobs into this consumer's in-flight set: (id, message or None).

        A job recovered from a crashed consumer (a suspect) comes alone, and only when
        ``idle`` (this consumer runs nothing); ``Fetched.suspect`` says a suspect is in the
        batch, or, in an empty batch, that one waits for this consumer to be idle.
        """
        k = self.keys
        inflight = k.inflight(consumer_id)
        reply = self._run(
            "fetch",
            [k.consumers, k.active, inflight, k.data, k.signal, k.recovered],
            [inflight, min(count, MAX_BATCH), "1" if idle else "0"],
        )
        suspect = len(reply) % 2 == 1  # a trailing "suspect" marker
        pairs = len(reply) - 1 if suspect else len(reply)
        return Fetched(((_text(reply[i]), reply[i + 1]) for i in range(0, pairs, 2)), suspect)

    def ack(self, consumer_id: str, ids: Sequence[str]) -> list[bool]:
        """Acknowledge the jobs this consumer owns: True per id acknowledged, False if not owned."""
        keys = [self.keys.inflight(consumer_id), self.keys.data, self.keys.recovered]
        replies = self._run_batches("ack", keys, [list(chunk) for chunk in chunks(ids)])
        return [bool(flag) for reply in replies for flag in reply]

    def retry(self, consumer_id: str, job_id: str, message: bytes, delay: float) -> bool:
        keys = [
            self.keys.inflight(consumer_id),
            self.keys.scheduled,
            self.keys.data,
            self.keys.recovered,
        ]
        return bool(self._run("retry", keys, [job_id, message, repr(float(delay))]))

    def kill(
        self,
        consumer_id: str,
        job_id: str,
        message: bytes | None,
        *,
        dead_max_jobs: int,
        dead_max_age: float,
    ) -> bool:
        """Move an owned job to dead; ``message=None`` keeps the stored (undecodable) one."""
        keys = [
            self.keys.inflight(consumer_id),
            self.keys.dead,
            self.keys.data,
            self.keys.recovered,
        ]
        args = [job_id, message or b"", dead_max_jobs, repr(float(dead_max_age))]
        return bool(self._run("kill", keys, args))

    def requeue(self, consumer_id: str, ids: Sequence[str]) -> int:
        """Put owned, never-started jobs back at the head of the queue, in order."""
        keys = [self.keys.inflight(consumer_id), self.keys.active, self.keys.signal]
        # Later batches go back first so that the whole sequence keeps its order.
        batches = [list(chunk) for chunk in reversed(chunks(ids))]
        return sum(int(n) for n in self._run_batches("requeue", keys, batches)) if ids else 0

    # -- consumer: maintenance ------------------------------------------------------------

    def enqueue_due(self, limit: int) -> int:
        keys = [self.keys.scheduled, self.keys.active, self.keys.signal]
        return int(self._run("enqueue_due", keys, [limit]))

    def expired_consumers(self, timeout: float, limit: int) -> list[str]:
        """In-flight keys of consumers silent for ``timeout`` s of server time, oldest first."""
        reply = self._run("expired_consumers", [self.keys.consumers], [repr(float(timeout)), limit])
        return [_text(key) for key in reply]

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
        keys = [k.consumers, k.active, k.data, k.dead, k.signal, k.recovered, *inflight_keys]
        args = [
            repr(float(timeout)),
            max_jobs,
            max_recoveries,
            k.inflight(consumer_id),
            dead_max_jobs,
            repr(float(dead_max_age)),
        ]
        return int(self._run("recover", keys, args))

    def inflight_ids(self, consumer_id: str) -> set[str]:
        """The ids in this consumer's in-flight set (at most buffer + concurrency + one
        lost fetch, so one SMEMBERS is bounded)."""
        return {_text(member) for member in self.client.smembers(self.keys.inflight(consumer_id))}

    def eviction_policy(self) -> str | None:
        """The server's ``maxmemory-policy``, or None where CONFIG is refused or meaningless
        (an ACL user without CONFIG, a cluster, the embedded server)."""
        if self.cluster or self._embedded:
            return None
        reply = self.client.config_get("maxmemory-policy")
        value = reply.get("maxmemory-policy") or reply.get(b"maxmemory-policy")
        return None if value is None else _text(value)

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

    def server_time(self) -> float:
        if self.cluster:  # the clock of the master that holds this queue
            node = self.client.get_node_from_key(self.keys.data)
            seconds, micros = self.client.time(target_nodes=node)
        else:
            seconds, micros = self.client.time()
        return float(seconds) + float(micros) / 1e6

    def messages(self, ids: Iterable[str]) -> list[bytes | None]:
        """The stored message of each id, None where there is none."""
        ids = list(ids)
        return list(self.client.hmget(self.keys.data, ids)) if ids else []

    # -- inspection / admin (gq-worker --burst and the gq operator tool) --------------------

    def ping(self) -> None:
        """Raise the client's error unless Redis answers, accepts the credentials and lets
        them run gq's scripts on this queue's keys (a read-only script: NOPERM if not)."""
        self.client.ping()
        self.backlog("access-check")

    def backlog(self, consumer_id: str) -> tuple[int, int, int]:
        """(ready, due by server time, in flight for this consumer), read atomically."""
        keys = [self.keys.active, self.keys.scheduled, self.keys.inflight(consumer_id)]
        ready, due, inflight = self._run("backlog", keys, [])
        return int(ready), int(due), int(inflight)

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

    def oldest_ready(self) -> tuple[str, bytes | None] | None:
        """The id at the head of the active list (the next to run) and its message, if any."""
        head = self.client.lindex(self.keys.active, 0)
        if head is None:
            return None
        job_id = _text(head)
        message = self.client.hget(self.keys.data, job_id)
        return job_id, message if message is None else bytes(message)

    def consumers(self) -> list[tuple[str, float, int]]:
        """Every registered consumer, least recently seen first:
        (consumer id, last heartbeat in unix seconds, jobs in its in-flight set)."""
        entries = self._scored(self.keys.consumers, -1)
        if not entries:
            return []
        pipe = self.client.pipeline(transaction=False)
        for key, _ in entries:
            pipe.scard(key)
        sizes = pipe.execute()
        prefix = self.keys.inflight("")
        return [
            (key[len(prefix) :] if key.startswith(prefix) else key, score, int(size))
            for (key, score), size in zip(entries, sizes)
        ]

    def dead_jobs(
        self, limit: int, *, newest_first: bool = True
    ) -> list[tuple[str, float, bytes | None]]:
        """Up to ``limit`` dead jobs: (id, unix time it was killed, message or None)."""
        return self._entries(self.keys.dead, limit, newest_first)

    def scheduled_jobs(self, limit: int) -> list[tuple[str, float, bytes | None]]:
        """Up to ``limit`` scheduled jobs, soonest first: (id, unix time due, message or None)."""
        return self._entries(self.keys.scheduled, limit, False)

    def _entries(
        self, key: str, limit: int, newest_first: bool
    ) -> list[tuple[str, float, bytes | None]]:
        if limit <= 0:
            return []
        entries = self._scored(key, limit - 1, desc=newest_first)
        messages = self.messages([job_id for job_id, _ in entries])
        return [(job_id, score, message) for (job_id, score), message in zip(entries, messages)]

    def _scored(self, key: str, stop: int, *, desc: bool = False) -> list[tuple[str, float]]:
        """Members 0 to ``stop`` (-1: all) of sorted set ``key``, with their scores."""
        reply: Any = self.client.zrange(key, 0, stop, desc=desc, withscores=True)
        return [(_text(member), float(score)) for member, score in reply]

    def retry_dead(self, entries: Sequence[tuple[str, bytes | None]]) -> list[bool]:
        """Queue again each (id, new message or None to keep it) still in the dead set."""
        batches = [
            [part for job_id, message in chunk for part in (job_id, message or b"")]
            for chunk in chunks(entries)
        ]
        if not batches:
            return []
        keys = [self.keys.dead, self.keys.data, self.keys.active, self.keys.signal]
        return [
            bool(flag) for reply in self._run_batches("retry_dead", keys, batches) for flag in reply
        ]

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
        replies = self._run_batches("delete_jobs", keys, [list(chunk) for chunk in chunks(ids)])
        return [bool(flag) for reply in replies for flag in reply]

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
            *(_text(member) for member in members),
            *self._observability_keys([_text(member) for member in members]),
        ]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:  # one key per call: a cluster may hold them on different slots
            pipe.delete(key)
        pipe.srem(REGISTRY, k.name)
        return sum(int(n) for n in pipe.execute()[:-1])

    def _observability_keys(self, inflight_keys: Sequence[str]) -> list[str]:
        """The facts of the given consumers and the history keys that may still live."""
        prefix = self.keys.inflight("")
        ids = [key[len(prefix) :] for key in inflight_keys if key.startswith(prefix)]
        hour = int(time.time()) // 3600 * 3600
        hours = range(hour - HISTORY_KEEP_HOURS * 3600, hour + 7200, 3600)  # skew both ways
        return [*map(self.keys.facts, ids), *map(self.keys.history, hours)]

    # -- observability: worker facts, throughput history, queue gauges (SPEC section 10) -

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
        pipe.sadd(REGISTRY, self.keys.name)
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

    def facts(self, consumer_ids: Sequence[str]) -> list[bytes | None]:
        """The stored facts (JSON) of each consumer, None where there are none."""
        if not consumer_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for consumer_id in consumer_ids:
            pipe.get(self.keys.facts(consumer_id))
        return [None if value is None else bytes(value) for value in pipe.execute()]

    def history(self, hours: Sequence[int]) -> dict[str, int]:
        """The per-minute fields (``done:<minute>``, ``failed:<minute>``) of the given hours."""
        pipe = self.client.pipeline(transaction=False)
        for hour in hours:
            pipe.hgetall(self.keys.history(hour))
        merged: dict[str, int] = {}
        for reply in pipe.execute():
            merged.update({_text(field): int(value) for field, value in reply.items()})
        return merged

    def gauges(self, consumer_timeout: float) -> QueueGauges:
        """The queue-wide numbers of a metrics scrape, in one atomic round trip."""
        k = self.keys
        keys = [k.active, k.scheduled, k.dead, k.data, k.consumers]
        reply = self._run("gauges", keys, [repr(float(consumer_timeout))])
        ready, scheduled, dead, stored, consumers, alive = (int(n) for n in reply[:6])
        return QueueGauges(
            ready=ready,
            scheduled=scheduled,
            dead=dead,
            # A job in transition between two sets can make this dip for one scrape.
            inflight=max(0, stored - ready - scheduled - dead),
            consumers_alive=alive,
            consumers_dead=consumers - alive,
            head=bytes(reply[6]) if reply[6] else None,
            now=float(reply[7]),
        )


@dataclass(frozen=True)
class QueueGauges:
    """What ``RedisQueue.gauges`` reads: job counts per state, consumers alive and dead,
    the oldest ready job's message, and the server's time."""

    ready: int
    scheduled: int
    dead: int
    inflight: int
    consumers_alive: int
    consumers_dead: int
    head: bytes | None
    now: float


def registered_queues(client: redis.Redis | Any) -> list[str]:
    """The queue names in the registry (``gq:queues``), sorted."""
    return sorted(_text(name) for name in client.smembers(REGISTRY))
