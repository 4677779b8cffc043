# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""The dashboard shows a sharded queue as one queue, on a real Redis Cluster of 3 masters:
its shards folded into its name on the index, counts summed, dead and scheduled lists
merged by time, actions and the job page routed to each job's shard, and the shards'
table on demand (over HTTP, and once in headless chromium)."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from selenium.webdriver.common.by import By

import gq
from gq import dashboard
from gq.store.shards import layout
from tests.dashboard_support import Http, browser_session, serving
from tests.queue_sides import BothSides
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(180)

browser = pytest.fixture(scope="module", name="browser")(browser_session)


@pytest.fixture
def site(client: Any, name: str) -> Iterator[str]:
    with serving(dashboard.app(client=client, refresh=0)) as address:
        yield address
    client.srem("gq:queues", *layout(name, 3).queues)


def _sharded_queue(client: Any, name: str) -> tuple[list[str], list[str]]:
    """30 jobs ready, 4 scheduled and 3 dead over 3 shards, one consumer registered on
    each shard (as a worker of the queue does); the dead and scheduled ids."""
    producer = gq.Producer(name, client=client, shards=3)
    dead = [producer.perform(gq.Job(id=f"d-{i}", data=b"")) for i in range(3)]
    plan = layout(name, 3)
    sides = {shard: BothSides(client, shard) for shard in plan.queues}
    client.sadd("gq:queues", *plan.queues)  # as a worker of the queue registers them
    for side in sides.values():
        side.register("worker-1")
        side.fetch("worker-1", 100)
    for job_id in dead:  # one after the other: newest last
        assert sides[plan.for_id(job_id)].kill("worker-1", job_id, None, dead_max_jobs=100,
                                               dead_max_age=3600)  # fmt: skip
    later = time.time() + 3600
    scheduled = [producer.perform_at(later + i, gq.Job(id=f"s-{i}", data=b"")) for i in range(4)]
    producer.perform_many([b"x"] * 30)
    assert len({plan.for_id(job_id) for job_id in dead + scheduled}) == 3
    return dead, scheduled


def test_a_sharded_queue_is_one_queue_on_the_dashboard(client: Any, name: str,
                                                       site: str) -> None:  # fmt: skip
    dead, scheduled = _sharded_queue(client, name)
    shards = layout(name, 3).queues
    http = Http(site)
    index = http.get("/")
    assert f'data-queue="{name}"' in index.body
    assert not any(f'data-queue="{shard}"' in index.body for shard in shards)
    api = json.loads(http.get(f"/api/queues/{name}").body)
    assert (api["ready"], api["scheduled"], api["dead"]) == (30, 4, 3)
    assert [entry["id"] for entry in api["consumers"]] == ["worker-1"]  # once, not per shard
    page = http.get(f"/queues/{name}")
    assert page.status == 200 and "3 shards" in page.body
    assert not any(shard in page.body for shard in shards)  # the table only on demand
    table = http.get(f"/queues/{name}?shards=1").body
    assert all(shard in table for shard in shards) and 'id="shards"' in table
    listed = json.loads(http.get(f"/api/queues/{name}/scheduled").body)
    assert [row["id"] for row in listed["jobs"]] == scheduled  # soonest first, merged
    dead_page = http.get(f"/queues/{name}/dead")
    positions = [dead_page.body.index(job_id) for job_id in dead[::-1]]
    assert positions == sorted(positions)  # newest first over the shards
    reply = http.post(f"/queues/{name}/dead/retry",
                      [("id", dead[1]), ("csrf_token", dead_page.token)])  # fmt: skip
    assert reply.status == 303
    assert gq.Queue(name, client=client, shards=3).stats()["dead"] == 2
    job = http.get(f"/queues/{name}/job?id={scheduled[2]}")
    assert job.status == 200 and "scheduled" in job.body


def test_the_running_list_of_a_sharded_queue_shows_every_shard_s_jobs(
    client: Any, name: str, site: str
) -> None:
    producer = gq.Producer(name, client=client, shards=3)
    ids = [producer.perform(gq.Job(id=f"r-{i}", data=b"")) for i in range(9)]
    plan = layout(name, 3)
    assert len({plan.for_id(job_id) for job_id in ids}) == 3
    for shard in plan.queues:  # a worker holds them in flight on each shard
        side = BothSides(client, shard)
        side.register("worker-1")
        side.fetch("worker-1", 100)
    page = Http(site).get(f"/queues/{name}/running")
    assert page.status == 200  # (a 500 before: the sharded handle has no consumers())
    assert all(f'data-job="{job_id}"' in page.body for job_id in ids), page.body
    assert page.body.count("worker-1") >= len(ids)


def test_the_shards_table_opens_in_a_browser(browser: Any, client: Any, name: str,
                                             site: str) -> None:  # fmt: skip
    _sharded_queue(client, name)
    browser.get(f"http://{site}/queues/{name}")
    assert not browser.find_elements(By.ID, "shards")
    browser.find_element(By.ID, "show-shards").click()
    rows = browser.find_elements(By.CSS_SELECTOR, "#shards tbody tr")
    assert [row.find_element(By.TAG_NAME, "a").text for row in rows] == list(layout(name, 3).queues)
    counts = [int(row.find_elements(By.TAG_NAME, "td")[1].text) for row in rows]
    assert sum(counts) == 30  # each shard's ready jobs, summing to the queue's
