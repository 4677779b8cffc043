# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""The per-group gauges of a sharded queue (gq/tasks/group_metrics.py) on a real Redis
Cluster of 3 masters, read through prometheus_client's registry: its groups waiting summed
over its shards, its busiest groups the busiest of all shards, under its logical name."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from gq.store.shards import layout
from gq.tasks.group_metrics import GroupCollector
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(120)
prometheus_client = pytest.importorskip("prometheus_client")


def _samples(registry: Any, metric: str) -> dict[tuple[str, ...], float]:
    return {tuple(sample.labels.values()): sample.value
            for family in registry.collect() for sample in family.samples
            if sample.name == metric}  # fmt: skip


def test_a_sharded_queue_s_groups_are_summed_and_its_busiest_taken_over_all_shards(
    client: Any, name: str
) -> None:
    app = gq.App(client=client, shards={name: 3}, queue=name)

    @app.task(queue=name, group=lambda tenant: f"t{tenant}")
    def work(tenant: int) -> None: ...

    # Group t<k> has k + 1 jobs waiting: 12 groups, spread over the 3 shards.
    work.enqueue_many([(k,) for k in range(12) for _ in range(k + 1)])
    plan = layout(name, 3)
    busiest = [f"t{k}" for k in (11, 10, 9, 8)]
    assert len({plan.for_key(group) for group in busiest}) > 1  # the top is on several shards
    registry = prometheus_client.CollectorRegistry()
    registry.register(GroupCollector(client, [name], top=4))
    assert _samples(registry, "gq_groups_waiting") == {(name,): 12.0}
    waiting = _samples(registry, "gq_group_jobs")
    assert {labels[1]: value for labels, value in waiting.items() if labels[2] == "waiting"} == {
        group: float(int(group[1:]) + 1) for group in busiest
    }
    assert {labels[0] for labels in waiting} == {name}  # under its name, not its shards'
