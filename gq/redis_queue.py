"""The one module that talks to Redis: a typed method per Lua script (SPEC section 4).

Everything above this module works with ids, messages and numbers; nothing above it
builds a key or a Redis command.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Optional, Protocol, TypeVar, cast

import redis
from redis.commands.core import Script
from redis.crc import key_slot

from gq import scripts, topology
from gq.errors import ConfigurationError, PermissionDeniedError, QueueFullError
from gq.keys import QUEUE_REGISTRY, QueueKeys

# Bounds on one script call (SPEC: "bounded in the work it does per call"); longer
# batches are split into several calls sent in one pipeline.
MAX_BATCH = 1000
# Dead jobs trimmed per script call at most (TRIM_BATCH in scripts/lib/dead.lua).
DEAD_TRIM_BATCH = 100
# How often a consumer on the embedded server (fakeredis) looks for the signal.
EMBEDDED_POLL = 0.01
# How often a consumer looks for jobs while Redis refuses the blocking wait (maxmemory).
OOM_POLL = 0.5
# The most queue names read from the registry (a bound on one SSCAN walk).
MAX_REGISTERED_QUEUES = 10_000
# History keys live 25 h after their last write (gq.facts.HISTORY_TTL): the hours to delete.
HISTORY_KEEP_HOURS = 26

T = TypeVar("T")


# The Redis client as gq uses it: the methods it calls, and no more. redis.Redis,
# redis.cluster.RedisCluster and fakeredis.FakeRedis satisfy it as they are (checked by
# mypy below). Replies are Any: redis-py types each one `X | Awaitable[X]` (one set of
# annotations for its asyncio client too) and as decoded str, where gq's clients
# (decode_responses=False) answer bytes; every caller converts the reply it reads.
class RedisPipeline(Protocol):
    """The commands gq queues on a non-transactional pipeline (a ClusterPipeline on a
    cluster); each returns the pipeline, ``execute`` the replies in order."""

    def llen(self, name: str, /) -> Any: ...
    def zcard(self, name: str, /) -> Any: ...
    def zcount(self, name: str, min: str, max: str, /) -> Any: ...
    def scard(self, name: str, /) -> Any: ...
    def delete(self, *names: str) -> Any: ...
    def exists(self, *names: str) -> Any: ...
    def get(self, name: str, /) -> Any: ...
    def hmget(self, name: str, keys: list[str], /) -> Any: ...
    def lpush(self, name: str, *values: str) -> Any: ...
    def ltrim(self, name: str, start: int, end: int, /) -> Any: ...
    def srem(self, name: str, *values: str) -> Any: ...
    def sadd(self, name: str, *values: str) -> Any: ...
    def set(self, name: str, value: str, *, px: int | None = ...) -> Any: ...
    def expire(self, name: str, time: int, /) -> Any: ...
    def hgetall(self, name: str, /) -> Any: ...
    def hdel(self, name: str, *keys: str) -> Any: ...
    def hincrby(self, name: str, key: str, amount: int = ..., /) -> Any: ...
    def execute(self, raise_on_error: bool = ...) -> list[Any]: ...


class RedisClient(Protocol):
    """The blocking client a ``RedisQueue`` is given (see the note above)."""

    def register_script(self, script: str, /) -> Script: ...
    def pipeline(self, transaction: bool = ...) -> RedisPipeline: ...
    def lmove(self, first_list: str, second_list: str, src: str, dest: str, /) -> Any: ...
    # timeout: int as redis-py annotates it; BLMOVE takes fractional seconds (Redis 6+).
    def blmove(
        self, first_list: str, second_list: str, timeout: int, src: str, dest: str, /
    ) -> Any: ...
    def blpop(self, keys: list[str], timeout: float, /) -> Any: ...
    def smembers(self, name: str, /) -> Any: ...
    def config_get(self, pattern: str, /) -> Any: ...
    def time(self, **kwargs: Any) -> Any: ...  # a cluster takes target_nodes=
    def hmget(self, name: str, keys: list[str], /) -> Any: ...
    def hget(self, name: str, key: str, /) -> Any: ...
    def lindex(self, name: str, index: int, /) -> Any: ...
    def zrange(
        self, name: str, start: int, end: int, *, desc: bool = ..., withscores: bool = ...
    ) -> Any: ...
    def sscan_iter(self, name: str, *, count: int | None = ...) -> Iterator[Any]: ...
    def ping(self) -> Any: ...
    def close(self) -> None: ...


if TYPE_CHECKING:  # mypy's proof that redis-py's and fakeredis' clients satisfy it
    from fakeredis import FakeRedis
    from redis.client import Pipeline
    from redis.cluster import ClusterPipeline, RedisCluster

    def _satisfied(plain: redis.Redis, cluster: RedisCluster, fake: FakeRedis) -> list[RedisClient]:
        return [plain, cluster, fake]

    def _pipelines(plain: Pipeline, cluster: ClusterPipeline) -> list[RedisPipeline]:
        return [plain, cluster]  # RedisCluster.pipeline() is unannotated: checked here


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


# Replies that say "not now" rather than "no": a failover in progress, a server loading
# its data or busy with a script, memory full until workers drain it. redis-py maps some
# to ResponseError subclasses whose text lacks the code.
_TRANSIENT_CODES = ("READONLY", "MASTERDOWN", "TRYAGAIN", "CLUSTERDOWN", "LOADING", "BUSY", "OOM")
_TRANSIENT_TYPES: tuple[type[BaseException], ...] = tuple(
    getattr(redis.exceptions, name)
    for name in (
        "ReadOnlyError",
        "TryAgainError",
        "ClusterDownError",
        "OutOfMemoryError",
        "BusyLoadingError",
    )  # fmt: skip
    if hasattr(redis.exceptions, name)
)
# How Redis says "this user may not": NOPERM for a command; inside a script, Redis 7.0
# answers a plain ERR with this text instead.
_DENIED_TEXT = ("NOPERM", "no permissions to", "can't run this command")


def is_refusal(exc: BaseException) -> bool:
    """Whether Redis answered ``exc`` and meant it (wrong type, no permission, a script's
    error): sending the same command again would get the same answer, unlike a lost reply."""
    if isinstance(exc, PermissionDeniedError):
        return True
    return isinstance(exc, redis.ResponseError) and not (
        isinstance(exc, _TRANSIENT_TYPES) or str(exc).startswith(_TRANSIENT_CODES)
    )


def _is_denied(exc: BaseException) -> bool:
    if isinstance(exc, getattr(redis.exceptions, "NoPermissionError", ())):
        return True
    return isinstance(exc, redis.ResponseError) and any(t in str(exc) for t in _DENIED_TEXT)


@contextmanager
def _permission_errors(operation: str) -> Iterator[None]:
    """An ACL refusal as gq's PermissionDeniedError, naming what was refused."""
    try:
        yield
    except redis.ResponseError as exc:
        if _is_denied(exc):
            raise PermissionDeniedError(operation, exc) from exc
        raise


