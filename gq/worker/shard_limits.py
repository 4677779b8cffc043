"""The balancer of sharded queues' queue-wide limits (docs/deployment.md, "One queue over
many masters"): a consumer loop whose step, every ``INTERVAL`` seconds, moves each shard's
share of the queue-wide rate and concurrency limits to where the jobs wait
(gq/store/shard_limits.balance). Every consumer runs the loop; one at a time balances a
queue, the holder of its lease, so that two never raise shares into the same room.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from gq.store.shard_limits import balance, drop_lease, hold_lease, queue_limits
from gq.store.shards import layout

log = logging.getLogger("gq.balancer")

#: Seconds between two balancing passes: how late a share follows the load.
INTERVAL = 0.5
#: How long a balancer holds a queue without renewing (a stalled one's successor waits it).
LEASE_MS = 5000


class Balancer:
    """Balances the queue-wide limits of ``families`` (sharded queue -> its shard count)
    on ``client`` as consumer ``owner``."""

    def __init__(self, client: Any, families: Mapping[str, int], owner: str,
                 context: str) -> None:  # fmt: skip
        self._client = client
        self._families = dict(families)
        self._owner = owner
        self._context = context

    def step(self) -> bool:
        """One pass over every sharded queue with a queue-wide limit; never "again"."""
        for name, count in self._families.items():
            limits = queue_limits(self._client, name)
            if limits.any and hold_lease(self._client, name, self._owner, LEASE_MS):
                balance(self._client, layout(name, count), limits)
        return False

    def close(self) -> None:
        """Give up the leases held, so another consumer balances at once."""
        for name in self._families:
            drop_lease(self._client, name, self._owner)


def families_of(shards: Mapping[str, str]) -> dict[str, int]:
    """Sharded queue -> its shard count, from a consumer's shard -> sharded queue map."""
    counts: dict[str, int] = {}
    for name in shards.values():
        counts[name] = counts.get(name, 0) + 1
    return counts


def balancer_for(queues: Mapping[str, Any], shards: Mapping[str, str], owner: str,
                 context: str) -> Balancer | None:  # fmt: skip
    """A consumer's balancer, or None when it serves no sharded queue."""
    if not shards:
        return None
    client = queues[next(iter(shards))].client
    return Balancer(client, families_of(shards), owner, context)
