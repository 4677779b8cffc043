"""Moving jobs into a sharded queue (issue 35), on a real 3-master Cluster: each job to the
shard its producer would have written it to (its group, else its uniqueness lock, else
its id), by copy then delete across slots; from a plain queue and from another sharded
queue, found by id afterwards and run by the sharded queue's worker; a move killed half
way loses nothing (docs/operating.md, "A sharded queue")."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq.errors import ConfigurationError
from gq.jobfilter import JobFilter
from gq.store.keys import QueueKeys
from gq.store.shards import declare, layout
from tests.cli_support import ADMIN, ROOT, env_for, run
from tests.helpers import delete_keys, wait_until
from tests.queue_sides import BothSides
from tests.test_bulk_kill import JOBS, fill, kill_when
from tests.test_shards import FAST, client, cluster, consume, name, stop

__all__ = ["client", "cluster", "name"]  # the fixtures, shared with tests/test_shards.py

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
def source(client: Any, name: str) -> Iterator[str]:
    """A plain queue on the Cluster, its keys deleted afterwards."""
    made = f"{{{name}-plain}}"
    yield made
    for node in client.get_primaries():
        delete_keys(node.redis_connection, f"{made}*")


def holders(client: Any, queues: tuple[str, ...], job_id: str) -> list[str]:
    """The queues whose data hash holds ``job_id``."""
    return [queue for queue in queues if client.hexists(QueueKeys(queue).data, job_id)]


def test_a_plain_queues_jobs_move_each_to_its_shard_and_the_sharded_worker_runs_them(
    cluster: Any, client: Any, name: str, source: str
) -> None:
    declare(client, name, 3)
    app = gq.App(client=client, queue=source)

    @app.task(name="work")
    def work(i: int) -> None: ...

    @app.task(name="grouped", group="tenant-a")
    def grouped(i: int) -> None: ...

    @app.task(name="once", unique_for=600, unique_key="k")
    def once() -> None: ...

    dead = [work.enqueue(i).id for i in range(3)]
    side = BothSides(client, source)
    side.register("t")
    side.fetch("t", 3)
    for job_id in dead:
        assert side.kill("t", job_id, None, dead_max_jobs=100, dead_max_age=3600)
    ready = [work.enqueue(10 + i).id for i in range(12)]
    in_group = [grouped.enqueue(i).id for i in range(3)]
    unique = once.enqueue().id
    scheduled = [work.using(after=2).enqueue(100 + i).id for i in range(4)]
    every = dead + ready + in_group + [unique] + scheduled
    env = env_for(cluster.url, source)
    dry = run(ADMIN, "move", "--to", name, "--dry-run", "--json", env=env)
    assert json.loads(dry.stdout)["matched"] == len(every), dry.stdout + dry.stderr
    moved = run(ADMIN, "move", "--to", name, "--yes", "--json", env=env)
    assert json.loads(moved.stdout)["done"] == len(every), moved.stdout + moved.stderr
    plan = layout(name, 3)
    assert BothSides(client, source).counts() == dict.fromkeys(side.counts(), 0)
    for job_id in dead + ready + scheduled:
        assert holders(client, plan.queues, job_id) == [plan.for_id(job_id)]
    for job_id in in_group:  # by its group: the group's line stays on one shard
        assert holders(client, plan.queues, job_id) == [plan.for_key("tenant-a")]
    assert holders(client, plan.queues, unique) == [plan.for_key("once:key:k")]
    queue = gq.Queue(name, client=client, shards=3)
    assert queue.stats()["dead"] == 3 and queue.stats()["scheduled"] == 4
    for job_id in (in_group[0], unique, ready[0], dead[0]):
        shown = run(ADMIN, "job", job_id, "--queue", name, env=env)
        assert shown.returncode == 0 and job_id in shown.stdout, shown.stdout + shown.stderr
    assert queue.retry_dead(JobFilter()).done == 3
    ran: list[str] = []
    consumer = gq.Consumer(name, client=client, shards={name: 3}, **FAST)
    greenlet = consume(consumer, lambda job: ran.append(job.id))
    try:
        wait_until(lambda: set(ran) == set(every), 30, 0.05, "every moved job run")
    finally:
        stop(consumer, greenlet)
    assert sorted(ran) == sorted(every)  # each once


def test_a_sharded_queues_jobs_move_to_another_sharded_queue_by_their_routing(
    client: Any, name: str
) -> None:
    other = f"{name}-b"
    try:
        producer = gq.Producer(name, client=client, shards=3)
        ids = producer.perform_many([b"%d" % i for i in range(60)])
        declare(client, other, 3)
        queue = gq.Queue(name, client=client, shards=3)
        assert queue.move(JobFilter(), to=other, dry_run=True).matched == 60
        assert queue.move(JobFilter(), to=other).done == 60
        target = layout(other, 3)
        for job_id in ids:
            assert holders(client, target.queues, job_id) == [target.for_id(job_id)]
        assert queue.stats()["ready"] == 0
        assert gq.Queue(other, client=client, shards=3).stats()["ready"] == 60
        with pytest.raises(ConfigurationError, match="same queue"):
            queue.move(JobFilter(), to=name)
        shard = gq.Queue(target.queues[0], client=client)
        with pytest.raises(ConfigurationError, match="is a shard of sharded queue"):
            shard.move(JobFilter(), to=other)
    finally:
        for shard_name in layout(other, 3).queues:
            for node in client.get_primaries():
                delete_keys(node.redis_connection, f"{shard_name}*")
        client.delete(f"gq:sharded:{other}")


def test_a_move_into_a_sharded_queue_killed_half_way_loses_nothing_and_completes(
    cluster: Any, client: Any, name: str, source: str
) -> None:
    declare(client, name, 3)
    ids = fill(client, source)
    plan = layout(name, 3)
    env = env_for(cluster.url, source)

    def moved() -> int:
        return sum(client.llen(QueueKeys(shard).active) for shard in plan.queues)

    mover = ["move", "--to", name, "--task", "app.t"]
    proc = subprocess.Popen([*ADMIN, *mover], cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    kill_when(proc, lambda: 0 < moved() < JOBS // 2)
    here = {i.decode() for i in client.lrange(QueueKeys(source).active, 0, -1)}
    there = {shard: [i.decode() for i in client.lrange(QueueKeys(shard).active, 0, -1)]
             for shard in plan.queues}  # fmt: skip
    sent = [job_id for ids_there in there.values() for job_id in ids_there]
    assert 0 < len(sent) < JOBS and len(sent) == len(set(sent))  # killed half way
    assert here | set(sent) == set(ids)  # in the source, on its shard, or both: never neither
    for shard, ids_there in there.items():
        assert all(plan.for_id(job_id) == shard for job_id in ids_there)
        for job_id in here.intersection(ids_there):  # copied, not yet deleted: the same job
            assert client.hget(QueueKeys(source).data, job_id) == \
                client.hget(QueueKeys(shard).data, job_id)  # fmt: skip
    done = run(ADMIN, *mover, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    everywhere = [i.decode() for shard in plan.queues
                  for i in client.lrange(QueueKeys(shard).active, 0, -1)]  # fmt: skip
    assert sorted(everywhere) == sorted(ids)
    assert client.hlen(QueueKeys(source).data) == 0
