"""The asyncio Producer's cases, run under plain asyncio in a process gevent never patched.

The suite itself runs monkey-patched (tests/conftest.py), so tests/test_aio.py runs this
module as ``python -m tests.aio_cases URL QUEUE [CASE ...]``: each case (a coroutine
below) gets a queue of its own (``queue_of``) and asserts on the Redis state it reads back with a
``redis.asyncio`` client of its own. The output is one JSON object, case name -> "ok" or
the failure's traceback; the exit code is 0 only when every case passed. ``URL`` is a
``redis://`` URL, ``fakeredis://NAME`` (an embedded server shared by every client of
this process) or ``redis+cluster://host:port,...`` for the ``cluster`` case.
"""

from __future__ import annotations

import asyncio
import json
import socket
import sys
import time
import traceback
from collections.abc import Awaitable
from datetime import datetime, timedelta, timezone
from typing import Any, Callable

import redis
import redis.asyncio

import gq
import gq.aio
from gq import job as jobs
from gq.store.keys import QueueKeys

Case = Callable[[str, str], Awaitable[None]]
CASES: dict[str, Case] = {}


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def inspector(url: str) -> Any:
    """A client that reads the state back (for fakeredis://, the same embedded server)."""
    return gq.aio.client_from_url(url)


async def active(client: Any, queue: str) -> list[str]:
    return [x.decode() for x in await client.lrange(QueueKeys(queue).active, 0, -1)]


async def scheduled(client: Any, queue: str) -> dict[str, float]:
    pairs = await client.zrange(QueueKeys(queue).scheduled, 0, -1, withscores=True)
    return {member.decode(): score for member, score in pairs}


async def stored(client: Any, queue: str, job_id: str) -> gq.Job:
    return jobs.decode(await client.hget(QueueKeys(queue).data, job_id))


async def server_now(client: Any) -> float:
    seconds, micros = await client.time()
    return float(seconds) + micros / 1e6


@case
async def perform_stores_queues_and_signals(url: str, queue: str) -> None:
    async with gq.aio.Producer(queue, url=url) as producer:
        job_id = await producer.perform(b"payload")
        kept = await producer.perform(gq.Job(id="abc", data=b"xyz", attempt=2))
    client = inspector(url)
    assert kept == "abc"
    assert await active(client, queue) == [job_id, "abc"]
    assert await stored(client, queue, job_id) == gq.Job(job_id, b"payload", 0)
    assert await stored(client, queue, "abc") == gq.Job("abc", b"xyz", 2)
    assert await client.lrange(QueueKeys(queue).signal, 0, -1) == [b"1"]


@case
async def messages_match_the_sync_producer(url: str, queue: str) -> None:
    """The same job through both producers: the same fields and keys, bar ReadyAt's value."""
    sync = gq.Producer(queue + "-sync", client=_sync_client(url))
    async with gq.aio.Producer(queue, url=url) as producer:
        await producer.perform(gq.Job(id="same", data=b"\x00\xff", attempt=1))
    sync.perform(gq.Job(id="same", data=b"\x00\xff", attempt=1))
    client = inspector(url)
    ours = await client.hget(QueueKeys(queue).data, "same")
    theirs = await client.hget(QueueKeys(queue + "-sync").data, "same")
    assert jobs.decode(ours) == jobs.decode(theirs) == gq.Job("same", b"\x00\xff", 1)
    assert _keys(ours) == _keys(theirs) == {"ID", "Data", "Attempt", "ReadyAt"}


@case
async def perform_at_and_perform_after_schedule(url: str, queue: str) -> None:
    client = inspector(url)
    when = datetime(2031, 1, 2, 3, 4, 5, tzinfo=timezone.utc)
    async with gq.aio.Producer(queue, url=url) as producer:
        first = await producer.perform_at(when, b"a")
        second = await producer.perform_at(1_900_000_000.25, b"b")
        before = await server_now(client)
        later = await producer.perform_after(timedelta(minutes=5), b"c")
        after = await server_now(client)
    scores = await scheduled(client, queue)
    assert scores[first] == when.timestamp() and scores[second] == 1_900_000_000.25
    assert before + 300 <= scores[later] <= after + 300
    assert await active(client, queue) == []


