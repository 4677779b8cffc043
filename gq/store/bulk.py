"""The Redis side of gq's bulk actions (issue 34): one typed call per script over a page of
jobs a scan found (gq/store/scan.py), each call one atomic Lua script over a bounded batch
that declares every key: purge.lua, move.lua (one Cluster slot), move_in.lua (the copy of
a move across slots) and reschedule.lua. Retrying and deleting dead jobs reuse
retry_dead.lua and delete_jobs.lua (``QueueAdmin``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from redis.crc import key_slot

from gq.store.admin import QueueAdmin
from gq.store.base import chunks, flags
from gq.store.groupkeys import group_keys
from gq.store.keys import QueueKeys

#: Jobs per script call: a page of a scan (500) goes in a few calls, so that no call holds
#: Redis for more than a couple of milliseconds (benchmarks/ops.py measures it).
SCRIPT_BATCH = 200

#: A job to take: (kind: "ready", "line", "scheduled" or "dead"; id; the groups' lines
#: field that holds it, "" unless a line; the uniqueness lock it took, None for none).
Pick = tuple[str, str, str, "str | None"]
#: A job to copy in: (kind, id, message, score or None, group or "").
Copy = tuple[str, str, bytes, "float | None", str]
#: The ready window a page read: (offset from the active list's tail, length).
Window = tuple[int, int]


def purge(admin: QueueAdmin, window: Window, picks: Sequence[Pick]) -> list[int]:
    """Remove each job still where it was found, with its bookkeeping: 1 removed, 0 not."""
    return [flag for chunk in chunks(picks, SCRIPT_BATCH) for flag in _purge(admin, window, chunk)]


def _purge(admin: QueueAdmin, window: Window, picks: Sequence[Pick]) -> list[int]:
    k = admin.keys
    keys = [k.active, k.scheduled, k.dead, k.data, k.recovered, k.cancelled,
            *group_keys(k.name)]  # fmt: skip
    locks = sorted({lock for *_, lock in picks if lock})
    index = {lock: len(keys) + i + 1 for i, lock in enumerate(locks)}
    args: list[Any] = [*window]
    for kind, job_id, field, lock in picks:
        args += [kind, job_id, field, index.get(lock or "", 0)]
    keys += [k.unique(lock) for lock in locks]
    return [int(n) for n in admin._run("purge", keys, args)]


def same_slot(admin: QueueAdmin, target: str) -> bool:
    """Whether queue ``target``'s keys live where the admin's do (one script can move)."""
    if not admin.cluster:
        return True
    return key_slot(admin.keys.data.encode()) == key_slot(QueueKeys(target).data.encode())


def move(admin: QueueAdmin, target: str, window: Window, picks: Sequence[Pick]) -> list[int]:
    """Move each job still where it was found to queue ``target`` (same slot), in one
    script per batch: 1 moved, 0 not found, -1 the target holds another job with its id."""
    k, t = admin.keys, QueueKeys(target)
    keys = [k.active, k.scheduled, k.dead, k.data, k.recovered, k.cancelled,
            *group_keys(k.name), t.active, t.scheduled, t.dead, t.data, t.signal, t.cancelled,
            *group_keys(t.name)]  # fmt: skip
    replies = []
    for chunk in chunks(picks, SCRIPT_BATCH):
        args: list[Any] = [
            *window,
            *(part for kind, i, field, _ in chunk for part in (kind, i, field)),
        ]
        replies += [int(n) for n in admin._run("move", keys, args)]
    return replies


def move_in(target: QueueAdmin, copies: Sequence[Copy]) -> list[int]:
    """Store each job in ``target`` unless its id is there: 1 stored, 2 there already
    with the same message, -1 another job holds the id."""
    t = target.keys
    keys = [t.active, t.scheduled, t.dead, t.data, t.signal, t.cancelled, *group_keys(t.name)]
    replies = []
    for chunk in chunks(copies, SCRIPT_BATCH):
        args: list[Any] = []
        for kind, job_id, message, score, group in chunk:
            args += [kind, job_id, message, "" if score is None else repr(score), group]
        replies += [int(n) for n in target._run("move_in", keys, args)]
    return replies


def reschedule(admin: QueueAdmin, ids: Sequence[str], at: float, *, relative: bool) -> list[bool]:
    """Give each still-scheduled job the due time ``at`` (unix seconds, or a delay on the
    server's clock when ``relative``); True per id rescheduled."""
    mode = "after" if relative else "at"
    batches = [[mode, repr(float(at)), *chunk] for chunk in chunks(ids, SCRIPT_BATCH)]
    if not batches:
        return []
    return flags(admin._run_batches("reschedule", [admin.keys.scheduled], batches))
