"""Jobs waiting in groups' lines are counted apart from ready ones wherever ready jobs are:
``Queue.stats()``, ``gq stats`` (table and --json) and the queue metrics, on fakeredis and a
real Redis. (The dashboard's side is tests/test_dashboard_grouped_browser.py.)"""

from __future__ import annotations

import argparse
import json
from typing import Any

import pytest

import gq
from gq import metrics
from gq.cli import status
from gq.store.groups import push_group
from gq.store.jobs import RedisQueue
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(60)


def _fill(backend: Backend) -> gq.Queue:
    """Five grouped jobs in two groups, two plain ready ones, one scheduled."""
    client = backend.client()
    entries = [(f"{g}-{i}", gq.job.encode(gq.Job(f"{g}-{i}".encode())), 0.0, g)
               for g, n in (("tenant:a", 4), ("tenant:b", 1)) for i in range(n)]  # fmt: skip
    push_group(RedisQueue(client, backend.queue), "now", entries)
    producer = gq.Producer(backend.queue, client=client)
    producer.perform_many([b"plain-1", b"plain-2"])
    producer.perform_after(600, b"later")
    return gq.Queue(backend.queue, client=client)


def test_queue_stats_counts_grouped_jobs_apart_from_ready(backend: Backend) -> None:
    report = _fill(backend).stats()
    assert (report["ready"], report["grouped"], report["scheduled"]) == (2, 5, 1)
    assert report["in_flight"] == 0


def test_gq_stats_shows_grouped_in_the_table_and_the_json(
    backend: Backend, capsys: pytest.CaptureFixture[str]
) -> None:
    queue = _fill(backend)
    status.stats(argparse.Namespace(json=False, consumer_timeout=60.0, shards=False), queue)
    lines = capsys.readouterr().out.splitlines()
    assert any(line.split()[:2] == ["grouped", "5"] for line in lines), lines
    assert any(line.split()[:2] == ["ready", "2"] for line in lines), lines
    status.stats(argparse.Namespace(json=True, consumer_timeout=60.0, shards=False), queue)
    assert json.loads(capsys.readouterr().out)["grouped"] == 5


def _samples(backend: Backend) -> dict[str, float]:
    collector = metrics.QueueCollector(backend.client(), [backend.queue])
    found: dict[str, Any] = {}
    for family in collector.collect():
        if family.name == metrics.QUEUE_JOBS:
            found.update({s.labels["state"]: s.value for s in family.samples})
    return found


def test_the_queue_metrics_count_grouped_jobs_and_not_as_in_flight(backend: Backend) -> None:
    _fill(backend)
    jobs = _samples(backend)
    assert (jobs["ready"], jobs["grouped"], jobs["scheduled"], jobs["inflight"]) == (2, 5, 1, 0)


def test_groups_parked_at_their_limit_still_count_their_waiting_jobs(backend: Backend) -> None:
    queue = _fill(backend)
    queue.set_group_limits(concurrency=1)
    store = RedisQueue(backend.client(), backend.queue)
    store.register("c1")
    fetched = store.fetch("c1", 10)
    assert len(fetched) == 4  # the two plain ones and one of each group
    assert len(store.fetch("c1", 10)) == 0  # a fetch that finds them full parks them
    assert backend.client().zcard(f"{backend.queue}:groups:parked") == 1  # "a": 3 wait
    report = queue.stats()
    assert (report["ready"], report["grouped"]) == (0, 3)
    jobs = _samples(backend)
    assert (jobs["grouped"], jobs["inflight"]) == (3, 4)
