"""The groups' side of the Redis boundary (SPEC section 17): writing grouped jobs
(push_group.lua), setting group limits (group_limits.lua) and reading what the groups
hold for ``gq stats`` and the dashboard. The scripts and the meaning of each key are in
gq/scripts/lib/groups.lua."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gq.store.base import (
    ScriptedQueue,
    as_text,
    chunks,
    flags,
    full_queue_errors,
    held_back,
    rate_setting,
)
from gq.store.groupkeys import group_key, group_keys
from gq.store.keys import QueueKeys

#: (id, message, time, group or "" for none): one job of push_group.lua.
GroupEntry = tuple[str, bytes, float, str]
# Groups brought back from parking per group_limits.lua call.
UNPARK_PAGE = 1000
# A field name's separator in the state and limits hashes (lib/groups.lua).
_SEP = "\n"


def push_group_calls(keys: QueueKeys, mode: str, entries: Sequence[GroupEntry]) -> tuple[
    list[str], list[list[Any]]
]:
    """The KEYS and each call's ARGV of push_group.lua, for the blocking and the asyncio
    producer alike: ``mode`` "now", "at" or "after"."""
    head = [keys.data, keys.scheduled, keys.signal, keys.flow, keys.cancelled, keys.active]
    batches = []
    for chunk in chunks(entries):
        args: list[Any] = [mode]
        for id_, message, at, group in chunk:
            args += [id_, message, repr(float(at)), group]
        batches.append(args)
    return [*head, *group_keys(keys.name), *keys.event_keys], batches


def push_group(queue: ScriptedQueue, mode: str, entries: Sequence[GroupEntry]) -> list[bool]:
    """Store each job whose id is new, in its group's line (or scheduled with its group);
    True where stored."""
    keys, batches = push_group_calls(queue.keys, mode, entries)
    with full_queue_errors():
        return flags(queue._run_batches("push_group", keys, batches))


def set_group_limits(queue: ScriptedQueue, group: str, changes: dict[str, int | None]) -> None:
    """Set (a number) or clear (None) "concurrency", "rate", "period" (ms) of every group
    (``group`` "") or of one group's own, waking the groups parked at their limit."""
    args: list[Any] = [group]
    for name, value in changes.items():
        args += [name, "" if value is None else value]
    keys = [queue.keys.signal, *group_keys(queue.keys.name)]
    while int(queue._run("group_limits", keys, args)) == UNPARK_PAGE:
        args = args[:1]  # the settings are written: only the unparking goes on


@dataclass(frozen=True)
class GroupLimits:
    """Limits as stored: ``rate`` (jobs, seconds) or None, ``concurrency`` or None."""

    rate: tuple[int, float] | None
    concurrency: int | None


def group_limits(queue: ScriptedQueue, group: str) -> GroupLimits:
    """Every group's limits (``group`` ""), or one group's own (None where it has none)."""
    suffix = _SEP + group if group else ""
    fields = [f"concurrency{suffix}", f"rate{suffix}", f"period{suffix}"]
    concurrency, rate, period = queue.client.hmget(group_key(queue.keys.name, "limits"), fields)
    limit = None if concurrency is None else int(concurrency)
    return GroupLimits(rate_setting(rate, period), limit)


@dataclass(frozen=True)
class GroupRow:
    """One group as ``gq stats`` shows it: jobs waiting and held, its limits in force
    (its own, else every group's), and how long a RateLimited(group=True) still holds it."""

    group: str
    waiting: int
    held: int
    concurrency: int | None
    rate: tuple[int, float] | None
    held_back: float


def waiting_groups(queue: ScriptedQueue) -> dict[str, int]:
    """Every group with jobs waiting -> how many: the groups in the ring and the parked
    ones, then their lines' ends, in a few round trips (work grows with the number of
    groups, not of jobs; for ``gq stats`` and the dashboard, never on a worker's path)."""
    name = queue.keys.name
    client = queue.client
    pipe: Any = client.pipeline(transaction=False)  # (the Protocol lists what workers queue)
    pipe.lrange(group_key(name, "ring"), 0, -1)
    pipe.zrange(group_key(name, "parked"), 0, -1)
    ring, parked = pipe.execute()
    groups = list(dict.fromkeys(as_text(g) for g in [*ring, *parked]))
    counts: dict[str, int] = {}
    lines = group_key(name, "lines")
    for chunk in chunks(groups):
        fields = [field for group in chunk for field in (group, f"{group}{_SEP}end")]
        spans = client.hmget(lines, fields)
        for k, group in enumerate(chunk):
            head, end = spans[2 * k], spans[2 * k + 1]
            if head is not None and end is not None and int(end) > int(head):
                counts[group] = int(end) - int(head)
    return counts


def busiest(queue: ScriptedQueue, count: int) -> tuple[int, list[GroupRow]]:
    """(groups with jobs waiting, the ``count`` with the most waiting, most first)."""
    name = queue.keys.name
    counts = waiting_groups(queue)
    top = sorted(counts.items(), key=lambda item: (-item[1], item[0]))[:count]
    pipe = queue.client.pipeline(transaction=False)
    limits, state = group_key(name, "limits"), group_key(name, "state")
    pipe.hmget(limits, ["concurrency", "rate", "period"])
    for group, _ in top:
        pipe.hmget(limits, [f"concurrency{_SEP}{group}", f"rate{_SEP}{group}",
                            f"period{_SEP}{group}"])  # fmt: skip
        pipe.hmget(state, [f"held{_SEP}{group}", f"hold{_SEP}{group}"])
    defaults, *rest = pipe.execute()
    now_ms = queue.server_time() * 1000
    rows = []
    for i, (group, waiting) in enumerate(top):
        concurrency, rate, period = rest[2 * i]
        held, hold = rest[2 * i + 1]
        concurrency = concurrency if concurrency is not None else defaults[0]
        rows.append(GroupRow(
            group, waiting, int(held or 0), None if concurrency is None else int(concurrency),
            rate_setting(rate, period) if rate is not None else rate_setting(*defaults[1:]),
            held_back(hold, now_ms),
        ))  # fmt: skip
    return len(counts), rows
