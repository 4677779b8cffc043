# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""The job events of a sharded queue, merged over its shards on a real Redis Cluster of 3
masters (gq/sharded_reads.py): by stream id then shard, each naming its shard and the
composite cursor that resumes after it; ``gq events`` lists and follows them."""

from __future__ import annotations

import asyncio
import json
import subprocess
from typing import Any

import gevent
import pytest

import gq
import gq.aio
from gq.errors import ConfigurationError
from gq.events import Event
from gq.store.shards import layout
from tests.cli_support import ADMIN, env_for, run
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)
from tests.topologies import Cluster

pytestmark = pytest.mark.timeout(180)


def _one_per_shard(name: str, prefix: str) -> list[str]:
    """A job id for each shard of ``name``'s 3, in the shards' order."""
    plan = layout(name, 3)
    found: dict[str, str] = {}
    for i in range(200):
        found.setdefault(plan.for_id(f"{prefix}-{i}"), f"{prefix}-{i}")
    return [found[shard] for shard in plan.queues]


def _enqueued(client: Any, name: str, count: int) -> tuple[gq.Queue, list[str]]:
    queue = gq.Queue(name, client=client, shards=3)
    queue.enable_events(maxlen=1000)
    producer = gq.Producer(name, client=client, shards=3)
    return queue, [producer.perform(gq.Job(id=f"e-{i:02}", data=b"")) for i in range(count)]


def _key(event: Event) -> tuple[int, int, str]:
    ms, seq = event.id.split("-")
    return int(ms), int(seq), event.shard or ""


def test_events_of_every_shard_merged_and_resumed_without_loss_or_repeat(
    client: Any, name: str
) -> None:
    queue, ids = _enqueued(client, name, 30)
    every = list(queue.events(since="0"))
    assert sorted(e.job_id for e in every) == ids  # (two shards' events may share a ms)
    assert [_key(e) for e in every] == sorted(_key(e) for e in every)
    plan = layout(name, 3)
    assert all(e.shard == plan.for_id(e.job_id) for e in every)
    assert {e.shard for e in every} == set(plan.queues)
    assert all(e.since == e.cursor and e.cursor.startswith("shards:") for e in every)
    assert all(e.since == e.id and e.shard is None for e in queue.shards[0].events(since="0"))
    for cut in (0, 7, 18, 29):
        after = list(queue.events(since=every[cut].cursor))
        assert [(e.shard, e.id) for e in after] == [(e.shard, e.id) for e in every[cut + 1 :]]
    assert queue.cancel(*ids[:6]) == 6
    more = list(queue.events(since=every[-1].cursor))
    assert sorted((e.event, e.job_id) for e in more) == [("cancelled", i) for i in ids[:6]]
    assert list(queue.events(since=more[-1].cursor)) == []


def test_since_a_stream_id_reads_every_shard_after_it_and_a_bad_cursor_is_refused(
    client: Any, name: str
) -> None:
    queue, ids = _enqueued(client, name, 9)
    every = list(queue.events(since="0"))
    middle = every[4]
    later = [e.job_id for e in queue.events(since=middle.id)]
    assert later == [e.job_id for e in every if _key(e)[:2] > _key(middle)[:2]]
    assert list(queue.events()) == []  # from now on
    for bad in ("shards:0,0", "shards:0,x,0", "shards:", "emails"):
        with pytest.raises(ConfigurationError, match="not an events cursor of this 3-shard"):
            queue.events(since=bad)


def test_a_blocking_read_picks_up_a_new_event_on_any_shard(client: Any, name: str) -> None:
    queue, _ = _enqueued(client, name, 3)
    following = queue.events(block=0.3)  # from now on: fixed here
    producer = gq.Producer(name, client=client, shards=3)
    for job_id in _one_per_shard(name, "f")[::-1]:  # the last shard first
        producer.perform(gq.Job(id=job_id, data=b""))
        with gevent.Timeout(10):
            seen = next(following)
        assert (seen.event, seen.job_id) == ("enqueued", job_id)
        assert seen.shard == layout(name, 3).for_id(job_id)


def test_gq_events_lists_a_sharded_queue_and_resumes_from_its_cursor(
    cluster: Cluster, client: Any, name: str
) -> None:
    _, ids = _enqueued(client, name, 6)
    env = env_for(cluster.url, None)
    listed = run(ADMIN, "events", "--queue", name, "--json", env=env)
    assert listed.returncode == 0, listed.stderr
    shown = [json.loads(line) for line in listed.stdout.splitlines()]
    assert sorted(e["job_id"] for e in shown) == ids
    assert all(e["shard"] == layout(name, 3).for_id(e["job_id"]) for e in shown)
    cursor = listed.stderr.split("--since '")[1].split("'")[0]
    assert cursor == shown[-1]["cursor"]
    gq.Queue(name, client=client, shards=3).cancel(ids[2])
    resumed = run(ADMIN, "events", "--queue", name, "--since", cursor, "--json", env=env)
    assert resumed.returncode == 0, resumed.stderr
    assert [(e["event"], e["job_id"]) for e in map(json.loads, resumed.stdout.splitlines())] == [
        ("cancelled", ids[2])
    ]
    table = run(ADMIN, "events", "--queue", name, env=env)
    assert table.returncode == 0 and table.stdout.split()[:3] == ["ID", "SHARD", "TIME"]
    assert layout(name, 3).queues[0] in table.stdout
    bad = run(ADMIN, "events", "--queue", name, "--since", "shards:0-0,0-0", env=env)
    assert bad.returncode == 2 and "not an events cursor of this 3-shard queue" in bad.stderr


def test_gq_events_follow_picks_up_an_event_on_any_shard(cluster: Cluster, client: Any,
                                                         name: str) -> None:  # fmt: skip
    queue, _ = _enqueued(client, name, 3)
    env = env_for(cluster.url, None)
    proc = subprocess.Popen(
        [*ADMIN, "events", "--queue", name, "--follow", "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True,
    )  # fmt: skip
    try:
        # "--follow" prints a ready line on stderr once "from now on" is fixed.
        assert "following" in proc.stderr.readline()
        producer = gq.Producer(name, client=client, shards=3)
        for job_id in _one_per_shard(name, "g")[::-1]:
            producer.perform(gq.Job(id=job_id, data=b""))
            with gevent.Timeout(20):
                line = proc.stdout.readline()
            assert json.loads(line)["job_id"] == job_id
            assert json.loads(line)["shard"] == layout(name, 3).for_id(job_id)
        proc.send_signal(2)  # Ctrl-C
        assert proc.wait(timeout=20) == 0
        resume = proc.stderr.read().split("--since '")[1].split("'")[0]
        assert list(queue.events(since=resume)) == []
    finally:
        proc.kill()
        proc.wait()


def test_gq_aio_events_of_a_sharded_queue_merged_resumed_and_followed(
    cluster: Cluster, client: Any, name: str
) -> None:
    queue, _ = _enqueued(client, name, 12)
    every = list(queue.events(since="0"))
    late = _one_per_shard(name, "late")

    async def scenario() -> tuple[list[Event], list[Event], list[Event]]:
        aclient = gq.aio.client_from_url(cluster.url)
        try:
            listed = [e async for e in gq.aio.events(name, client=aclient, since="0", shards=3)]
            resumed = [e async for e in gq.aio.events(name, client=aclient, shards=3,
                                                      since=listed[5].cursor)]  # fmt: skip
            following = gq.aio.events(name, client=aclient, shards=3, since=listed[-1].cursor,
                                      block=0.3)  # fmt: skip
            producer = gq.Producer(name, client=client, shards=3)
            seen = []
            for job_id in late[::-1]:
                producer.perform(gq.Job(id=job_id, data=b""))
                seen.append(await asyncio.wait_for(following.__anext__(), 10))
            bad = gq.aio.events(name, client=aclient, shards=3, since="shards:0")
            with pytest.raises(ConfigurationError, match="not an events cursor of this 3-shard"):
                await bad.__anext__()  # (checked once the shards are read: at the first step)
            return listed, resumed, seen
        finally:
            await aclient.aclose()

    listed, resumed, seen = asyncio.run(scenario())
    assert [(e.shard, e.id, e.cursor) for e in listed] == [(e.shard, e.id, e.cursor) for e in every]
    assert [(e.shard, e.id) for e in resumed] == [(e.shard, e.id) for e in every[6:]]
    plan = layout(name, 3)
    assert [(e.job_id, e.shard) for e in seen] == [(i, plan.for_id(i)) for i in late[::-1]]
