"""Jobs of a sharded queue by filter and by id, on a real Redis Cluster of 3 masters:
``gq jobs`` (merged by time, a cursor over every shard), ``gq purge``, ``gq move``,
``gq dead retry|delete`` and ``gq scheduled run|reschedule|delete`` (gq/sharded_jobs.py)."""

# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)

from __future__ import annotations

import json
import time
from typing import Any

import pytest

import gq
from gq.errors import ConfigurationError
from gq.jobfilter import JobFilter
from gq.store.shards import layout
from tests.cli_support import ADMIN, env_for, run
from tests.queue_sides import BothSides
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)
from tests.topologies import Cluster

pytestmark = pytest.mark.timeout(180)


def _kill_all(client: Any, name: str, ids: list[str]) -> None:
    """Each job of ``ids`` fetched and killed on its own shard (dead, newest last)."""
    plan = layout(name, 3)
    sides = {shard: BothSides(client, shard) for shard in plan.queues}
    for side in sides.values():
        side.register("t")
        side.fetch("t", 1000)
    for job_id in ids:
        assert sides[plan.for_id(job_id)].kill("t", job_id, "boom", dead_max_jobs=1000,
                                               dead_max_age=3600)  # fmt: skip


def test_a_search_merges_the_shards_and_its_cursor_resumes_every_shard(
    client: Any, name: str
) -> None:
    ids = [gq.Producer(name, client=client, shards=3).perform(gq.Job(id=f"r-{i:02}", data=b""))
           for i in range(23)]  # fmt: skip
    plan = layout(name, 3)
    assert len({plan.for_id(job_id) for job_id in ids}) == 3
    queue = gq.Queue(name, client=client, shards=3)
    seen: list[str] = []
    cursor = None
    for _ in range(10):
        page = queue.jobs(JobFilter.parse(id_prefix="r-"), limit=5, cursor=cursor)
        assert len(page.jobs) <= 5
        seen += [job.id for job in page.jobs]
        cursor = page.cursor
        if cursor is None:
            break
    assert sorted(seen) == ids  # every job once, over pages that cut inside the shards
    assert seen == ids[::-1]  # merged by enqueue time: newest first, as on one queue
    with pytest.raises(ConfigurationError, match="search cursor"):
        queue.jobs(limit=5, cursor="ready|list|0")


def test_gq_jobs_pages_through_a_sharded_queue(cluster: Cluster, client: Any,
                                               name: str) -> None:  # fmt: skip
    ids = gq.Producer(name, client=client, shards=3).perform_many([b"x"] * 9)
    env = env_for(cluster.url, name)
    first = run(ADMIN, "jobs", "--limit", "6", "--json", env=env)
    assert first.returncode == 0, first.stderr
    assert "--cursor" in first.stderr, first.stderr
    cursor = first.stderr.split("--cursor '")[1].split("'")[0]
    rest = run(ADMIN, "jobs", "--limit", "6", "--json", "--cursor", cursor, env=env)
    assert rest.returncode == 0 and "--cursor" not in rest.stderr, rest.stderr
    shown = [job["id"] for out in (first, rest) for job in json.loads(out.stdout)]
    assert sorted(shown) == sorted(ids)  # (one batch: one enqueue time, no order among them)


