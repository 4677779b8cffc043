"""The numbers of the queue gauges (gq/metrics.py's ``QueueCollector``): a plain queue's, or
a sharded queue's summed under its logical name with each shard's apart, in a family of
their own so that a sum over ``gq_queue_jobs`` never counts a job twice (docs/
decisions.md, "Metrics of a sharded queue").

A sharded queue's consumers are its largest count on any shard (each worker registers
on every shard it serves), its oldest ready job the oldest of any shard.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from gq import job as jobs
from gq.store.admin import QueueAdmin, QueueGauges
from gq.store.shards import declared, fold, layout

#: Jobs by state on each shard of a sharded queue (labels: queue, shard, state).
SHARD_JOBS = "gq_queue_shard_jobs"
#: The states of ``gq_queue_jobs`` (and of ``gq_queue_shard_jobs``).
STATES = ("ready", "scheduled", "inflight", "dead", "grouped")


class GaugeReader:
    """Reads the gauges of queues by name, a sharded queue's over its shards."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._handles: dict[str, QueueAdmin] = {}
        self._shards: dict[str, int] = {}

    def names(self, names: list[str]) -> list[str]:
        """``names`` with shards folded into their queue; learns which are sharded (one
        round trip per scrape: a queue declared since the last one is seen at once)."""
        folded = fold(self._client, names)
        self._shards = declared(self._client, folded)
        return folded

    def read(self, name: str, consumer_timeout: float) -> tuple[QueueGauges, list[Any]]:
        """Queue ``name``'s gauges, and for a sharded queue each (shard, its gauges)."""
        count = self._shards.get(name)
        if count is None:
            return self._handle(name).gauges(consumer_timeout), []
        shards = [(s, self._handle(s).gauges(consumer_timeout)) for s in layout(name, count).queues]
        return summed([gauges for _, gauges in shards]), shards

    def _handle(self, name: str) -> QueueAdmin:
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = QueueAdmin(self._client, name)
        return handle


def summed(every: list[QueueGauges]) -> QueueGauges:
    """One sharded queue's gauges from its shards': jobs summed, consumers the most of any
    shard, the oldest ready head (by its ready time; curlyq's, which have none, last)."""
    oldest = min(every, key=lambda g: (_ready_at(g.head), g.head is None))
    return dataclasses.replace(
        oldest,
        **{state: sum(getattr(g, state) for g in every) for state in STATES},
        consumers_alive=max(g.consumers_alive for g in every),
        consumers_dead=max(g.consumers_dead for g in every),
    )


def _ready_at(head: bytes | None) -> float:
    if head is None:
        return float("inf")
    try:
        ready_at = jobs.decode_ready_at(head)
    except jobs.MessageDecodeError:
        return float("inf")
    return float("inf") if ready_at is None else ready_at


def oldest_age(head: bytes | None, now: float) -> float | None:
    """Seconds the oldest ready job has been ready: 0 when none is, None when its
    message does not say when it became ready (curlyq's)."""
    if head is None:
        return 0.0
    ready_at = _ready_at(head)
    return None if ready_at == float("inf") else max(0.0, now - ready_at)
