"""Resharding a sharded queue from N to M shards while producers and consumers run
(docs/deployment.md, "One queue over many masters": "Resharding").

The descriptor ``gq:sharded:<name>`` then holds two layouts: ``shards``/``queues`` the new
one, where producers write from their next look at it (each looks once a
``REFRESH`` seconds), and ``previous``/``previous_queues`` the old one, which consumers
keep serving (with the new) until it is drained. ``history`` lists every count the queue
had, so that a producer whose code still says an old count follows Redis instead of
being refused. ``retire`` drops the old layout once ``GRACE`` seconds passed since the
reshard (every producer has looked since) and every shard only the old layout has holds
no job at all (its data hash is empty: nothing ready, scheduled, in flight, dead or
waiting in a group).

Periodic schedules added at runtime live on the shard their name routes to in the current
layout (gq/sharded.py): ``reshard`` moves each to its shard in the new layout, and
``retire`` moves any still on another shard (one added through a handle that had not seen
the reshard) before the old layout is dropped, so that none is left on a shard no
consumer serves (``settle``; docs/decisions.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import redis

from gq.errors import ConfigurationError
from gq.store import schedules
from gq.store.base import ScriptedQueue, as_text
from gq.store.keys import QueueKeys, sharded_key
from gq.store.shards import Layout, check_shards, layout

#: Seconds between a producer's looks at the descriptor (its layout may have changed).
REFRESH = 1.0
#: Seconds after a reshard before the old layout may be retired: every producer that
#: looks once a REFRESH has written its last job to the old layout by then.
GRACE = 10.0
_FIELDS = ("shards", "previous", "resharded_at", "history")


@dataclass(frozen=True)
class Serving:
    """The layouts a sharded queue's consumers serve: the current, and while a reshard
    drains it the previous one."""

    current: Layout
    previous: Layout | None = None
    resharded_at: float = 0.0

    @property
    def queues(self) -> tuple[str, ...]:
        """Every shard to serve: the current ones, then those only the old layout has."""
        return self.current.queues + self.draining

    @property
    def draining(self) -> tuple[str, ...]:
        old = () if self.previous is None else self.previous.queues
        return tuple(q for q in old if q not in self.current.queues)


def serving(client: Any, name: str, count: int) -> Serving:
    """What Redis says ``name`` is made of (``count`` shards when it says nothing)."""
    return _serving(name, count, client.hmget(sharded_key(name), _FIELDS))


async def aserving(client: Any, name: str, count: int) -> Serving:
    """``serving`` on a ``redis.asyncio`` client (gq.aio's events of a sharded queue)."""
    return _serving(name, count, await client.hmget(sharded_key(name), _FIELDS))


def _serving(name: str, count: int, found: list[Any]) -> Serving:
    raw = [None if v is None else as_text(v) for v in found]
    shards, previous, at, _ = raw
    current = layout(name, int(shards) if shards else count)
    old = layout(name, int(previous)) if previous else None
    return Serving(current, old, float(at) if at else 0.0)


def serving_or_given(client: Any, name: str, count: int) -> Serving:
    """``serving``, or the given layout when Redis does not answer (read later again)."""
    try:
        return serving(client, name, count)
    except redis.RedisError:
        return Serving(layout(name, count))


def history(client: Any, name: str) -> set[int]:
    """Every count ``name`` has had (its resharding history)."""
    raw = client.hget(sharded_key(name), "history")
    return {int(n) for n in as_text(raw).split()} if raw else set()


def reshard(client: Any, name: str, count: int) -> Serving:
    """Start moving ``name`` to ``count`` shards: new jobs go to the new layout, the old
    one is served until ``retire`` drops it. Refused while a reshard still drains."""
    count = check_shards(name, count)
    now = time.time()  # the grace is seconds: hosts' clocks agree well enough
    found = serving(client, name, count)
    raw = client.hget(sharded_key(name), "shards")
    if raw is None:
        raise ConfigurationError(f"queue {name!r} is not a sharded queue (no {sharded_key(name)})")
    if found.previous is not None:
        raise ConfigurationError(
            f"queue {name!r} is still draining its {len(found.previous.queues)} old shards "
            "into the new layout: retire them first (gq shards --queue NAME --retire)"
        )
    old = int(as_text(raw))
    if old == count:
        raise ConfigurationError(f"queue {name!r} already has {count} shards")
    plan = layout(name, count)
    counts = sorted(history(client, name) | {old, count})
    client.hset(sharded_key(name), mapping={
        "previous": old, "previous_queues": " ".join(layout(name, old).queues),
        "shards": count, "queues": " ".join(plan.queues), "resharded_at": f"{now:.3f}",
        "history": " ".join(map(str, counts)),
    })  # fmt: skip
    moved = Serving(plan, layout(name, old), now)
    settle(client, moved)
    return moved


def leftovers(client: Any, queues: tuple[str, ...]) -> dict[str, int]:
    """Jobs each of ``queues`` still holds (its data hash: every job in any state)."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.hlen(QueueKeys(queue).data)
    return dict(zip(queues, pipe.execute()))


def retire(client: Any, name: str, *, grace: float = GRACE) -> bool:
    """Drop the old layout if the reshard is ``grace`` s old and its own shards are empty;
    whether it was dropped (or none was left)."""
    found = serving(client, name, 1)
    if found.previous is None:
        return True
    if time.time() - found.resharded_at < grace:
        return False
    if any(leftovers(client, found.draining).values()):
        return False
    settle(client, found)  # before the old shards are dropped: a crash retries it
    client.hdel(sharded_key(name), "previous", "previous_queues", "resharded_at")
    return True


def settle(client: Any, found: Serving) -> int:
    """Move every runtime periodic schedule of the shards ``found`` serves to the shard
    its name routes to in the current layout; how many moved."""
    moved = 0
    for queue, names in schedules.names_on(client, found.queues).items():
        for name in names:
            home = found.current.for_key(name)
            if home != queue:
                now = ScriptedQueue(client, queue).server_time()
                schedules.relocate(client, queue, home, name, now)
                moved += 1
    return moved
