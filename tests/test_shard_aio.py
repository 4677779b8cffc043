# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""asyncio producers of a sharded queue on a real Redis Cluster of 3 masters: ``gq.aio.
Producer(shards=N)`` and ``task.aenqueue`` on ``gq.App(shards=...)`` write each job to the
shard the sync producers choose (gq/store/shards.py, gq/tasks/sharding.py), and a worker
runs them."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import gevent
import pytest

import gq
import gq.aio
import gq.tasks.sharding
from gq.store.shards import layout
from tests.helpers import delete_keys, wait_until
from tests.test_shards import FAST, client, cluster, name, stop  # noqa: F401  (fixtures)
from tests.topologies import Cluster

pytestmark = pytest.mark.timeout(120)


def _holder(client: Any, name: str, job_id: str) -> list[str]:
    """The shards of ``name`` whose data holds ``job_id``."""
    return [s for s in layout(name, 3).queues if client.hexists(f"{s}:data", job_id)]


def test_the_asyncio_producer_routes_like_the_sync_one(cluster: Cluster, client: Any,
                                                       name: str) -> None:  # fmt: skip
    async def produce() -> list[str]:
        async with gq.aio.Producer(name, url=cluster.url, shards=3) as producer:
            ids = await producer.perform_many([gq.Job(id=f"a-{i}", data=b"") for i in range(12)])
            ids.append(await producer.perform(gq.Job(id="one", data=b"")))
            ids.append(await producer.perform_at(time.time() + 60, gq.Job(id="later", data=b"")))
            return ids

    ids = asyncio.run(produce())
    plan = layout(name, 3)
    assert len({plan.for_id(job_id) for job_id in ids}) == 3
    for job_id in ids:
        assert _holder(client, name, job_id) == [plan.for_id(job_id)], job_id
    assert gq.Queue(name, client=client, shards=3).stats()["scheduled"] == 1


def test_aenqueue_routes_by_id_and_by_group_and_a_worker_runs_the_jobs(
    cluster: Cluster, client: Any, name: str
) -> None:
    app = gq.App(cluster.url, queue=name, shards={name: 3})
    done: list[int] = []

    @app.task(queue=name, result_ttl=60)
    def work(x: int) -> int:
        done.append(x)
        return x

    @app.task(queue=name, group=lambda tenant, x: f"tenant:{tenant}")
    def grouped(tenant: str, x: int) -> None:
        done.append(x)

    async def produce() -> list[gq.Result[Any]]:
        plain = [await work.aenqueue(i) for i in range(9)]
        tenants = [await grouped.aenqueue(t, 100 + i) for i, t in enumerate("abcabc")]
        return plain + tenants

    results = asyncio.run(produce())
    plan = layout(name, 3)
    for result in results[:9]:
        assert _holder(client, name, result.id) == [plan.for_id(result.id)]
    for result, tenant in zip(results[9:], "abcabc"):
        # The group's shard, as the sync enqueue picks it, and the id minted to match.
        assert plan.for_id(result.id) == plan.for_key(f"tenant:{tenant}")
        assert grouped.enqueue(tenant, -1).queue == plan.for_key(f"tenant:{tenant}")
    consumer = gq.Consumer(name, client=client, shards={name: 3}, **FAST)
    greenlet = gevent.spawn(consumer.run, app)
    try:
        wait_until(lambda: len(done) == 9 + 6 + 6, 30)
    finally:
        stop(consumer, greenlet)
    assert sorted(done) == [-1] * 6 + list(range(9)) + list(range(100, 106))
    assert results[0].get(timeout=5) == 0


def test_asyncio_producers_follow_a_reshard(cluster: Cluster, client: Any, name: str,
                                            monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """After a reshard 3 -> 6, gq.aio.Producer and task.aenqueue write to the new layout
    (as gq.Producer does), so no job goes to a shard that is retired once drained."""
    monkeypatch.setattr(gq.aio, "RESHARD_REFRESH", 0.0, raising=False)  # (Redis each write)
    monkeypatch.setattr(gq.tasks.sharding, "RESHARD_REFRESH", 0.0, raising=False)
    app = gq.App(cluster.url, queue=name, shards={name: 3})

    @app.task(queue=name)
    def work(x: int) -> None:
        pass

    async def produce() -> list[str]:
        async with gq.aio.Producer(name, url=cluster.url, shards=3) as producer:
            await producer.perform(gq.Job(id="before", data=b""))
            await work.aenqueue(-1)
            gq.Queue(name, client=client, shards=3).reshard(6)
            jobs = [gq.Job(id=f"after-{i}", data=b"") for i in range(12)]
            ids = await producer.perform_many(jobs)
            return ids + [(await work.aenqueue(i)).id for i in range(12)]

    try:
        ids = asyncio.run(produce())
        new = layout(name, 6)
        for job_id in ids:
            assert client.hexists(f"{new.for_id(job_id)}:data", job_id), job_id
    finally:
        for shard in layout(name, 6).queues:
            for node in client.get_primaries():
                delete_keys(node.redis_connection, f"{shard}*")
