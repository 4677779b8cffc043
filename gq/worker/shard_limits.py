"""The balancer of sharded queues (docs/deployment.md, "One queue over many masters"): a
consumer loop whose step, every ``INTERVAL`` seconds,

- notices a change of a served sharded queue's layout (a reshard, or its old layout
  retired) and has the consumer restart over the shards Redis now lists;
- moves each shard's share of the queue-wide rate and concurrency limits to where the
  jobs wait (gq/store/shard_limits.balance);
- retires a reshard's old layout once it is drained (gq/store/reshard.retire).

Every consumer runs the loop; one at a time balances and retires for a queue, the holder
of its lease, so that two never raise shares into the same room.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any, Callable

import redis

from gq.store.base import describe
from gq.store.reshard import Serving, retire, serving
from gq.store.shard_limits import balance, drop_lease, hold_lease, queue_limits
from gq.store.shards import Layout

log = logging.getLogger("gq.balancer")

#: Seconds between two balancing passes: how late a share follows the load.
INTERVAL = 0.5
#: How long a balancer holds a queue without renewing (a stalled one's successor waits it).
LEASE_MS = 5000


class Balancer:
    """Balances the sharded queues ``served`` (name -> the shards served) on ``client``
    as consumer ``owner``; ``on_change`` is called when Redis lists other shards."""

    def __init__(self, client: Any, served: Mapping[str, tuple[str, ...]], owner: str,
                 context: str, on_change: Callable[[], None]) -> None:  # fmt: skip
        self._client = client
        self._served = dict(served)
        self._owner = owner
        self._context = context
        self._on_change = on_change

    def step(self) -> bool:
        """One pass over every sharded queue served; never "again"."""
        for name, queues in self._served.items():
            found = serving(self._client, name, len(queues))
            if found.queues != queues:
                self._on_change()
                return False
            limits = queue_limits(self._client, name)
            if not (limits.any or found.previous):
                continue
            if hold_lease(self._client, name, self._owner, LEASE_MS):
                if limits.any:
                    balance(self._client, Layout(name, found.queues), limits)
                if found.previous is not None and retire(self._client, name):
                    log.info("%s: retired the old layout of %s", self._context, name)
        return False

    def close(self) -> None:
        """Give up the leases held, so another consumer balances at once; never raises."""
        try:
            for name in self._served:
                drop_lease(self._client, name, self._owner)
        except redis.RedisError as exc:  # the lease runs out by itself
            log.warning("%s: could not give up the balancer's lease: %s", self._context,
                        describe(exc))  # fmt: skip


def served_by(families: Mapping[str, str]) -> dict[str, tuple[str, ...]]:
    """Sharded queue -> its shards served, from a consumer's shard -> sharded queue map."""
    served: dict[str, list[str]] = {}
    for shard, name in families.items():
        served.setdefault(name, []).append(shard)
    return {name: tuple(shards) for name, shards in served.items()}


def served_now(client: Any, families: Mapping[str, str]) -> dict[str, Serving]:
    """Sharded queue -> what Redis says it is made of now (the old layout too)."""
    return {name: serving(client, name, len(shards))
            for name, shards in served_by(families).items()}  # fmt: skip


def balancer_for(client: Any, families: Mapping[str, str], owner: str, context: str,
                 on_change: Callable[[], None]) -> Balancer | None:  # fmt: skip
    """A consumer's balancer, or None when it serves no sharded queue."""
    if not families:
        return None
    return Balancer(client, served_by(families), owner, context, on_change)