@case
async def perform_many_keeps_order_and_reports_duplicates(url: str, queue: str) -> None:
    client = inspector(url)
    async with gq.aio.Producer(queue, url=url) as producer:
        assert await producer.perform_many([]) == []
        # 2,500 jobs: three script calls in one pipeline.
        ids = await producer.perform_many([b"job-%d" % i for i in range(2500)])
        assert await active(client, queue) == ids and len(set(ids)) == 2500
        assert (await stored(client, queue, ids[1234])).data == b"job-1234"
        batch = [gq.Job(id="n1"), gq.Job(id=ids[0]), gq.Job(id="n2"), gq.Job(id="n1")]
        try:
            await producer.perform_many(batch)
        except gq.JobAlreadyExistsError as exc:
            assert [job.id for job in exc.duplicates] == [ids[0], "n1"]
        else:
            raise AssertionError("duplicates were not reported")
    assert (await active(client, queue))[-2:] == ["n1", "n2"]


def flush_after(call: Any, direct: Any) -> Any:
    """``call``, then SCRIPT FLUSH on ``direct`` the first time: a restart or a second
    flush landing just after redis-py loaded a script (tests/test_scripts.py's sync twin)."""
    left = [1]

    async def flushing(*args: Any, **kwargs: Any) -> Any:
        reply = await call(*args, **kwargs)
        if left:
            left.pop()
            await direct.script_flush()
        return reply

    return flushing


@case
async def a_flush_right_after_a_script_reload_is_sent_again(url: str, queue: str) -> None:
    client = inspector(url)
    async with gq.aio.Producer(queue, url=url) as producer:
        redis_client = producer._queue.client
        redis_client.script_load = flush_after(redis_client.script_load, client)
        await client.script_flush()
        assert await producer.perform(gq.Job(id="one")) == "one"
        make_pipeline = redis_client.pipeline

        def pipeline(**kwargs: Any) -> Any:
            pipe = make_pipeline(**kwargs)
            pipe.load_scripts = flush_after(pipe.load_scripts, client)
            return pipe

        redis_client.pipeline = pipeline
        # Three calls in one pipeline; one sent twice would report its ids as duplicates.
        ids = await producer.perform_many([b"job-%d" % i for i in range(2500)])
    assert await active(client, queue) == ["one", *ids]


@case
async def a_duplicate_id_raises_and_changes_nothing(url: str, queue: str) -> None:
    async with gq.aio.Producer(queue, url=url) as producer:
        await producer.perform_after(60, gq.Job(id="dup", data=b"first"))
        for call in (producer.perform, lambda job: producer.perform_after(1, job)):
            try:
                await call(gq.Job(id="dup", data=b"second"))
            except gq.JobAlreadyExistsError as exc:
                assert exc.job.data == b"second"
            else:
                raise AssertionError("a duplicate id was accepted")
    client = inspector(url)
    assert (await stored(client, queue, "dup")).data == b"first"
    assert await active(client, queue) == []


@case
async def concurrent_performs_all_land(url: str, queue: str) -> None:
    """200 coroutines enqueue at once on one producer (one pool of connections)."""
    async with gq.aio.Producer(queue, url=url) as producer:
        ids = await asyncio.gather(*(producer.perform(b"%d" % i) for i in range(200)))
    assert sorted(await active(inspector(url), queue)) == sorted(ids)
    assert len(set(ids)) == 200


@case
async def perform_gives_the_event_loop_a_turn(url: str, queue: str) -> None:
    """While a perform waits for Redis, other coroutines run (a blocking call would finish
    inside the task's first step, before anyone else ran)."""
    async with gq.aio.Producer(queue, url=url) as producer:
        await producer.perform(b"warm-up")  # connected, scripts loaded
        for call in (producer.perform(b"x"), producer.perform_many([b"y"] * 10)):
            task = asyncio.ensure_future(call)
            await asyncio.sleep(0)  # the task runs up to its first wait
            assert not task.done(), "the call ran to its end without yielding"
            await task


@case
async def bad_input_raises_and_writes_nothing(url: str, queue: str) -> None:
    async with gq.aio.Producer(queue, url=url, max_message_bytes=100) as producer:
        for call, error in [
            (lambda: producer.perform("text"), TypeError),  # type: ignore[arg-type]
            (lambda: producer.perform_many([b"ok", 5]), TypeError),  # type: ignore[list-item]
            (lambda: producer.perform_after(-1, b"x"), gq.ConfigurationError),
            (lambda: producer.perform_at(float("inf"), b"x"), gq.ConfigurationError),
            (lambda: producer.perform_at(1e15, b"x"), gq.ConfigurationError),
            (lambda: producer.perform_after(1e15, b"x"), gq.ConfigurationError),
            (lambda: producer.perform(b"x" * 200), gq.MessageTooLargeError),
        ]:
            try:
                await call()
            except error:
                pass
            else:
                raise AssertionError(f"no {error.__name__}")
    client = inspector(url)
    assert await client.exists(*(f"{queue}:{k}" for k in ("data", "active", "scheduled"))) == 0


