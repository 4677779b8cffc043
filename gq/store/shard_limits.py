"""Queue-wide limits of a sharded queue in Redis (docs/deployment.md, "One queue over many
masters"): the figures kept in its descriptor (``limit_rate``, ``limit_period`` ms,
``limit_concurrency``), each shard's share written as that shard's own flow settings
(which fetch.lua enforces exactly, in one slot), and the one balancer's lease.

A fetch script cannot read keys of two slots, so no shard can consult a bucket held by
another. Each shard holds a share instead, and ``balance`` moves the shares to where
the jobs wait: shares are lowered first, the held counts read after that, and a share is
raised only into the room that every shard's ``max(held, share)`` leaves, so that the
shards together never hold more than the concurrency limit, nor their rates sum to more
than the rate limit, at any instant (gq/shard_shares.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gq import shard_shares
from gq.errors import ConfigurationError
from gq.store.admin import FlowState
from gq.store.base import as_text
from gq.store.keys import QueueKeys, sharded_balancer_key, sharded_key
from gq.store.shards import Layout

FIELDS = ("limit_rate", "limit_period", "limit_concurrency")


@dataclass(frozen=True)
class QueueWide:
    """A sharded queue's queue-wide limits: ``rate`` jobs per ``period`` ms, ``concurrency``."""

    rate: int | None = None
    period: int | None = None
    concurrency: int | None = None

    @property
    def any(self) -> bool:
        return self.rate is not None or self.concurrency is not None


@dataclass(frozen=True)
class ShardLoad:
    """One shard's demand and share: jobs ready, jobs held by gq consumers, its settings."""

    ready: int
    held: int
    rate: int | None
    period: int | None
    concurrency: int | None


def queue_limits(client: Any, name: str) -> QueueWide:
    """The queue-wide limits written in ``name``'s descriptor (none: all None)."""
    raw = client.hmget(sharded_key(name), list(FIELDS))
    rate, period, concurrency = (None if v is None else int(as_text(v)) for v in raw)
    return QueueWide(rate=rate, period=period, concurrency=concurrency)


def write_queue_limits(client: Any, name: str, changes: dict[str, int | None]) -> None:
    """Set (a number) or clear (None) the descriptor's "rate", "period", "concurrency"."""
    given = {f"limit_{k}": v for k, v in changes.items() if v is not None}
    cleared = [f"limit_{k}" for k, v in changes.items() if v is None]
    if given:
        client.hset(sharded_key(name), mapping=given)
    if cleared:
        client.hdel(sharded_key(name), *cleared)


def loads(client: Any, shards: Sequence[str]) -> list[ShardLoad]:
    """Every shard's ``ShardLoad``, in one pipeline (a cluster client sends each
    command to its shard's master)."""
    pipe = client.pipeline(transaction=False)
    for shard in shards:
        keys = QueueKeys(shard)
        pipe.llen(keys.active)
        pipe.hvals(keys.held)
        pipe.hmget(keys.flow, ["rate", "period", "concurrency"])
    replies = pipe.execute()
    return [_load(*replies[i:i + 3]) for i in range(0, len(replies), 3)]


def _load(ready: int, held: list[bytes], flow: list[bytes | None]) -> ShardLoad:
    rate, period, concurrency = (None if v is None else int(as_text(v)) for v in flow)
    return ShardLoad(ready=int(ready), held=sum(int(n) for n in held), rate=rate,
                     period=period, concurrency=concurrency)  # fmt: skip


def write_shares(client: Any, shards: Sequence[str], field: str, shares: dict[int, int],
                 extra: dict[str, int] | None = None, *, wake: bool) -> None:  # fmt: skip
    """Write ``field`` (with ``extra`` settings) of shard i = ``shares[i]``; ``wake``
    (a raised share) raises the shard's signal, so consumers waiting at its limit fetch
    again. The rate's state (its GCRA timestamp) is kept: a share changes the spacing,
    not the debt, so a change of share grants no new burst."""
    pipe = client.pipeline(transaction=False)
    for i, share in shares.items():
        keys = QueueKeys(shards[i])
        pipe.hset(keys.flow, mapping={field: share, **(extra or {})})
        if wake:
            pipe.delete(keys.signal)
            pipe.lpush(keys.signal, "1")
    pipe.execute()


def hold_lease(client: Any, name: str, owner: str, lease_ms: int) -> bool:
    """Whether ``owner`` balances ``name`` (taken when free, renewed when its own)."""
    key = sharded_balancer_key(name)
    if client.set(key, owner, nx=True, px=lease_ms):
        return True
    if as_text(client.get(key) or b"") != owner:
        return False
    client.pexpire(key, lease_ms)  # a stall past the lease could let a second one in
    return True


