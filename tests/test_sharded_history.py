# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""The history of a sharded queue, merged over its shards on a real Redis Cluster of 3
masters (gq/sharded_reads.py): one page newest first, each entry naming its shard, a
cursor that resumes every shard where it stopped; ``gq history`` and the dashboard's
History tab show it."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

import gq
from gq import dashboard
from gq.errors import ConfigurationError
from gq.history import HistoryEntry
from gq.jobfilter import JobFilter
from gq.store.shards import layout
from tests.cli_support import ADMIN, env_for, run
from tests.dashboard_support import Http, serving
from tests.queue_sides import BothSides
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)
from tests.topologies import Cluster

pytestmark = pytest.mark.timeout(180)


def _finished(client: Any, name: str, count: int, prefix: str = "h") -> list[str]:
    """``count`` jobs over the 3 shards ended one after the other (oldest first): every
    third dead, the others cancelled."""
    producer = gq.Producer(name, client=client, shards=3)
    ids = [producer.perform(gq.Job(id=f"{prefix}-{i:02}", data=b"%d" % i)) for i in range(count)]
    plan = layout(name, 3)
    assert count < 9 or len({plan.for_id(job_id) for job_id in ids}) == 3
    queue = gq.Queue(name, client=client, shards=3)
    sides = {shard: BothSides(client, shard) for shard in plan.queues}
    for job_id in ids:
        if int(job_id[-2:]) % 3:
            assert queue.cancel(job_id) == 1
            continue
        side = sides[plan.for_id(job_id)]
        side.register("w")
        assert [taken for taken, _ in side.fetch("w", 1)] == [job_id]
        assert side.kill("w", job_id, "boom", dead_max_jobs=100, dead_max_age=3600)
    return ids


def _pages(queue: gq.Queue, limit: int, jobfilter: JobFilter | None = None,
           between: Any = None) -> list[list[HistoryEntry]]:  # fmt: skip
    pages, cursor = [], None
    for _ in range(30):
        page = queue.history(jobfilter, limit=limit, cursor=cursor)
        assert len(page.entries) <= limit
        pages.append(page.entries)
        if page.cursor is None:
            return pages
        cursor = page.cursor
        if between is not None:
            between()
    raise AssertionError("the cursor never ended")


def test_one_page_merges_the_shards_newest_first_and_its_cursor_loses_nothing(
    client: Any, name: str
) -> None:
    ids = _finished(client, name, 23)
    queue = gq.Queue(name, client=client, shards=3)
    pages = _pages(queue, 5)
    shown = [entry for page in pages for entry in page]
    assert len(pages) == 5 and [len(page) for page in pages[:4]] == [5] * 4
    assert sorted(entry.id for entry in shown) == ids  # each once, over pages cut in shards
    times = [entry.finished_at for entry in shown]
    assert times == sorted(times, reverse=True)  # newest first over the shards
    plan = layout(name, 3)
    assert all(entry.shard == plan.for_id(entry.id) for entry in shown)
    assert {entry.shard for entry in shown} == set(plan.queues)
    states = {entry.id: entry.state for entry in shown}
    assert states["h-03"] == "dead" and states["h-04"] == "cancelled"
    assert all(entry.as_dict()["shard"] == entry.shard for entry in shown)


def test_a_page_with_nothing_left_on_any_shard_has_no_cursor(client: Any, name: str) -> None:
    queue = gq.Queue(name, client=client, shards=3)
    assert queue.history(limit=5).cursor is None  # (before: "shards:,,", for ever)
    _finished(client, name, 6)
    broken = JobFilter(task="no.such.task")
    assert queue.history(broken, limit=5) == queue.history(broken, limit=5)
    assert queue.history(broken, limit=5).cursor is None and _pages(queue, 5, broken) == [[]]


def test_a_filtered_history_pages_through_every_shard(client: Any, name: str) -> None:
    ids = _finished(client, name, 30)
    queue = gq.Queue(name, client=client, shards=3)
    dead = _pages(queue, 4, JobFilter.parse(state=["dead"]))
    assert sorted(e.id for page in dead for e in page) == [i for i in ids if int(i[-2:]) % 3 == 0]
    tens = _pages(queue, 3, JobFilter.parse(id_prefix="h-1"))
    assert sorted(e.id for page in tens for e in page) == [f"h-1{d}" for d in range(10)]