@case
async def wrong_clients_are_refused_at_construction(url: str, queue: str) -> None:
    refused: list[Callable[[], object]] = [
        lambda: gq.aio.Producer(queue),
        lambda: gq.aio.Producer("", url=url),
        lambda: gq.aio.Producer(queue, client=_sync_client(url)),
        lambda: gq.aio.Producer(queue, client=redis.asyncio.Redis(decode_responses=True)),
        lambda: gq.aio.Producer(queue, url="redis+cluster://no-port/"),
        lambda: gq.aio.Producer(queue, url="redis+sentinel://127.0.0.1:1/"),  # no service
        lambda: gq.aio.Producer(queue, url="http://127.0.0.1/"),
    ]
    for build in refused:
        try:
            build()
        except gq.ConfigurationError:
            continue
        raise AssertionError("a wrong client or URL was accepted")


@case
async def runs_without_gevent(url: str, queue: str) -> None:
    """gq.aio pulls in no gevent, and this process's sockets are the standard ones."""
    assert "gevent" not in sys.modules, "importing gq.aio imported gevent"
    assert socket.socket.__module__ == "socket", socket.socket.__module__


@case
async def enqueue_for_a_gq_worker(url: str, queue: str) -> None:
    """Jobs the parent test then runs with a gq Consumer (real Redis only)."""
    async with gq.aio.Producer(queue, url=url) as producer:
        await producer.perform(gq.Job(id="now", data=b"1"))
        await producer.perform_many([gq.Job(id="many-a", data=b"2"), gq.Job(id="many-b")])
        await producer.perform_after(0.2, gq.Job(id="later", data=b"3"))
        await producer.perform_at(time.time() - 1, gq.Job(id="past", data=b"4"))


@case
async def cluster(url: str, queue: str) -> None:
    """On a real Redis Cluster through redis.asyncio's RedisCluster: a hash tag is needed,
    and a batch over several script calls goes one call after another."""
    from redis.asyncio.cluster import ClusterNode, RedisCluster

    hosts = url.split("://", 1)[1].strip("/").split(",")
    nodes = [ClusterNode(host, int(port)) for host, _, port in (h.rpartition(":") for h in hosts)]
    client = RedisCluster(startup_nodes=nodes)
    try:
        try:
            gq.aio.Producer(queue.strip("{}"), client=client)
        except gq.ConfigurationError as exc:
            assert "hash tag" in str(exc)
        else:
            raise AssertionError("a queue without a hash tag was accepted on a cluster")
        producer = gq.aio.Producer(queue, client=client)
        ids = await producer.perform_many([b"c-%d" % i for i in range(1500)])
        later = await producer.perform_after(60, b"later")
        one = await producer.perform(gq.Job(id="one"))
        assert await active(client, queue) == [*ids, one]
        assert list(await scheduled(client, queue)) == [later]
    finally:
        await client.aclose()


@case
async def topology_url(url: str, queue: str) -> None:
    """A ``redis+cluster://`` or ``redis+sentinel://`` URL, as ``gq.Producer`` reads them."""
    async with gq.aio.Producer(queue, url=url) as producer:
        ids = await producer.perform_many([b"u-%d" % i for i in range(1200)])
        one = await producer.perform(b"one")
        later = await producer.perform_after(60, b"later")
    client = inspector(url)
    try:
        assert await active(client, queue) == [*ids, one]
        assert list(await scheduled(client, queue)) == [later]
    finally:
        await client.aclose()


def _sync_client(url: str) -> redis.Redis:
    from gq.store.connection import client_from_url

    return client_from_url(url)  # type: ignore[no-any-return]


def _keys(message: bytes) -> set[str]:
    import msgpack

    return {key.decode() for key in msgpack.unpackb(message, raw=True)}


def queue_of(queue: str, name: str) -> str:
    """The queue case ``name`` uses: its own, except on a cluster (the given hash tag)."""
    return queue if "{" in queue else f"{queue}-{name}"


async def run(url: str, queue: str, names: list[str]) -> dict[str, str]:
    results = {}
    for name in names:
        try:
            await CASES[name](url, queue_of(queue, name))
            results[name] = "ok"
        except Exception:  # noqa: BLE001 - a failing case is reported with its traceback
            results[name] = traceback.format_exc()
    return results


def main() -> None:
    url, queue, *names = sys.argv[1:]
    results = asyncio.run(run(url, queue, names))
    print(json.dumps(results))
    sys.exit(0 if all(value == "ok" for value in results.values()) else 1)


if __name__ == "__main__":
    main()
