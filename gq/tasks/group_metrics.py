"""Prometheus gauges per group (SPEC section 17), opt in: a label per group is a time
series per tenant, which a service with 10,000 tenants must choose, not get. Only the
``top`` busiest groups of each queue are exported at a scrape (bounded cardinality), with
how many groups have jobs waiting::

    registry = prometheus_client.CollectorRegistry()
    registry.register(gq.tasks.group_metrics.GroupCollector(client, ["webhooks"], top=20))

``gq_group_jobs{queue, group, state="waiting"|"held"}`` and ``gq_groups_waiting{queue}``.

A sharded queue (its descriptor ``gq:sharded:<name>``, read at each scrape as the queue
gauges do) is shown under its logical name: a group lives on one shard, so its busiest
groups are the busiest of all its shards (a draining layout's too) and its groups
waiting the sum of theirs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from gq.metrics import prometheus
from gq.store.admin import QueueAdmin
from gq.store.base import describe
from gq.store.groups import GroupRow, busiest
from gq.store.reshard import serving
from gq.store.shards import declared

log = logging.getLogger("gq.metrics")

GROUP_JOBS = "gq_group_jobs"
GROUPS_WAITING = "gq_groups_waiting"


class GroupCollector:
    """Per scrape, the ``top`` busiest groups of each of ``queues`` (a failing queue is left
    out of the scrape and logged: no stale value is shown)."""

    def __init__(self, client: Any, queues: Sequence[str], top: int = 10) -> None:
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ValueError(f"top must be an int of at least 1, not {top!r}")
        self._client = client
        self._names = list(queues)
        self._handles: dict[str, QueueAdmin] = {}
        self._top = top
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Any]:
        with self._lock:
            return iter(self._scrape())

    def _scrape(self) -> list[Any]:
        core = prometheus().core
        jobs = core.GaugeMetricFamily(GROUP_JOBS, "Jobs of the busiest groups, waiting or held",
                                      labels=["queue", "group", "state"])  # fmt: skip
        waiting = core.GaugeMetricFamily(GROUPS_WAITING, "Groups with jobs waiting",
                                         labels=["queue"])  # fmt: skip
        sharded = self._sharded()
        for name in self._names:
            try:
                total, rows = self._busiest(name, sharded.get(name))
            except Exception as exc:  # noqa: BLE001 - a scrape reports, never raises
                log.warning("group metrics scrape of queue %s failed: %s", name, describe(exc))
                continue
            waiting.add_metric([name], total)
            for row in rows:
                jobs.add_metric([name, row.group, "waiting"], row.waiting)
                jobs.add_metric([name, row.group, "held"], row.held)
        return [jobs, waiting]

    def _sharded(self) -> dict[str, int]:
        """The shard counts of the sharded queues named (none known if Redis fails: each
        queue's own read then fails and is logged)."""
        try:
            return declared(self._client, self._names)
        except Exception:  # noqa: BLE001 - a scrape reports, never raises
            return {}

    def _busiest(self, name: str, shards: int | None) -> tuple[int, list[GroupRow]]:
        """(groups waiting, the busiest rows) of queue ``name``, over its shards if any."""
        if shards is None:
            return busiest(self._handle(name), self._top)
        every = [busiest(self._handle(shard), self._top)
                 for shard in serving(self._client, name, shards).queues]  # fmt: skip
        rows = sorted((row for _, found in every for row in found),
                      key=lambda row: (-row.waiting, row.group))  # fmt: skip
        return sum(total for total, _ in every), rows[: self._top]

    def _handle(self, name: str) -> QueueAdmin:
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = QueueAdmin(self._client, name)
        return handle
