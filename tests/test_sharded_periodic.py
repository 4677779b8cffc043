"""Periodic schedules added at runtime to a sharded queue (issue 35), on a real 3-master
Cluster: kept on the shard their name routes to, enqueued once per occurrence by
consumers that serve every shard, paused, resumed and removed through the sharded handle
and `gq periodic`, and moved with their cursor by a reshard and its retirement
(docs/periodic.md, "Schedules of a sharded queue")."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq import dashboard
from gq.errors import ConfigurationError
from gq.store import schedules as store
from gq.store.keys import QueueKeys
from gq.store.reshard import serving
from gq.store.shards import declare, layout
from tests.cli_support import ADMIN, env_for, run
from tests.dashboard_support import Http
from tests.dashboard_support import serving as dashboard_serving
from tests.helpers import delete_keys, wait_until
from tests.test_periodic import assert_consecutive, occurrence_of
from tests.test_shards import FAST, client, cluster, consume, name, stop

__all__ = ["client", "cluster", "name"]  # the fixtures, shared with tests/test_shards.py

pytestmark = pytest.mark.timeout(120)


def named_on(shard: str, count: int, queue: str) -> str:
    """A schedule name that routes to ``shard`` of ``queue`` over ``count`` shards."""
    return next(f"tick{i}" for i in range(10_000)
                if layout(queue, count).for_key(f"tick{i}") == shard)  # fmt: skip


def runtime_names(consumer: gq.Consumer) -> set[str]:
    return {s.name for s in consumer._periodic.schedules}


@pytest.fixture
def ran() -> list[tuple[str, str]]:
    return []


@pytest.fixture
def consumers(client: Any, name: str, ran: list[tuple[str, str]]) -> Iterator[list[gq.Consumer]]:
    """Two consumers serving every shard, recording (job id, shard) of each job run."""
    declare(client, name, 3)  # as a producer does first
    made = [gq.Consumer(name, client=client, shards={name: 3}, **FAST) for _ in range(2)]
    greenlets = [consume(c, lambda job: ran.append((job.id, job.queue))) for c in made]
    yield made
    for consumer, greenlet in zip(made, greenlets):
        stop(consumer, greenlet)


def test_a_schedule_is_kept_on_its_names_shard_and_changed_through_the_handle(
    client: Any, name: str
) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"")  # declares the queue
    q = gq.Queue(name, client=client, shards=3)
    for i in range(6):
        assert q.add_periodic(f"s{i}", "app.report", every=60, args=[i])
    assert not q.add_periodic("s0", "app.report", every=30)  # a change, on the same shard
    plan = layout(name, 3)
    for i in range(6):
        kept = [shard for shard in plan.queues
                if client.hexists(QueueKeys(shard).periodic_runtime, f"s{i}")]  # fmt: skip
        assert kept == [plan.for_key(f"s{i}")]
    assert len({plan.for_key(f"s{i}") for i in range(6)}) > 1  # spread over the shards
    assert [(s.name, s.every) for s in q.periodic_schedules()] == [
        ("s0", 30), *((f"s{i}", 60) for i in range(1, 6))]
    q.pause_periodic("s3")
    assert [s.name for s in q.periodic_schedules() if s.paused] == ["s3"]
    q.resume_periodic("s3")
    assert not any(s.paused for s in q.periodic_schedules())
    assert q.remove_periodic("s3") and not q.remove_periodic("s3")
    with pytest.raises(KeyError):
        q.pause_periodic("s3")
    with pytest.raises(ConfigurationError, match="bad cron rule"):
        q.add_periodic("bad", "app.t", cron="61 * * * *")
    assert "bad" not in {s.name for s in q.periodic_schedules()}


def test_a_name_a_code_schedule_holds_on_any_shard_is_refused(client: Any, name: str) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"")
    plan = layout(name, 3)
    other = next(shard for shard in plan.queues if shard != plan.for_key("tick"))
    client.hset(QueueKeys(other).periodic_rules, "tick", "every\t1\tUTC")  # a code cursor
    with pytest.raises(ConfigurationError, match="given in code"):
        gq.Queue(name, client=client, shards=3).add_periodic("tick", "app.t", every=5)


def test_two_consumers_of_every_shard_enqueue_each_occurrence_once(
    client: Any, name: str, cluster: Any, consumers: list[gq.Consumer],
    ran: list[tuple[str, str]],
) -> None:  # fmt: skip
    env = env_for(cluster.url, name)
    added = run(ADMIN, "periodic", "add", "--name", "rt", "--task", "stamp", "--every", "1s",
                env=env)  # fmt: skip
    assert added.returncode == 0 and "rt: added" in added.stdout, added.stdout + added.stderr
    q = gq.Queue(name, client=client, shards=3)
    wait_until(lambda: all("rt" in runtime_names(c) for c in consumers), 15, message="taken up")
    wait_until(lambda: len(ran) >= 4, 20, 0.05, "four occurrences")
    listed = run(ADMIN, "periodic", "list", "--json", env=env)
    [line] = [json.loads(x) for x in listed.stdout.splitlines()]
    assert (line["name"], line["source"], line["every"]) == ("rt", "runtime", 1), listed.stdout
    assert run(ADMIN, "periodic", "pause", "rt", env=env).returncode == 0
    wait_until(lambda: not any("rt" in runtime_names(c) for c in consumers), 15, message="paused")
    paused_at = q.store.server_time()
    wait_until(lambda: q.store.server_time() >= paused_at + 2.5, 10)
    before = [job_id for job_id, _ in ran]
    assert max(map(occurrence_of, before)) <= paused_at  # none while paused
    q.resume_periodic("rt")
    wait_until(lambda: len(ran) >= len(before) + 3, 20, 0.05, "three after the resume")
    assert min(occurrence_of(i) for i, _ in ran[len(before):]) > paused_at + 2
    assert q.remove_periodic("rt")
    wait_until(lambda: not any("rt" in runtime_names(c) for c in consumers), 15, message="gone")
    assert_consecutive(before)
    assert_consecutive([job_id for job_id, _ in ran[len(before):]])
    assert {shard for _, shard in ran} == {layout(name, 3).for_key("rt")}
    removed = run(ADMIN, "periodic", "remove", "rt", env=env)
    assert removed.returncode == 1 and "not found" in removed.stdout


def test_a_reshard_and_its_retirement_move_schedules_and_keep_each_occurrence_once(
    client: Any, name: str, consumers: list[gq.Consumer], ran: list[tuple[str, str]],
) -> None:  # fmt: skip
    old, new = layout(name, 3), layout(name, 6)
    old_only = [shard for shard in old.queues if shard not in new.queues]
    # "moving": on a shard only the old layout has, to a new one at the reshard;
    # "late": written on that old shard behind the router's back after the reshard (a
    # handle that had not seen it): moved by the retirement.
    moving = named_on(old_only[0], 3, name)
    late = "late"  # (its shard in the new layout is not old_only[0], which it lacks)
    q = gq.Queue(name, client=client, shards=3)
    q.add_periodic(moving, "stamp", every=1)
    wait_until(lambda: sum(1 for i, _ in ran if moving in i) >= 3, 20, 0.05, "running")
    q.reshard(6)
    try:
        assert client.hexists(QueueKeys(new.for_key(moving)).periodic_runtime, moving)
        assert not client.hexists(QueueKeys(old_only[0]).periodic_runtime, moving)
        gq.Queue(old_only[0], client=client).add_periodic(late, "stamp", every=1)
        at_reshard = len(ran)
        wait_until(lambda: serving(client, name, 6).previous is None, 40, 0.1, "retired")
        assert client.hexists(QueueKeys(new.for_key(late)).periodic_runtime, late)
        retired = [i for i, _ in ran if moving in i]
        wait_until(lambda: sum(1 for i, _ in ran if moving in i) >= len(retired) + 3, 20, 0.05,
                   "three after the retirement")  # fmt: skip
        assert len(ran) > at_reshard
        listed = gq.Queue(name, client=client, shards=6).periodic_schedules()
        assert sorted(s.name for s in listed) == sorted([moving, late])
    finally:
        for shard in new.queues:
            for node in client.get_primaries():
                delete_keys(node.redis_connection, f"{shard}*")
    assert_consecutive([i for i, _ in ran if moving in i])  # none twice, none skipped
    assert_consecutive([i for i, _ in ran if late in i][1:])  # (taken up after retire)
    shards = {shard for i, shard in ran if moving in i}
    assert shards == {old_only[0], new.for_key(moving)}


def test_the_dashboards_periodic_tab_of_a_sharded_queue(client: Any, name: str) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"")
    with dashboard_serving(dashboard.app(client=client, queues=[name], refresh=0)) as address:
        http = Http(address)
        token = http.get(f"/queues/{name}/periodic").token
        added = http.post(f"/queues/{name}/periodic/add", [
            ("csrf_token", token), ("name", "nightly"), ("task", "app.report"),
            ("every", "60")])  # fmt: skip
        assert added.headers["Location"].endswith("done=added"), added.body
        paused = http.post(f"/queues/{name}/periodic/pause",
                           [("csrf_token", token), ("schedule", "nightly")])  # fmt: skip
        assert paused.headers["Location"].endswith("done=paused")
        page = http.get(f"/queues/{name}/periodic").body
    assert 'data-schedule="nightly"' in page
    [schedule] = gq.Queue(name, client=client, shards=3).periodic_schedules()
    assert (schedule.name, schedule.paused) == ("nightly", True)
    assert client.hexists(QueueKeys(layout(name, 3).for_key("nightly")).periodic_runtime,
                          "nightly")  # fmt: skip


def test_gq_periodic_list_and_delete_read_every_shard(client: Any, name: str,
                                                      cluster: Any) -> None:  # fmt: skip
    declare(client, name, 3)
    plan = layout(name, 3)
    code_shard = QueueKeys(plan.for_key("nightly"))
    client.hset(code_shard.periodic_rules, "nightly", "every\t3600\tUTC")  # a code schedule's
    client.hset(code_shard.periodic, "nightly", "1796400000")
    gq.Queue(name, client=client, shards=3).add_periodic("rt", "app.t", every=60)
    env = env_for(cluster.url, name)
    listed = run(ADMIN, "periodic", "list", "--json", env=env)
    lines = {line["name"]: line for line in map(json.loads, listed.stdout.splitlines())}
    assert {n: line["source"] for n, line in lines.items()} == {"nightly": "code",
                                                                 "rt": "runtime"}
    assert lines["nightly"]["last"] is None and lines["nightly"]["rule"] == "3600"
    deleted = run(ADMIN, "periodic", "delete", "nightly", "nope", env=env)
    assert deleted.returncode == 1, deleted.stdout + deleted.stderr
    assert "nightly: forgotten" in deleted.stdout and "nope: not found" in deleted.stdout
    assert not client.hexists(code_shard.periodic, "nightly")


def test_a_schedule_added_again_where_it_moved_from_starts_afresh(client: Any,
                                                                   name: str) -> None:  # fmt: skip
    shard = layout(name, 3).queues[0]
    other = layout(name, 3).queues[1]
    q = gq.Queue(shard, client=client)
    q.add_periodic("tick", "app.t", every=60)
    client.hset(QueueKeys(shard).periodic, "tick", "1796400000")
    store.relocate(client, shard, other, "tick", q.store.server_time())
    assert client.hget(QueueKeys(other).periodic, "tick") == b"1796400000"  # (went along)
    moved = q.store.periodic_state()["tick"]
    assert moved[0] == store.MOVED and moved[1] > q.store.server_time()  # ahead of now
    assert q.add_periodic("tick", "app.t", every=60)  # not taken for a code schedule's
    assert "tick" not in q.store.periodic_state()  # the mark is gone: it starts afresh