def check_client(client: Any, name: str) -> bool:
    """Refuse a client gq cannot use for queue ``name``; return whether it is a cluster.

    Shared by ``RedisQueue`` and ``AsyncRedisQueue`` (sync and asyncio clients alike)."""
    encoder = getattr(client, "get_encoder", None)
    if encoder is not None and encoder().decode_responses:
        raise ConfigurationError(
            "gq needs a Redis client with decode_responses=False: job data is bytes"
        )
    cluster = topology.is_cluster(client)
    if cluster and not topology.hash_tag(name):
        raise ConfigurationError(
            f"queue name {name!r} has no hash tag: on Redis Cluster every key of a queue "
            f"must be in one slot; put the name in braces, e.g. '{{{name}}}' "
            f"(curlyq and gq keys are '<queue>:data', '<queue>:active'...)"
        )
    return cluster


def push_batches(messages: Sequence[tuple[str, bytes]]) -> list[list[Any]]:
    """The ARGV of each push call for (id, message) pairs (at most MAX_BATCH per call)."""
    return [[part for pair in chunk for part in pair] for chunk in chunks(messages)]


def schedule_batches(
    entries: Sequence[tuple[str, bytes, float]], relative: bool
) -> list[list[Any]]:
    """The ARGV of each schedule call for (id, message, time) triples."""
    mode = "after" if relative else "at"
    return [
        [mode, *(part for entry in chunk for part in (entry[0], entry[1], repr(entry[2])))]
        for chunk in chunks(entries)
    ]