def test_jobs_ending_between_pages_do_not_repeat_or_hide_older_ones(
    client: Any, name: str
) -> None:
    ids = _finished(client, name, 12)
    queue = gq.Queue(name, client=client, shards=3)
    later: list[str] = []

    def end_more() -> None:
        later.extend(_finished(client, name, 3, prefix=f"late{len(later)}"))

    shown = [entry.id for page in _pages(queue, 4, between=end_more) for entry in page]
    assert len(shown) == len(set(shown))  # nothing twice
    assert set(ids) <= set(shown)  # every older one listed
    assert later and set(shown) <= set(ids) | set(later)


def test_a_cursor_of_another_queue_or_layout_is_refused(client: Any, name: str) -> None:
    _finished(client, name, 3)
    queue = gq.Queue(name, client=client, shards=3)
    for bad in ("17", "shards:1,2", "shards:1,x,2", "shards:eyJhIjoxfQ=="):
        with pytest.raises(ConfigurationError, match="not a history cursor of this 3-shard"):
            queue.history(cursor=bad)
    with pytest.raises(ConfigurationError, match="not in the history"):
        queue.history(JobFilter.parse(state=["ready"]))


def test_gq_history_lists_a_sharded_queue_and_pages_with_its_cursor(
    cluster: Cluster, client: Any, name: str
) -> None:
    ids = _finished(client, name, 9)
    env = env_for(cluster.url, None)
    first = run(ADMIN, "history", "--queue", name, "--limit", "5", "--json", env=env)
    assert first.returncode == 0, first.stderr
    cursor = first.stderr.split("--cursor '")[1].split("'")[0]
    rest = run(ADMIN, "history", "--queue", name, "--json", "--cursor", cursor, env=env)
    assert rest.returncode == 0 and "--cursor" not in rest.stderr, rest.stderr
    shown = [entry for out in (first, rest) for entry in json.loads(out.stdout)]
    assert sorted(entry["id"] for entry in shown) == ids
    assert all(entry["shard"] == layout(name, 3).for_id(entry["id"]) for entry in shown)
    table = run(ADMIN, "history", "--queue", name, "--shards", env=env)
    assert table.returncode == 0, table.stderr
    assert table.stdout.startswith("SHARD") and layout(name, 3).queues[0] in table.stdout
    bad = run(ADMIN, "history", "--queue", name, "--cursor", "12", env=env)
    assert bad.returncode == 2 and "not a history cursor of this 3-shard queue" in bad.stderr


@pytest.fixture
def site(client: Any, name: str) -> Iterator[str]:
    with serving(dashboard.app(client=client, refresh=0)) as address:
        yield address


def test_gq_jobs_state_finished_lists_a_sharded_queue_s_history(
    cluster: Cluster, client: Any, name: str
) -> None:
    ids = _finished(client, name, 6)
    env = env_for(cluster.url, name)
    listed = run(ADMIN, "jobs", "--state", "finished", "--json", env=env)
    assert listed.returncode == 0, listed.stderr  # (before: refused, exit 2)
    shown = json.loads(listed.stdout)
    assert sorted(job["id"] for job in shown) == ids
    assert {job["state"] for job in shown} == {"dead", "cancelled"}


def test_the_dashboard_history_tab_of_a_sharded_queue(client: Any, name: str,
                                                      site: str) -> None:  # fmt: skip
    ids = _finished(client, name, 60)
    gq.Producer(name, client=client, shards=3).perform(b"waiting")  # (the queue exists)
    http = Http(site)
    first = http.get(f"/queues/{name}/history")
    assert first.status == 200, first.body
    assert "<th>Shard</th>" in first.body
    assert all(shard in first.body for shard in layout(name, 3).queues)
    newest = {job_id for job_id in ids if f'data-id="{job_id}"' in first.body}
    assert len(newest) == 50 and set(ids[20:]) <= newest  # the newest (ends in a ms may tie)
    link = first.body.split('id="history-next" href="')[1].split('"')[0].replace("&amp;", "&")
    older = http.get(link)
    assert older.status == 200 and 'id="history-next"' not in older.body
    assert {job_id for job_id in ids if f'data-id="{job_id}"' in older.body} == set(ids) - newest
    bad = http.get(f"/queues/{name}/history?cursor=5")
    assert bad.status == 400 and "history cursor" in bad.body
