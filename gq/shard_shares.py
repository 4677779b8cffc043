"""How a queue-wide limit of a sharded queue is split into its shards' own limits
(docs/deployment.md, "One queue over many masters": "Queue-wide limits"). Pure
arithmetic: gq/store/shard_limits.py applies the split, gq/worker/shard_limits.py runs it.

``split`` water-fills the limit by demand: every shard gets what it asks for while the
limit allows, the busier shards share what the others leave, and what is left over goes
in proportion to the demand (evenly when no shard has any), so that the busy shards run
at the whole limit while the others are idle.
"""

from __future__ import annotations

from collections.abc import Sequence


def split(total: int, demands: Sequence[int], floor: int = 0) -> list[int]:
    """``total`` split over ``len(demands)`` shards: ``floor`` each first, then each
    shard up to its demand (the largest demands last to be cut), then what is left
    evenly. The shares sum to ``total`` (``total >= floor * len(demands)``)."""
    count = len(demands)
    shares = [floor] * count
    left = _water_fill(total - floor * count, [max(0, d - floor) for d in demands], shares)
    _spread(left, shares, demands)
    return shares


def even(total: int, count: int) -> list[int]:
    """``total`` split as evenly as whole numbers allow (the first shards get the extra)."""
    return [total // count + (1 if i < total % count else 0) for i in range(count)]


def _water_fill(left: int, needs: list[int], shares: list[int]) -> int:
    """Add to ``shares`` up to each one's need, level by level; what is left over."""
    wanting = [i for i, need in enumerate(needs) if need > 0]
    while left > 0 and wanting:
        level = left // len(wanting)
        if level == 0:  # fewer units than shards wanting: to the largest needs
            for i in sorted(wanting, key=lambda i: -needs[i])[:left]:
                shares[i] += 1
            return 0
        for i in wanting:
            given = min(level, needs[i])
            shares[i] += given
            needs[i] -= given
            left -= given
        wanting = [i for i in wanting if needs[i] > 0]
    return left


def _spread(left: int, shares: list[int], demands: Sequence[int]) -> None:
    """Spread ``left`` in proportion to the demands (evenly when none has any), the
    largest remainders first, so that a busy shard keeps what an idle one does not use."""
    weights = list(demands) if any(d > 0 for d in demands) else [1] * len(shares)
    whole = sum(weights)
    exact = [left * w / whole for w in weights]
    given = [int(x) for x in exact]
    order = sorted(range(len(shares)), key=lambda i: (given[i] - exact[i], -weights[i]))
    for i in order[: left - sum(given)]:
        given[i] += 1
    for i, extra in enumerate(given):
        shares[i] += extra


def committed(held: Sequence[int], shares: Sequence[int]) -> list[int]:
    """What each shard may still come to hold: a shard over its share (just lowered)
    only goes down to it, one under it may go up to it."""
    return [max(h, s) for h, s in zip(held, shares)]


def raises(total: int, held: Sequence[int], shares: Sequence[int],
           targets: Sequence[int]) -> list[int]:  # fmt: skip
    """The shares after raising those below their target, within the room ``total``
    leaves over every shard's ``committed`` figure (the lowered ones written first), so
    that the shards together never hold more than ``total``."""
    after = list(shares)
    room = total - sum(committed(held, shares))
    for i in sorted(range(len(shares)), key=lambda i: shares[i] - targets[i]):
        if targets[i] <= shares[i] or room <= 0:
            continue
        now = max(held[i], shares[i])
        grown = min(targets[i], now + room)
        room -= max(0, grown - now)
        after[i] = max(grown, shares[i])
    return after