def drop_lease(client: Any, name: str, owner: str) -> None:
    key = sharded_balancer_key(name)
    if as_text(client.get(key) or b"") == owner:
        client.delete(key)


def balance(client: Any, layout: Layout, limits: QueueWide) -> None:
    """Move the shards' shares of ``limits`` towards their demand, never over the limit."""
    shards = layout.queues
    if limits.concurrency is not None:
        _balance_concurrency(client, shards, limits.concurrency)
    if limits.rate is not None and limits.period is not None:
        _balance_rate(client, shards, limits.rate, limits.period)


def _balance_concurrency(client: Any, shards: Sequence[str], total: int) -> None:
    before = loads(client, shards)
    targets = shard_shares.split(total, [s.ready + s.held for s in before])
    current = [total if s.concurrency is None else s.concurrency for s in before]
    lowered = {i: t for i, (t, c) in enumerate(zip(targets, current)) if t < c}
    if lowered:
        write_shares(client, shards, "concurrency", lowered, wake=False)
        current = [lowered.get(i, c) for i, c in enumerate(current)]
    held = [s.held for s in loads(client, shards)]  # read after the lowering holds
    after = shard_shares.raises(total, held, current, targets)
    raised = {i: a for i, (a, c) in enumerate(zip(after, current)) if a > c}
    if raised:
        write_shares(client, shards, "concurrency", raised, wake=True)


def _balance_rate(client: Any, shards: Sequence[str], total: int, period: int) -> None:
    """Rates are shares of ``total`` per ``period`` ms, at least 1 each (a rate of 0
    cannot be written); a share in another period counts as the whole until rewritten."""
    before = loads(client, shards)
    targets = shard_shares.split(total, [s.ready for s in before], floor=1)
    current = [s.rate if s.rate is not None and s.period == period else total
               for s in before]  # fmt: skip
    # A share moves only by more than a twentieth of the limit (or 1): each raise may
    # grant the shard a burst of its new share, so shares do not follow every jitter.
    step = max(2, total // 20)
    targets = [c if abs(t - c) < step and t > 1 else t for t, c in zip(targets, current)]
    lowered = {i: t for i, (t, c) in enumerate(zip(targets, current)) if t < c}
    if lowered:
        write_shares(client, shards, "rate", lowered, {"period": period}, wake=False)
        current = [lowered.get(i, c) for i, c in enumerate(current)]
    room = total - sum(current)
    raised: dict[int, int] = {}
    for i in sorted(range(len(shards)), key=lambda i: current[i] - targets[i]):
        grow = min(targets[i] - current[i], room)
        if grow > 0:
            raised[i], room = current[i] + grow, room - grow
    if raised:
        write_shares(client, shards, "rate", raised, {"period": period}, wake=True)


def set_queue_limits(client: Any, name: str, admins: Sequence[Any],
                     changes: dict[str, int | None]) -> None:  # fmt: skip
    """``ShardedQueue.set_limits``: the descriptor's figures, and each shard's first share
    (an even split, a fresh rate state), which the balancer then moves to the demand.
    A cleared limit is cleared on every shard."""
    count = len(admins)
    rate = changes.get("rate")
    if rate is not None and rate < count:
        raise ConfigurationError(
            f"a queue-wide rate over the {count} shards of {name!r} needs at least {count} "
            f"jobs per period (one per shard), not {rate}: give a longer period"
        )
    write_queue_limits(client, name, changes)
    per_shard: list[dict[str, int | None]] = [{} for _ in admins]
    if "concurrency" in changes:
        _fill(per_shard, "concurrency", changes["concurrency"], count)
    if "rate" in changes:
        _fill(per_shard, "rate", rate, count)
        for settings in per_shard:
            settings["period"] = changes["period"]
    for admin, settings in zip(admins, per_shard):
        admin.set_limits(settings)


def _fill(per_shard: list[dict[str, int | None]], field: str, total: int | None,
          count: int) -> None:  # fmt: skip
    shares = [None] * count if total is None else shard_shares.even(total, count)
    for settings, share in zip(per_shard, shares):
        settings[field] = share


def merged_flow(flows: Sequence[FlowState], wide: QueueWide) -> FlowState:
    """A sharded queue's flow as one queue's: paused when every shard is, its queue-wide
    limits (each shard holds a share), the jobs held over all shards."""
    rate = None if wide.rate is None or wide.period is None else (wide.rate, wide.period / 1000)
    return FlowState(
        paused=all(flow.paused for flow in flows),
        rate=rate,
        concurrency=wide.concurrency,
        held=sum(flow.held for flow in flows),
        held_back=max(flow.held_back for flow in flows),
    )
