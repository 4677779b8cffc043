"""Prometheus gauges per group (SPEC section 17), opt in: a label per group is a time
series per tenant, which a service with 10,000 tenants must choose, not get. Only the
``top`` busiest groups of each queue are exported at a scrape (bounded cardinality), with
how many groups have jobs waiting::

    registry = prometheus_client.CollectorRegistry()
    registry.register(gq.tasks.group_metrics.GroupCollector(client, ["webhooks"], top=20))

``gq_group_jobs{queue, group, state="waiting"|"held"}`` and ``gq_groups_waiting{queue}``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator, Sequence
from typing import Any

from gq.metrics import prometheus
from gq.store.admin import QueueAdmin
from gq.store.base import describe
from gq.store.groups import busiest

log = logging.getLogger("gq.metrics")

GROUP_JOBS = "gq_group_jobs"
GROUPS_WAITING = "gq_groups_waiting"


class GroupCollector:
    """Per scrape, the ``top`` busiest groups of each of ``queues`` (a failing queue is left
    out of the scrape and logged: no stale value is shown)."""

    def __init__(self, client: Any, queues: Sequence[str], top: int = 10) -> None:
        if isinstance(top, bool) or not isinstance(top, int) or top < 1:
            raise ValueError(f"top must be an int of at least 1, not {top!r}")
        self._handles = [QueueAdmin(client, name) for name in queues]
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
        for handle in self._handles:
            name = handle.keys.name
            try:
                total, rows = busiest(handle, self._top)
            except Exception as exc:  # noqa: BLE001 - a scrape reports, never raises
                log.warning("group metrics scrape of queue %s failed: %s", name, describe(exc))
                continue
            waiting.add_metric([name], total)
            for row in rows:
                jobs.add_metric([name, row.group, "waiting"], row.waiting)
                jobs.add_metric([name, row.group, "held"], row.held)
        return [jobs, waiting]