def flags(replies: Iterable[Any]) -> list[bool]:
    """One bool per job from the replies of scripts that answer one integer per job."""
    return [bool(flag) for reply in replies for flag in reply]


# Optional, not `bytes | None`: a base class is evaluated at run time (Python 3.9).
class Fetched(list[tuple[str, Optional[bytes]]]):
    """The (id, message or None) pairs of one fetch, and whether it concerns a suspect job."""

    def __init__(self, pairs: Iterable[tuple[str, bytes | None]], suspect: bool) -> None:
        super().__init__(pairs)
        self.suspect = suspect


class RedisQueue:
    """The Redis state of queue ``name``, reached through ``client``."""

    def __init__(self, client: RedisClient, name: str) -> None:
        self.cluster = check_client(client, name)
        self.client = client
        self.keys = QueueKeys(name)
        self._embedded = type(client).__module__.startswith("fakeredis")
        self._scripts: dict[str, Script] = {
            name: client.register_script(scripts.source(name)) for name in scripts.NAMES
        }

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        with _permission_errors(f"gq's {name} script"):
            return self._scripts[name](keys=list(keys), args=list(args))

    def _run_batches(self, name: str, keys: Sequence[str], batches: list[list[Any]]) -> list[Any]:
        """Run one script call per batch: a single call directly, several in one pipeline.

        redis-py's cluster pipeline cannot run scripts: on a cluster, one call after another.
        """
        if len(batches) == 1 or self.cluster:
            return [self._run(name, keys, args) for args in batches]
        pipe = self.client.pipeline(transaction=False)
        for args in batches:  # (a Pipeline is a redis.Redis: no cluster comes here)
            self._scripts[name](keys=list(keys), args=args, client=cast(redis.Redis, pipe))
        with _permission_errors(f"gq's {name} script"):
            return list(pipe.execute())

    # -- producer ---------------------------------------------------------------------

    def push(self, messages: Sequence[tuple[str, bytes]]) -> list[bool]:
        """Store and queue each (id, message) whose id is new; True where stored."""
        with _full_queue_errors():
            replies = self._run_batches(
                "push", [self.keys.data, self.keys.active, self.keys.signal], push_batches(messages)
            )
        return flags(replies)

    def schedule(
        self, entries: Sequence[tuple[str, bytes, float]], *, relative: bool
    ) -> list[bool]:
        """Store and schedule each (id, message, time) whose id is new; True where stored.

        ``relative`` times are delays added to the server's clock, others unix seconds.
        """
        batches = schedule_batches(entries, relative)
        with _full_queue_errors():
            replies = self._run_batches("schedule", [self.keys.data, self.keys.scheduled], batches)
        return flags(replies)

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
            with _permission_errors("BLMOVE"):
                # A float timeout: BLMOVE takes one (Redis 6+), redis-py annotates it int.
                return self.client.blmove(key, key, timeout, "LEFT", "LEFT") is not None  # type: ignore[arg-type]
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

    def tidy(
        self, cursor: str, *, dead_max_jobs: int, dead_max_age: float, count: int = MAX_BATCH
    ) -> tuple[str, int, int]:
        """Trim the dead set by age and size, and drop up to ``count`` recovery counts of
        jobs that no longer exist, from ``cursor`` on ("0" starts a walk).

        Returns (next cursor, "0" when the walk is complete; dead jobs trimmed; counts dropped).
        """
        k = self.keys
        reply = self._run(
            "tidy",
            [k.dead, k.data, k.recovered],
            [dead_max_jobs, repr(float(dead_max_age)), cursor, count],
        )
        return _text(reply[0]), int(reply[1]), int(reply[2])

    def inflight_ids(self, consumer_id: str) -> set[str]:
        """The ids in this consumer's in-flight set (at most buffer + concurrency + one
        lost fetch, so one SMEMBERS is bounded)."""
        with _permission_errors("SMEMBERS"):
            members = self.client.smembers(self.keys.inflight(consumer_id))
        return {_text(member) for member in members}

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
            cluster: Any = self.client  # a RedisCluster, whose own method finds the node
            node = cluster.get_node_from_key(self.keys.data)
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
            k.periodic,
            k.periodic_rules,
            k.periodic_enqueued,
            *(_text(member) for member in members),
            *self._observability_keys([_text(member) for member in members]),
        ]
        pipe = self.client.pipeline(transaction=False)
        for key in keys:  # one key per call: a cluster may hold them on different slots
            pipe.delete(key)
        pipe.srem(QUEUE_REGISTRY, k.name)
        return sum(int(n) for n in pipe.execute()[:-1])

    # -- observability reads (the dashboard; the keys are written by the worker side) -------

    def exists(self) -> bool:
        """Whether Redis holds anything of this queue: jobs, or a registered consumer."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        for key in (k.data, k.active, k.scheduled, k.dead, k.consumers):
            pipe.exists(key)  # one key per call: a cluster client routes each by its key
        return any(int(n) for n in pipe.execute())

    def dead_page(self, offset: int, count: int) -> list[tuple[str, float, bytes | None]]:
        """Dead jobs from ``offset``, newest first: (id, killed at, message or None)."""
        return self._page(self.keys.dead, offset, count, desc=True)

    def scheduled_page(self, offset: int, count: int) -> list[tuple[str, float, bytes | None]]:
        """Scheduled jobs from ``offset``, soonest first: (id, due at, message or None)."""
        return self._page(self.keys.scheduled, offset, count, desc=False)

    def _page(
        self, key: str, offset: int, count: int, *, desc: bool
    ) -> list[tuple[str, float, bytes | None]]:
        if count <= 0 or offset < 0:
            return []
        reply: Any = self.client.zrange(key, offset, offset + count - 1, desc=desc, withscores=True)
        entries = [(_text(member), float(score)) for member, score in reply]
        messages = self.messages([job_id for job_id, _ in entries])
        return [(job_id, score, message) for (job_id, score), message in zip(entries, messages)]

    def run_scheduled(self, ids: Sequence[str]) -> list[bool]:
        """Move the given scheduled jobs to the tail of the queue now; True per id moved.

        retry_dead.lua moves ids from whichever sorted set it is given to the tail of the
        active list, atomically: run on the scheduled set, it is exactly "run now".
        """
        batches = [[part for job_id in chunk for part in (job_id, b"")] for chunk in chunks(ids)]
        if not batches:
            return []
        keys = [self.keys.scheduled, self.keys.data, self.keys.active, self.keys.signal]
        replies = self._run_batches("retry_dead", keys, batches)
        return [bool(flag) for reply in replies for flag in reply]

    def consumer_facts(self, consumer_ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """The facts each consumer wrote with its heartbeat; None where there are none
        (expired, a curlyq consumer, or not JSON)."""
        if not consumer_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for consumer_id in consumer_ids:
            pipe.get(self.keys.facts(consumer_id))
        return [_json_object(raw) for raw in pipe.execute()]

    def history(self, now: float, minutes: int = 60) -> list[tuple[int, int, int]]:
        """(minute start, done, failed) for the ``minutes`` minutes up to the one holding
        ``now`` (unix seconds), oldest first; one round trip over the hour keys involved."""
        last = int(now // 60) * 60
        starts = [last - 60 * back for back in range(minutes - 1, -1, -1)]
        hours: dict[int, list[int]] = {}
        for minute in starts:
            hours.setdefault(minute - minute % 3600, []).append(minute)
        plan = [
            (hour, [f"{kind}:{m}" for kind in ("done", "failed") for m in in_hour])
            for hour, in_hour in hours.items()
        ]
        pipe = self.client.pipeline(transaction=False)
        for hour, fields in plan:
            pipe.hmget(self.keys.history(hour), fields)
        counts: dict[str, int] = {}
        for (_, fields), values in zip(plan, pipe.execute()):
            counts.update((f, _count(v)) for f, v in zip(fields, values))
        return [(m, counts.get(f"done:{m}", 0), counts.get(f"failed:{m}", 0)) for m in starts]

    # -- periodic jobs (gq/periodic.py) -------------------------------------------------

    def enqueue_periodic(self, occurrence: PeriodicOccurrence) -> PeriodicReply:
        """Enqueue one occurrence of a periodic schedule unless the script, on the server's
        clock, finds it handled, early or too late (periodic.lua says which)."""
        k = self.keys
        keys = [k.periodic, k.periodic_rules, k.periodic_enqueued, k.data, k.active, k.signal]
        o = occurrence
        args = [o.name, o.at, o.following, o.job_id, o.message, o.rule, repr(float(o.late_limit))]
        with _full_queue_errors():
            outcome, now, cursor = self._run("periodic", keys, args)
        return PeriodicReply(
            _text(outcome), float(now), None if cursor is None else int(_text(cursor))
        )

    def periodic_state(self) -> dict[str, tuple[str | None, int | None, int | None]]:
        """Each periodic schedule this queue knows: name -> (rule text, cursor, last enqueued)."""
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        for key in (k.periodic_rules, k.periodic, k.periodic_enqueued):
            pipe.hgetall(key)
        rules, cursors, enqueued = (
            {_text(name): _text(value) for name, value in reply.items()} for reply in pipe.execute()
        )
        return {
            name: (rules.get(name), _int(cursors.get(name)), _int(enqueued.get(name)))
            for name in sorted({*rules, *cursors, *enqueued})
        }

    def periodic_cursors(self, names: Sequence[str]) -> dict[str, int | None]:
        """The cursor (last occurrence handled) of each named schedule, None if it has none."""
        values = self.client.hmget(self.keys.periodic, list(names)) if names else []
        return {name: _int(_text(v) if v is not None else None) for name, v in zip(names, values)}

    def delete_periodic(self, names: Sequence[str]) -> int:
        """Forget periodic schedules (a consumer that still has one starts it afresh);
        the count of names that were known."""
        if not names:
            return 0
        k = self.keys
        pipe = self.client.pipeline(transaction=False)
        for key in (k.periodic, k.periodic_rules, k.periodic_enqueued):
            pipe.hdel(key, *names)
        return max(int(n) for n in pipe.execute())

    def _observability_keys(self, inflight_keys: Sequence[str]) -> list[str]:
        """The facts of the given consumers and the history keys that may still live."""
        prefix = self.keys.inflight("")
        ids = [key[len(prefix) :] for key in inflight_keys if key.startswith(prefix)]
        hour = int(time.time()) // 3600 * 3600
        hours = range(hour - HISTORY_KEEP_HOURS * 3600, hour + 7200, 3600)  # skew both ways
        return [*map(self.keys.facts, ids), *map(self.keys.history, hours)]

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

    def facts(self, consumer_ids: Sequence[str]) -> list[bytes | None]:
        """The stored facts (JSON) of each consumer, None where there are none."""
        if not consumer_ids:
            return []
        pipe = self.client.pipeline(transaction=False)
        for consumer_id in consumer_ids:
            pipe.get(self.keys.facts(consumer_id))
        return [None if value is None else bytes(value) for value in pipe.execute()]

    def history_fields(self, hours: Sequence[int]) -> dict[str, int]:
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


def registered_queues(client: RedisClient, limit: int = MAX_REGISTERED_QUEUES) -> list[str]:
    """The queue names in the registry (``gq:queues``), sorted; at most ``limit`` of them,
    read with SSCAN so that a huge registry cannot block Redis."""
    names: set[str] = set()
    for member in client.sscan_iter(QUEUE_REGISTRY, count=1000):
        names.add(_text(member))
        if len(names) >= limit:
            break
    return sorted(names)


def _json_object(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _count(raw: Any) -> int:
    try:
        return max(0, int(raw)) if raw is not None else 0
    except ValueError:
        return 0


# -- several queues (one consumer, one handler pool; SPEC section 9) ----------------------


def signalled(queues: Sequence[RedisQueue]) -> list[bool]:
    """Whether each queue's signal is raised ("it may have jobs"), read in one round trip
    (a cluster pipeline when the queues live in several slots)."""
    pipe = queues[0].client.pipeline(transaction=False)
    for queue in queues:
        pipe.exists(queue.keys.signal)
    return [bool(flag) for flag in pipe.execute()]


def wait_for_any_signal(queues: Sequence[RedisQueue], timeout: float) -> int | None:
    """Block until one of the queues may have jobs (its index) or ``timeout`` passes.

    One BLPOP over every signal list where they share a server slot (a plain Redis, or
    queues with one hash tag on a Cluster); BLPOP takes the "1", so it is put back at
    once for the other consumers (BLMOVE, which leaves it, takes one list only). On a
    Cluster whose queues live in several slots, a short blocking wait on each in turn:
    a signal is then seen within ``timeout`` at worst.
    """
    first = queues[0]
    keys = [queue.keys.signal for queue in queues]
    if first._embedded:
        return _poll_signals(queues, timeout)
    if first.cluster and len({key_slot(key.encode()) for key in keys}) > 1:
        share = max(EMBEDDED_POLL * 10, timeout / len(queues))
        return next((i for i, q in enumerate(queues) if q.wait_for_signal(share)), None)
    with _permission_errors("BLPOP"):
        reply = first.client.blpop(keys, timeout)
    if reply is None:
        return None
    key = _text(reply[0])
    pipe = first.client.pipeline(transaction=False)
    pipe.lpush(key, "1")
    pipe.ltrim(key, 0, 0)  # one "1" at most, whatever a writer did meanwhile
    pipe.execute()
    return keys.index(key)


def _poll_signals(queues: Sequence[RedisQueue], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        flags = signalled(queues)
        if any(flags):
            return flags.index(True)
        if time.monotonic() >= deadline:
            return None
        time.sleep(EMBEDDED_POLL)  # gevent.sleep in a patched process


class AsyncRedisQueue:
    """The producer's half of ``RedisQueue`` on a ``redis.asyncio`` client, for ``gq.aio``:
    the same scripts, keys, arguments and replies, awaited."""

    def __init__(self, client: Any, name: str) -> None:
        self.cluster = check_client(client, name)
        self.client: Any = client
        self.keys = QueueKeys(name)
        self._scripts: dict[str, Any] = {
            name: client.register_script(scripts.source(name)) for name in ("push", "schedule")
        }

    async def push(self, messages: Sequence[tuple[str, bytes]]) -> list[bool]:
        """``RedisQueue.push``, awaited."""
        keys = [self.keys.data, self.keys.active, self.keys.signal]
        with _full_queue_errors():
            return flags(await self._run_batches("push", keys, push_batches(messages)))

    async def schedule(
        self, entries: Sequence[tuple[str, bytes, float]], *, relative: bool
    ) -> list[bool]:
        """``RedisQueue.schedule``, awaited."""
        keys = [self.keys.data, self.keys.scheduled]
        batches = schedule_batches(entries, relative)
        with _full_queue_errors():
            return flags(await self._run_batches("schedule", keys, batches))

    async def _run_batches(self, name: str, keys: list[str], batches: list[list[Any]]) -> list[Any]:
        """As ``RedisQueue._run_batches``: several calls go in one pipeline, except on a
        cluster, whose pipeline cannot run scripts."""
        script = self._scripts[name]
        if len(batches) == 1 or self.cluster:
            return [await script(keys=keys, args=args) for args in batches]
        pipe = self.client.pipeline(transaction=False)
        for args in batches:
            await script(keys=keys, args=args, client=pipe)
        return list(await pipe.execute())


def _int(value: str | None) -> int | None:
    return None if value is None else int(float(value))


@dataclass(frozen=True)
class PeriodicOccurrence:
    """What a consumer proposes to enqueue: schedule ``name``'s occurrence ``at`` (unix
    seconds), the occurrence after it, the job, the rule text and the catch-up limit."""

    name: str
    at: int
    following: int
    job_id: str
    message: bytes
    rule: str
    late_limit: float


@dataclass(frozen=True)
class PeriodicReply:
    """The script's answer: its outcome, the server's time, the cursor after the call."""

    outcome: str
    server_now: float
    cursor: int | None
