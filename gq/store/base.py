"""The Redis boundary's common ground: the client as gq uses it (a Protocol), how its
errors are read (refusals, permissions, a full server), and ``ScriptedQueue``, which runs
gq's Lua scripts (SPEC section 4) on one queue's keys.

The boundary has three sides, one module each: the worker's and producer's operations
(``gq.store.jobs``), the operator's (``gq.store.admin``) and the asyncio producer's
(``gq.store.aio``). Everything above them works with ids, messages and numbers; nothing
above them builds a key or a Redis command.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, cast

import redis
from redis.commands.core import Script

from gq import scripts
from gq.errors import ConfigurationError, PermissionDeniedError, QueueFullError, RateLimited
from gq.job import ID_ERRORS
from gq.store import servers, topology
from gq.store.groupkeys import group_keys
from gq.store.keys import QueueKeys

# Bounds on one script call (SPEC: "bounded in the work it does per call"); longer
# batches are split into several calls sent in one pipeline.
MAX_BATCH = 1000

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
    def hset(
        self, name: str, key: str | None = ..., value: str | None = ..., *, mapping: Any = ...
    ) -> Any: ...
    def hvals(self, name: str, /) -> Any: ...
    def zmscore(self, key: str, members: list[str], /) -> Any: ...
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
    def zadd(self, name: str, mapping: Any, *, xx: bool = ...) -> Any: ...
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


def registered(client: Any, names: Iterable[str]) -> dict[str, Any]:
    """The named scripts, registered on ``client`` (redis-py loads each at its first call)."""
    return {name: client.register_script(scripts.source(name)) for name in names}


def each_key(client: Any, command: str, keys: Iterable[str], *args: Any) -> list[Any]:
    """The replies of ``command`` (a redis-py method name) on each of ``keys``, in one
    round trip: one key per call, so that a cluster client routes each by its slot."""
    pipe = client.pipeline(transaction=False)
    for key in keys:
        getattr(pipe, command)(key, *args)
    return list(pipe.execute())


def describe(exc: BaseException) -> str:
    """An error as a log line shows it: its type and its message on one line, e.g.
    "ResponseError: WRONGTYPE Operation against ...". Every log site that reports a Redis
    error uses this: redis-py 8's ``repr`` of one is only "server:ResponseError"."""
    message = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {message}" if message else type(exc).__name__


def as_text(value: Any) -> str:
    return value.decode("utf-8", ID_ERRORS) if isinstance(value, bytes) else str(value)


def wire(values: Iterable[Any]) -> list[Any]:
    """Script arguments as Redis gets them: text encoded here with surrogateescape, so that
    a job id read from Redis by ``as_text`` goes back as the exact bytes it came as, with
    any client (redis-py's encoder, strict by default, refuses such an id)."""
    return [v.encode("utf-8", ID_ERRORS) if type(v) is str else v for v in values]


@contextmanager
def full_queue_errors() -> Iterator[None]:
    """Redis's OOM refusal (maxmemory with noeviction) as gq's QueueFullError. Scripts
    without flags fail at their first memory-growing write, before anything is written."""
    try:
        yield
    except redis.ResponseError as exc:
        if out_of_memory(exc):
            raise QueueFullError(exc) from exc
        raise


def out_of_memory(exc: redis.ResponseError) -> bool:
    # redis-py 4.4+ raises OutOfMemoryError (its text without the "OOM" code); older
    # versions a ResponseError that keeps it.
    oom = getattr(redis.exceptions, "OutOfMemoryError", ())
    return isinstance(exc, oom) or servers.error_code(exc) == "OOM"


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
        "NoScriptError",  # the script cache was flushed: the next call loads it again
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
        isinstance(exc, _TRANSIENT_TYPES) or servers.error_code(exc) in _TRANSIENT_CODES
    )


def _is_denied(exc: BaseException) -> bool:
    if isinstance(exc, getattr(redis.exceptions, "NoPermissionError", ())):
        return True
    return isinstance(exc, redis.ResponseError) and any(t in str(exc) for t in _DENIED_TEXT)


@contextmanager
def permission_errors(operation: str) -> Iterator[None]:
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


#: One job for push_unique.lua: id, message, time (per the mode), lock name, lock TTL (s).
UniqueEntry = tuple[str, bytes, float, str, float]


def unique_calls(
    keys: QueueKeys, entries: Sequence[UniqueEntry], mode: str
) -> list[tuple[list[str], list[Any]]]:
    """The (KEYS, ARGV) of each push_unique call: ``mode`` "now", "at" or "after"."""
    head = [keys.data, keys.active, keys.signal, keys.flow, keys.scheduled, keys.dead]
    calls = []
    for chunk in chunks(entries):
        locks = [keys.unique(entry[3]) for entry in chunk]
        args: list[Any] = [mode]
        for id_, message, at, _, ttl in chunk:
            args += [id_, message, repr(float(at)), max(1, int(ttl * 1000))]
        calls.append((head + locks + keys.event_keys, args))
    return calls


