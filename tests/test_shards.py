"""Sharded queues on a real Redis Cluster of 3 masters (tests/topologies.py): one logical
queue over plain curlyq queues on every master (docs/deployment.md, "One queue over many
masters")."""

from __future__ import annotations

import collections
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest

import gq
from gq import events as job_events
from gq.store.shards import forget, layout
from tests.cli_support import ADMIN, Worker, env_for, run
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.queue_sides import BothSides
from tests.topologies import Cluster, start_cluster

FAST = {
    "heartbeat_poll_interval": 1.0,
    "custodian_consumer_timeout": 5.0,
    "custodian_poll_interval": 0.5,
    "scheduler_poll_interval": 0.5,
    "poller_poll_duration": 1.0,
}
FAST_FLAGS = [
    "--heartbeat-poll-interval", "0.3", "--custodian-consumer-timeout", "1",
    "--custodian-poll-interval", "0.2", "--poller-poll-duration", "1",
    "--scheduler-poll-interval", "0.2", "--stats-interval", "0",
]  # fmt: skip


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    started = start_cluster(tmp_path_factory.mktemp("shards"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def client(cluster: Cluster) -> Iterator[Any]:
    made = cluster.client()
    yield made
    made.close()


@pytest.fixture
def name(client: Any) -> Iterator[str]:
    """A new sharded queue's name; its shards' keys and descriptor deleted afterwards."""
    made = f"shq-{uuid.uuid4().hex[:8]}"
    yield made
    for count in (3, 8):
        for shard in layout(made, count).queues:
            for node in client.get_primaries():
                delete_keys(node.redis_connection, f"{shard}*")
    forget(client, made)


def consume(consumer: gq.Consumer, handler: Any) -> gevent.Greenlet:
    return gevent.spawn(consumer.run, handler)


def stop(consumer: gq.Consumer, greenlet: gevent.Greenlet) -> None:
    consumer.stop()
    greenlet.join(timeout=20)
    assert greenlet.dead and greenlet.exception is None, greenlet.exception


def test_jobs_spread_evenly_by_id_over_shards_on_three_masters(client: Any, name: str) -> None:
    producer = gq.Producer(name, client=client, shards=3)
    ids = producer.perform_many([b"%d" % i for i in range(3000)])
    queue = gq.Queue(name, client=client, shards=3)
    ready = [shard.stats()["ready"] for shard in queue.shards]
    assert sum(ready) == 3000 and all(900 <= n <= 1100 for n in ready), ready
    owners = {client.get_node_from_key(f"{shard}:data").name for shard in layout(name, 3).queues}
    assert len(owners) == 3  # every master holds one shard
    assert queue.stats()["ready"] == 3000  # the operator's sum
    for job_id in ids[:50]:  # each on the shard its id routes to
        assert queue.layout.for_id(job_id) in {
            s.name for s in queue.shards if s.store.messages([job_id])[0] is not None
        }
    # The layout is recorded for workers and operators that name the queue.
    assert client.hgetall(f"gq:sharded:{name}")[b"shards"] == b"3"


def test_a_producer_with_another_count_is_refused(client: Any, name: str) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"x")
    with pytest.raises(gq.ConfigurationError, match="has 3 shards in Redis"):
        gq.Producer(name, client=client, shards=4).perform(b"y")


def test_grouped_jobs_stay_on_their_groups_shard(client: Any, name: str) -> None:
    app = gq.App(client=client, shards={name: 3}, queue=name)

    @app.task(queue=name, group=lambda tenant: f"tenant:{tenant}")
    def work(tenant: str) -> None: ...

    results = work.enqueue_many([(t,) for t in "abcdef" for _ in range(20)])
    plan = layout(name, 3)
    by_group = collections.defaultdict(set)
    for result, tenant in zip(results, [t for t in "abcdef" for _ in range(20)]):
        by_group[tenant].add(result.queue)
        assert result.queue == plan.for_key(f"tenant:{tenant}")
        assert plan.for_id(result.id) == result.queue  # its id routes there too
    assert all(len(queues) == 1 for queues in by_group.values())
    queue = gq.Queue(name, client=client, shards=3)
    assert sum(shard.stats()["grouped"] for shard in queue.shards) == 120
    assert queue.groups()["waiting_groups"] == 6


def test_result_and_cancel_find_a_job_by_its_id_alone(client: Any, name: str) -> None:
    app = gq.App(client=client, shards={name: 3}, queue=name)

    @app.task(queue=name, result_ttl=60)
    def work(x: int) -> int:
        return x

    ids = [work.enqueue(i).id for i in range(9)]
    # Ids given by the caller to jobs routed by their group or lock: found on any shard.
    grouped = work.using(id="mine-1", group="tenant:z").enqueue(98).id
    unique = work.using(id="mine-2", unique_for=60).enqueue(99).id
    other = gq.App(client=client, shards={name: 3}, queue=name)  # another process's app
    assert {other.result(i).status() for i in [*ids, grouped, unique]} == {"ready"}
    assert other.result(grouped).queue == layout(name, 3).for_key("tenant:z")
    queue = gq.Queue(name, client=client, shards=3)
    assert queue.cancel(ids[0], unique, grouped, "unknown") == 3
    assert other.result(ids[0]).status() == "missing"
    assert other.result(unique).status() == "missing"
    assert queue.stats()["ready"] == 8


def test_a_consumer_drains_a_sharded_queue_and_runs_workflows(client: Any, name: str) -> None:
    app = gq.App(client=client, shards={name: 3}, queue=name)

    @app.task(queue=name, result_ttl=60)
    def add(x: int, y: int) -> int:
        return x + y

    @app.task(queue=name, result_ttl=60)
    def total(results: list[int]) -> int:
        return sum(results)

    ids = [add.enqueue(i, 1).id for i in range(300)]
    chains = [gq.chain(add.s(i, 1), add.s(10), add.s(100)).enqueue() for i in range(20)]
    grouped = gq.group(add.s(i, i) for i in range(10)).then(total.s()).enqueue()
    consumer = gq.Consumer(name, client=client, shards={name: 3}, **FAST)
    greenlet = consume(consumer, app)
    try:
        assert [c.get(timeout=30) for c in chains] == [i + 111 for i in range(20)]
        assert grouped.get(timeout=30) == sum(i + i for i in range(10))
        wait_until(lambda: all(app.result(i).status() == "done" for i in ids), 30)
    finally:
        stop(consumer, greenlet)
    done = {shard: consumer.recorders[shard].totals["done"] for shard in layout(name, 3).queues}
    assert all(n > 50 for n in done.values()), done  # every shard served
    assert gq.Queue(name, client=client, shards=3).stats()["ready"] == 0


def test_an_idle_consumer_picks_up_a_job_on_any_shard(client: Any, name: str) -> None:
    """With a poll duration of 60 s, waiting on each shard in turn would take 7.5 s per
    shard; a watcher per shard sees each job at once."""
    plan = layout(name, 8)
    producer = gq.Producer(name, client=client, shards=8)
    seen: list[str] = []
    consumer = gq.Consumer(name, client=client, shards={name: 8},
                           **{**FAST, "poller_poll_duration": 60.0})  # fmt: skip
    greenlet = consume(consumer, lambda job: seen.append(job.queue))
    try:
        wait_until(lambda: consumer._poller is not None and consumer._poller.waiting, 10)
        for index, shard in enumerate(plan.queues):
            job_id = next(f"idle-{i}" for i in range(10_000) if plan.for_id(f"idle-{i}") == shard)
            producer.perform(gq.Job(id=job_id, data=b""))
            wait_until(lambda n=index + 1: len(seen) == n, 5, 0.001, f"the job on {shard}")
    finally:
        stop(consumer, greenlet)
    assert seen == list(plan.queues)


@pytest.mark.timeout(120)
def test_gq_worker_serves_a_sharded_queue_and_a_sigkill_loses_nothing(
    cluster: Cluster, client: Any, name: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    producer = gq.Producer(name, client=client, shards=3)
    ids = set(producer.perform_many([b"0.02"] * 600))
    env = env_for(cluster.url, name, redis_server.url)
    done_key = f"{name}:test:done"
    record = redis_server.client()
    first = Worker(tmp_path, "tests.handlers:record", *FAST_FLAGS, "--concurrency", "20",
                   env=env)  # fmt: skip
    try:
        wait_until(lambda: record.llen(done_key) >= 100, 60, 0.05, "100 jobs done")
        first.proc.kill()  # SIGKILL mid-run: its jobs in flight stay in its in-flight sets
        first.wait()
        second = Worker(tmp_path, "tests.handlers:record", *FAST_FLAGS, env=env)
        try:
            wait_until(lambda: ids <= set(_done(record, done_key)), 60, 0.1, "every job done")
            assert layout(name, 3).queues[2] in second.output  # it serves every shard
        finally:
            second.stop()
        runs = collections.Counter(_done(record, done_key))
        started = record.llen(f"{name}:test:started")
    finally:
        first.stop()
        record.delete(done_key, f"{name}:test:started")
    assert set(runs) == ids  # nothing lost
    assert started > len(ids)  # jobs in flight at the kill were recovered and run again
    duplicates = sum(n - 1 for n in runs.values())
    print(f"SIGKILL over 3 shards: {len(ids)} jobs, {started - len(ids)} started again after "
          f"the kill, {duplicates} finished twice (at-least-once)")
    assert duplicates <= 40  # at most the killed worker's jobs in flight (its concurrency x2)


def _done(client: Any, key: str) -> list[str]:
    """The ids the handler recorded as done, a job run twice twice."""
    return [value.decode() for value in client.lrange(key, 0, -1)]


def test_gq_stats_sums_the_shards_and_pause_reaches_each(cluster: Cluster, client: Any,
                                                         name: str) -> None:  # fmt: skip
    ids = gq.Producer(name, client=client, shards=3).perform_many([b"x"] * 30)
    env = env_for(cluster.url, None)
    job = run(ADMIN, "job", ids[7], "--queue", name, env=env)
    assert job.returncode == 0 and "ready" in job.stdout, job.stdout + job.stderr
    stats = run(ADMIN, "stats", "--queue", name, "--shards", env=env)
    assert stats.returncode == 0, stats.stderr
    assert "ready      30" in stats.stdout and "shards     3" in stats.stdout, stats.stdout
    for shard in layout(name, 3).queues:
        assert shard in stats.stdout  # a line per shard
    paused = run(ADMIN, "pause", "--queue", name, env=env)
    assert paused.returncode == 0, paused.stderr
    assert "paused on 3 of 3 shards" in paused.stdout, paused.stdout
    queue = gq.Queue(name, client=client, shards=3)
    assert all(s.paused for s in queue.shards)
    queue.shards[1].resume()  # as if a pause or resume were still spreading
    stats = run(ADMIN, "stats", "--queue", name, env=env)
    assert "paused on 2 of 3" in stats.stdout, stats.stdout
    resumed = run(ADMIN, "resume", "--queue", name, env=env)
    assert "paused on 0 of 3 shards" in resumed.stdout, resumed.stdout
    retry = run(ADMIN, "dead", "retry", "--queue", name, "--all", env=env)
    assert retry.returncode == 0 and "retried 0 job(s)" in retry.stdout, retry.stderr  # over shards
    refused = run(ADMIN, "consumers", "--queue", name, env=env)  # (merged: it works)
    assert refused.returncode == 0, refused.stderr


def test_scheduled_and_dead_listings_are_merged_by_time(cluster: Cluster, client: Any,
                                                        name: str) -> None:  # fmt: skip
    producer = gq.Producer(name, client=client, shards=3)
    now = time.time()
    ids = [producer.perform_at(now + 3600 + i, gq.Job(id=f"s-{i}", data=b"")) for i in range(12)]
    plan = layout(name, 3)
    assert len({plan.for_id(job_id) for job_id in ids}) == 3  # on every shard
    queue = gq.Queue(name, client=client, shards=3)
    listed = queue.store.scheduled_jobs(12)
    assert [job_id for job_id, _, _ in listed] == ids  # soonest first, over the shards
    assert queue.store.counts()["scheduled"] == 12
    out = run(ADMIN, "scheduled", "list", "--queue", name, env=env_for(cluster.url, None))
    assert out.returncode == 0, out.stderr
    assert [line.split()[0] for line in out.stdout.splitlines()[1:13]] == ids, out.stdout
    dead = [producer.perform(gq.Job(id=f"d-{i}", data=b"")) for i in range(6)]
    sides = {shard: BothSides(client, shard) for shard in plan.queues}
    for side in sides.values():
        side.register("t")
        side.fetch("t", 100)
    for job_id in dead:  # killed one after the other: their dead scores ascend
        assert sides[plan.for_id(job_id)].kill("t", job_id, None, dead_max_jobs=100,
                                               dead_max_age=3600)  # fmt: skip
    assert [job_id for job_id, _, _ in queue.store.dead_jobs(6)] == dead[::-1]  # newest first


def test_a_sharded_queue_works_on_a_single_redis_too(redis_server: RedisServer) -> None:
    """No spread (one server), the same code: a worker drains every shard."""
    client = redis_server.client()
    name = f"shq-{uuid.uuid4().hex[:8]}"
    try:
        gq.Producer(name, client=client, shards=4).perform_many([b""] * 400)
        queue = gq.Queue(name, client=client, shards=4)
        assert [s.stats()["ready"] > 50 for s in queue.shards] == [True] * 4
        done: collections.Counter[str] = collections.Counter()
        consumer = gq.Consumer(name, client=client, shards={name: 4}, **FAST)
        greenlet = consume(consumer, lambda job: done.update([job.queue]))
        try:
            wait_until(lambda: sum(done.values()) == 400, 30)
        finally:
            stop(consumer, greenlet)
        assert set(done) == set(layout(name, 4).queues)
        assert queue.stats()["ready"] == 0 and queue.stats()["shards"] == 4
    finally:
        delete_keys(client, f"{{{name}~*")
        forget(client, name)


def test_events_go_on_for_every_shard_and_are_read_merged(client: Any, name: str) -> None:
    queue = gq.Queue(name, client=client, shards=3)
    queue.enable_events(maxlen=1000)
    gq.Producer(name, client=client, shards=3).perform_many([b"x"] * 30)
    announced = [[e.event for e in shard.events(since="0")] for shard in queue.shards]
    assert sum(len(events) for events in announced) == 30, announced
    assert all(events and set(events) == {"enqueued"} for events in announced), announced
    merged = [e.id for e in queue.events(since="0")]  # (tests/test_sharded_events.py)
    assert sorted(merged) == sorted(e.id for s in queue.shards for e in s.events(since="0"))
    queue.disable_events()
    gq.Producer(name, client=client, shards=3).perform_many([b"y"] * 9)
    assert sum(len(list(shard.events(since="0"))) for shard in queue.shards) == 30


def test_history_is_kept_per_shard_and_its_bounds_set_on_each(client: Any, name: str) -> None:
    queue = gq.Queue(name, client=client, shards=3)
    assert queue.history_settings(history_max=50, history_ttl=600) == (50, 600)
    assert all(shard.history_settings() == (50, 600) for shard in queue.shards)
    assert queue.history().entries == []  # merged over the shards: tests/test_sharded_history.py


def test_gq_events_and_history_read_every_shard_of_a_sharded_queue(cluster: Cluster, client: Any,
                                                                   name: str) -> None:  # fmt: skip
    producer = gq.Producer(name, client=client, shards=3)
    producer.perform(b"x")
    env = env_for(cluster.url, None)
    on = run(ADMIN, "events", "--queue", name, "--enable", env=env)
    assert on.returncode == 0, on.stderr
    assert all(job_events.maxlen(client, shard) > 0 for shard in layout(name, 3).queues)
    producer.perform(b"y")  # (an event to list: an empty listing says so, without a table)
    listed = run(ADMIN, "events", "--queue", name, env=env)
    assert listed.returncode == 0 and "SHARD" in listed.stdout, listed
    shown = run(ADMIN, "history", "--queue", name, env=env)
    assert shown.returncode == 0 and "no matching finished jobs" in shown.stdout, shown