def test_bulk_actions_run_on_every_shard_with_their_counts_summed(
    cluster: Cluster, client: Any, name: str
) -> None:
    producer = gq.Producer(name, client=client, shards=3)
    later = time.time() + 3600
    scheduled = [producer.perform_at(later + i, gq.Job(id=f"s-{i}", data=b"")) for i in range(9)]
    dead = [producer.perform(gq.Job(id=f"d-{i}", data=b"")) for i in range(9)]
    _kill_all(client, name, dead)
    ready = [producer.perform(gq.Job(id=f"p-{i}", data=b"")) for i in range(9)]
    queue = gq.Queue(name, client=client, shards=3)
    env = env_for(cluster.url, name)

    def gq_json(*argv: str) -> dict[str, Any]:
        out = run(ADMIN, *argv, "--json", env=env)
        assert out.returncode == 0, out.stdout + out.stderr
        return json.loads(out.stdout)  # type: ignore[no-any-return]

    assert gq_json("purge", "--id-prefix", "p-", "--dry-run")["matched"] == 9
    assert queue.stats()["dead"] == 9
    assert gq_json("purge", "--id-prefix", "p-")["done"] == 9
    assert queue.stats()["ready"] == 0 and len(ready) == 9
    assert gq_json("scheduled", "reschedule", "--in", "2h", "--id-prefix", "s-1")["done"] == 1
    assert gq_json("scheduled", "reschedule", "--in", "2h", "--id-prefix", "s-")["done"] == 9
    assert gq_json("scheduled", "run", "--id-prefix", "s-")["done"] == 9
    assert queue.stats()["ready"] == 9 and queue.stats()["scheduled"] == 0
    assert gq_json("dead", "retry", "--id-prefix", "d-1")["done"] == 1
    assert gq_json("dead", "delete", "--id-prefix", "d-")["done"] == 8
    assert queue.stats()["dead"] == 0 and queue.stats()["ready"] == 10 and len(scheduled) == 9
    target = f"{{{name}-moved}}"
    try:
        assert gq_json("move", "--to", target, "--id-prefix", "s-")["done"] == 9
        assert gq.Queue(target, client=client).stats()["ready"] == 9
    finally:
        client.delete(*(f"{target}:{suffix}" for suffix in ("data", "active", "signal")))
    refused = run(ADMIN, "move", "--to", name, "--queue", plan_shard(name, 0), "--yes", env=env)
    assert refused.returncode == 2 and "sharded queue" in refused.stderr, refused.stderr


def plan_shard(name: str, index: int) -> str:
    return layout(name, 3).queues[index]


def test_actions_by_id_go_to_the_ids_shard_or_find_it_on_another(
    cluster: Cluster, client: Any, name: str
) -> None:
    producer = gq.Producer(name, client=client, shards=3)
    dead = [producer.perform(gq.Job(id=f"d-{i}", data=b"")) for i in range(6)]
    _kill_all(client, name, dead)
    later = time.time() + 3600
    routed = [producer.perform_at(later, gq.Job(id=f"s-{i}", data=b"")) for i in range(6)]
    plan = layout(name, 3)
    elsewhere = next(s for s in plan.queues if s != plan.for_id("stray"))
    gq.Producer(elsewhere, client=client).perform_at(later, gq.Job(id="stray", data=b""))
    env = env_for(cluster.url, name)
    ran = run(ADMIN, "scheduled", "run", *routed[:3], "stray", env=env)
    assert ran.returncode == 0 and "queued 4 job(s)" in ran.stdout, ran.stdout + ran.stderr
    [stray] = gq.Queue(elsewhere, client=client).jobs(JobFilter.parse(id_prefix="stray")).jobs
    assert stray.state == "ready"  # run where it was, not on its id's shard
    deleted = run(ADMIN, "scheduled", "delete", routed[3], "nope", env=env)
    assert deleted.returncode == 1 and "nope" in deleted.stderr, deleted.stderr
    retried = run(ADMIN, "dead", "retry", "--all", "--reset-attempts", env=env)
    assert retried.returncode == 0 and "retried 6 job(s)" in retried.stdout, retried.stdout
    queue = gq.Queue(name, client=client, shards=3)
    assert queue.stats()["dead"] == 0 and queue.stats()["ready"] == 3 + 1 + 6
    job = run(ADMIN, "job", "stray", env=env)
    assert job.returncode == 0 and "ready" in job.stdout, job.stdout + job.stderr
    assert queue.cancel("stray", dead[0]) == 2


def test_gq_enqueue_and_gq_cancel_on_a_sharded_queue_go_to_each_id_s_shard(
    cluster: Cluster, client: Any, name: str
) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"declares the layout")
    env = env_for(cluster.url, name)
    made = run(ADMIN, "enqueue", *(f"job {i}" for i in range(9)), env=env)
    assert made.returncode == 0, made.stderr
    ids = made.stdout.split()
    plan = layout(name, 3)
    for job_id in ids:  # on its id's shard (before: the logical name's keys, served by none)
        assert client.hexists(f"{plan.for_id(job_id)}:data", job_id), job_id
    assert not client.exists(f"{name}:data")
    cancelled = run(ADMIN, "cancel", *ids[:4], "nope", env=env)
    assert cancelled.returncode == 0, cancelled.stderr  # (before: refused, exit 2)
    assert "removed 4 ready or scheduled job(s)" in cancelled.stdout, cancelled.stdout
    assert "not found: 1" in cancelled.stdout and "nope" in cancelled.stderr
    assert gq.Queue(name, client=client, shards=3).stats()["ready"] == 1 + 5