def unique_replies(replies: Iterable[Any]) -> list[bool | str]:
    """push_unique's answer per job: True stored, False the id exists, or the holder's id."""
    return [bool(f) if isinstance(f, int) else as_text(f) for reply in replies for f in reply]


def flags(replies: Iterable[Any]) -> list[bool]:
    """One bool per job from the replies of scripts that answer one integer per job."""
    return [bool(flag) for reply in replies for flag in reply]


def optional_int(value: str | None) -> int | None:
    return None if value is None else int(float(value))


def held_back(hold_until: bytes | None, now_ms: float) -> float:
    """The seconds a stored ``hold_until`` (server ms) still holds the queue back, as
    fetch.lua reads it: 0 for none, junk or NaN, at most ``RateLimited.MAX_AFTER`` (a hold
    of "inf" written before the cap)."""
    try:
        at = float(hold_until) if hold_until is not None else math.nan
    except ValueError:
        return 0.0
    return 0.0 if math.isnan(at) else min(max(0.0, (at - now_ms) / 1000), RateLimited.MAX_AFTER)


def rate_setting(rate: bytes | None, period: bytes | None) -> tuple[int, float] | None:
    """The stored rate limit as (jobs, seconds); None for none, or settings that are not
    numbers (fetch.lua ignores those too)."""
    try:
        return None if rate is None or period is None else (int(rate), int(period) / 1000)
    except ValueError:
        return None


# How many times a call is sent while the script cache keeps being flushed under it (a
# Redis restart, a failover, SCRIPT FLUSH); redis-py's Script reloads before each.
NOSCRIPT_TRIES = 3


def flushed(reply: Any) -> bool:
    """Whether a pipelined script call failed because the script cache was flushed."""
    return isinstance(reply, redis.exceptions.NoScriptError)


def settled(replies: list[Any]) -> list[Any]:
    """``replies`` of a pipeline run with ``raise_on_error=False``; raise the first error."""
    failed = next((reply for reply in replies if isinstance(reply, Exception)), None)
    if failed is not None:
        raise failed
    return replies


class ScriptedQueue:
    """Queue ``name``'s keys on ``client``, and gq's scripts to run on them."""

    def __init__(self, client: RedisClient, name: str) -> None:
        self.cluster = check_client(client, name)
        self.client = client
        self.keys = QueueKeys(name)
        self._embedded = type(client).__module__.startswith("fakeredis")
        self._scripts: dict[str, Script] = registered(client, scripts.NAMES)
        self._server_ok = self._embedded  # fakeredis is whatever gq's own version needs

    def _check_server(self) -> None:
        """Refuse a server older than Redis 6.2 before gq's first script call on it."""
        if not self._server_ok:
            servers.require_supported(self.client)
            self._server_ok = True

    def _run(self, name: str, keys: Sequence[str], args: Sequence[Any]) -> Any:
        self._check_server()
        script, keys, args = self._scripts[name], list(keys), wire(args)
        with permission_errors(f"gq's {name} script"):
            for _ in range(NOSCRIPT_TRIES - 1):
                try:
                    return script(keys=keys, args=args)
                except redis.exceptions.NoScriptError:
                    continue  # flushed again between redis-py's reload and its call
            return script(keys=keys, args=args)

    def _run_batches(self, name: str, keys: Sequence[str], batches: list[list[Any]]) -> list[Any]:
        """Run one script call per batch: a single call directly, several in one pipeline.

        redis-py's cluster pipeline cannot run scripts: on a cluster, one call after another.
        """
        if len(batches) == 1 or self.cluster:
            return [self._run(name, keys, args) for args in batches]
        self._check_server()
        pipe = self.client.pipeline(transaction=False)
        for args in batches:  # (a Pipeline is a redis.Redis: no cluster comes here)
            self._scripts[name](keys=list(keys), args=wire(args), client=cast(redis.Redis, pipe))
        with permission_errors(f"gq's {name} script"):
            replies = list(pipe.execute(raise_on_error=False))
        # A flush between the pipeline's SCRIPT LOAD and its calls fails only those calls
        # (the others ran): each goes again alone, so that none runs twice.
        replies = [self._run(name, keys, args) if flushed(reply) else reply
                   for args, reply in zip(batches, replies)]  # fmt: skip
        with permission_errors(f"gq's {name} script"):
            return settled(replies)

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
        ids = wire(ids)
        return list(self.client.hmget(self.keys.data, ids)) if ids else []

    def ping(self) -> None:
        """Raise the client's error unless Redis answers, accepts the credentials and lets
        them run gq's scripts on this queue's keys (a read-only script: NOPERM if not)."""
        self.client.ping()
        self.backlog("access-check")

    def backlog(self, consumer_id: str) -> tuple[int, int, int, int]:
        """(ready, due by server time, in flight for this consumer, grouped: the fields of
        the groups' lines, 0 exactly when no grouped job waits), read atomically."""
        keys = [self.keys.active, self.keys.scheduled, self.keys.inflight(consumer_id),
                *group_keys(self.keys.name)]  # fmt: skip
        ready, due, inflight, grouped = self._run("backlog", keys, [])
        return int(ready), int(due), int(inflight), int(grouped)
