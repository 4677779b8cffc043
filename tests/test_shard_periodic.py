"""Periodic schedules of a sharded queue on a real 3-master Cluster: each schedule kept
and enqueued on the shard its name routes to, each occurrence once with two consumers
(docs/deployment.md, "One queue over many masters")."""

from __future__ import annotations

import collections
from typing import Any

import gq
from gq.store.shards import layout
from tests.helpers import wait_until
from tests.test_shards import FAST, client, cluster, consume, name, stop

__all__ = ["client", "cluster", "name"]  # the fixtures, shared with tests/test_shards.py


def test_each_occurrence_is_enqueued_once_on_its_schedules_shard(client: Any,
                                                                 name: str) -> None:  # fmt: skip
    plan = layout(name, 3)
    # Three schedules whose names route to three different shards.
    names = [next(f"tick{i}" for i in range(1000) if plan.for_key(f"tick{i}") == shard)
             for shard in plan.queues]  # fmt: skip
    schedule = [gq.Periodic(n, every=1, data=b"", queue=name) for n in names]
    ran: list[tuple[str, str]] = []
    consumers = [gq.Consumer(name, client=client, shards={name: 3}, periodic=schedule, **FAST)
                 for _ in range(2)]  # fmt: skip
    greenlets = [consume(c, lambda job: ran.append((job.id, job.queue))) for c in consumers]
    try:
        wait_until(lambda: all(sum(1 for i, _ in ran if i.startswith(f"periodic:{n}:")) >= 3
                               for n in names), 30, 0.05, "three occurrences of each")  # fmt: skip
    finally:
        for consumer, greenlet in zip(consumers, greenlets):
            stop(consumer, greenlet)
    by_name = collections.defaultdict(list)
    for job_id, queue in ran:
        _, schedule_name, at = job_id.split(":")
        by_name[schedule_name].append(int(at))
        assert queue == plan.for_key(schedule_name)  # on its name's shard
    for times in by_name.values():
        times.sort()
        assert times == list(range(times[0], times[0] + len(times)))  # each once, none skipped
