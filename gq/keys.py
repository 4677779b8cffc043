"""The Redis key names of one queue, shared with curlyq (SPEC section 3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueKeys:
    """Every key of queue ``name``; a hash tag in the name (``{emails}``) keeps them in one slot."""

    name: str

    @property
    def data(self) -> str:
        return f"{self.name}:data"

    @property
    def active(self) -> str:
        return f"{self.name}:active"

    @property
    def scheduled(self) -> str:
        return f"{self.name}:scheduled"

    @property
    def dead(self) -> str:
        return f"{self.name}:dead"

    @property
    def consumers(self) -> str:
        return f"{self.name}:consumers"

    @property
    def signal(self) -> str:
        return f"{self.name}:signal"

    @property
    def recovered(self) -> str:
        """gq's own key: job id -> recoveries from crashed consumers in a row."""
        return f"{self.name}:recovered"

    def inflight(self, consumer_id: str) -> str:
        return f"{self.name}:inflight:{consumer_id}"

    def facts(self, consumer_id: str) -> str:
        """gq's own key: JSON facts of a running consumer (host, pid, memory...), with a TTL."""
        return f"{self.name}:facts:{consumer_id}"

    def history(self, hour: int) -> str:
        """gq's own key: jobs done and failed per minute during the hour starting at ``hour``."""
        return f"{self.name}:history:{hour}"


#: gq's own global key: the set of queue names that consumers work on, so that readers (the
#: dashboard, ``gq metrics``) find the queues without KEYS. In its own slot on a cluster.
REGISTRY = "gq:queues"
