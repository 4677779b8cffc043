# ruff: noqa: F811  (the fixtures of tests/test_shards.py, imported, are parameters here)
"""The queue gauges of a sharded queue on a real Redis Cluster of 3 masters: summed under
its logical name in ``gq_queue_jobs``, each shard's in ``gq_queue_shard_jobs``
(gq/metrics_gauges.py; docs/decisions.md, "Metrics of a sharded queue")."""

from __future__ import annotations

import time
from typing import Any

import pytest
from prometheus_client import generate_latest
from prometheus_client.parser import text_string_to_metric_families

import gq
from gq import metrics
from gq.store.shards import layout
from tests.queue_sides import BothSides
from tests.test_shards import client, cluster, name  # noqa: F401  (fixtures)

pytestmark = pytest.mark.timeout(120)


def _samples(registry: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    text = generate_latest(registry).decode()
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


@pytest.mark.parametrize("named", [False, True], ids=["registry", "named"])
def test_a_sharded_queue_s_gauges_are_summed_with_each_shard_apart(
    client: Any, name: str, named: bool
) -> None:
    shards = layout(name, 3).queues
    producer = gq.Producer(name, client=client, shards=3)
    producer.perform_many([b"x"] * 30)
    producer.perform_at(time.time() + 3600, gq.Job(id="later", data=b""))
    for shard in shards:
        BothSides(client, shard).register("worker-1")  # a worker registers on every shard
    client.sadd("gq:queues", *shards)
    try:
        registry = metrics.queue_metrics_registry(client, [name] if named else None)
        samples = _samples(registry)
    finally:
        client.srem("gq:queues", *shards)

    def jobs(state: str) -> float:
        return samples[("gq_queue_jobs", (("queue", name), ("state", state)))]

    assert (jobs("ready"), jobs("scheduled"), jobs("dead")) == (30, 1, 0)
    alive = samples[("gq_queue_consumers", (("queue", name), ("state", "alive")))]
    assert alive == 1  # one worker, not one per shard
    assert not any(dict(labels).get("queue") in shards for _, labels in samples)
    per_shard = {
        dict(labels)["shard"]: value
        for (metric, labels), value in samples.items()
        if metric == "gq_queue_shard_jobs" and dict(labels)["state"] == "ready"
    }
    assert set(per_shard) == set(shards) and sum(per_shard.values()) == 30
    assert all(value > 0 for value in per_shard.values())
