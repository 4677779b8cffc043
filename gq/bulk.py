"""Bulk actions by filter (issue 34): purge ready and scheduled jobs, move jobs to another
queue, retry or delete dead jobs, reschedule scheduled ones. One implementation behind
``gq.Queue``'s methods and the ``gq`` commands (and, later, the dashboard).

Each action walks the queue a bounded page at a time (gq/jobsearch.py) and changes the
jobs a page matched in one script call per page (gq/store/bulk.py), so a crash between
two calls leaves every job either where it was or where it was sent. A dry run walks and
counts, and changes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from gq import job as jobs
from gq.errors import ConfigurationError
from gq.jobfilter import Candidate, JobFilter
from gq.jobsearch import Step, walk
from gq.store import bulk
from gq.store.admin import QueueAdmin
from gq.store.base import chunks
from gq.store.reshard import serving
from gq.store.shards import declared, route_key

T = TypeVar("T")

#: What each action works on when the filter names no state.
PURGE_STATES = ("ready", "scheduled")
MOVE_STATES = ("ready", "scheduled", "dead")


@dataclass(frozen=True)
class BulkResult:
    """What an action did: ``matched`` jobs the filter found, ``done`` the ones changed
    (0 in a dry run), ``conflicts`` the ones a move left because the target holds another
    job with their id."""

    matched: int
    done: int
    conflicts: int = 0


#: An action on one page's matched jobs: the ids it changed (they left their place) and
#: the ids it could not (conflicts).
Apply = Callable[[Step], tuple[set[str], int]]


def run(
    admin: QueueAdmin,
    jobfilter: JobFilter,
    states: Sequence[str],
    apply: Apply,
    dry_run: bool,
    hop: float | None = None,
) -> BulkResult:
    """Walk ``states`` and ``apply`` the action to each page's matches (unless a dry run)."""
    matched = done = conflicts = 0
    for step in walk(admin, jobfilter, jobfilter.within(states), hop=hop):
        matched += len(step.matched)
        if dry_run or not step.matched:
            continue
        step.removed, refused = apply(step)
        done += len(step.removed)
        conflicts += refused
    return BulkResult(matched, 0 if dry_run else done, conflicts)


def unfiltered_guard(jobfilter: JobFilter, everything: bool, verb: str) -> None:
    """Refuse to destroy every job of a state unless the caller said so."""
    if not jobfilter.narrows() and not everything:
        raise ConfigurationError(
            f"this would {verb} every job of the states it covers: narrow the filter, or "
            "pass everything=True (gq: --yes)"
        )


def _window(step: Step) -> bulk.Window:
    return step.page.window or (0, 0)


def _pick(c: Candidate) -> bulk.Pick:
    kind = "line" if c.line_field else c.state
    return kind, c.id, c.line_field, lock_of(c)


def lock_of(c: Candidate) -> str | None:
    """The uniqueness lock a job took (its envelope's ``unique``), None for none."""
    lock = c.envelope.opts.get("unique") if c.envelope is not None else None
    return lock if isinstance(lock, str) else None


def _batched(operation: Callable[[Sequence[T]], list[bool]], items: Sequence[T]) -> list[bool]:
    """An existing script's operation (retry_dead.lua, delete_jobs.lua, run_scheduled.lua)
    over at most ``SCRIPT_BATCH`` jobs a call, as the scripts of bulk actions."""
    return [flag for chunk in chunks(items, bulk.SCRIPT_BATCH) for flag in operation(chunk)]


def _done(step: Step, flags: Sequence[bool]) -> tuple[set[str], int]:
    return {c.id for c, ok in zip(step.matched, flags) if ok}, 0


def _taken(matched: Sequence[Candidate], replies: Sequence[int]) -> tuple[set[str], int]:
    ids = {c.id for c, reply in zip(matched, replies) if reply == 1}
    return ids, sum(1 for reply in replies if reply == -1)


def purge(admin: QueueAdmin, jobfilter: JobFilter, dry_run: bool = False) -> BulkResult:
    """Remove ready and scheduled jobs matching the filter, with their bookkeeping."""

    def apply(step: Step) -> tuple[set[str], int]:
        replies = bulk.purge(admin, _window(step), [_pick(c) for c in step.matched])
        return _taken(step.matched, replies)

    return run(admin, jobfilter, PURGE_STATES, apply, dry_run)


#: Where each job of a move goes: a sharded queue's router (gq/sharded_jobs.py).
Route = Callable[[Candidate], QueueAdmin]


def move(
    admin: QueueAdmin, target: QueueAdmin | Route, jobfilter: JobFilter, dry_run: bool = False
) -> BulkResult:
    """Move ready, scheduled and dead jobs matching the filter to ``target`` (or each to
    the queue ``target`` routes it to), in their state: atomically per page and queue
    when both share a slot, else copy then delete."""
    if isinstance(target, QueueAdmin) and target.keys.name == admin.keys.name:
        raise ConfigurationError(f"cannot move jobs of {admin.keys.name} to the same queue")
    fixed = target
    route: Route = (lambda c: fixed) if isinstance(fixed, QueueAdmin) else fixed

    def apply(step: Step) -> tuple[set[str], int]:
        removed: set[str] = set()
        conflicts = 0
        for queue, part in _by_queue(step.matched, route):
            moved, refused = _move_part(admin, queue, step, part)
            removed |= moved
            conflicts += refused
        return removed, conflicts

    return run(admin, jobfilter, MOVE_STATES, apply, dry_run)


def move_target(client: Any, source: str, to: str) -> QueueAdmin | Route:
    """Where ``gq move --to TO`` sends jobs of queue ``source``: plain queue ``to``, or for a
    sharded ``to`` each job to the shard its producer would have written it to in the
    current layout (gq/tasks/sharding.py's rule: its group, else its uniqueness lock,
    else its id; its id then finds it, or for a grouped or unique one, asking every
    shard does)."""
    count = declared(client, [to]).get(to)
    if count is None:
        return QueueAdmin(client, to)
    plan = serving(client, to, count).current
    if source in plan.queues:
        raise ConfigurationError(f"{source} is a shard of sharded queue {to}: move its jobs "
                                 "to another queue")  # fmt: skip
    shards = {shard: QueueAdmin(client, shard) for shard in plan.queues}
    return lambda c: shards[plan.for_key(c.group or lock_of(c) or route_key(c.id))]


def _by_queue(matched: Sequence[Candidate],
              route: Route) -> list[tuple[QueueAdmin, list[Candidate]]]:  # fmt: skip
    """The page's jobs grouped by the queue each goes to, in order of first appearance."""
    parts: dict[str, tuple[QueueAdmin, list[Candidate]]] = {}
    for c in matched:
        queue = route(c)
        parts.setdefault(queue.keys.name, (queue, []))[1].append(c)
    return list(parts.values())


def _move_part(admin: QueueAdmin, target: QueueAdmin, step: Step,
               part: list[Candidate]) -> tuple[set[str], int]:  # fmt: skip
    if bulk.same_slot(admin, target.keys.name):
        replies = bulk.move(admin, target.keys.name, _window(step), [_pick(c) for c in part])
        return _taken(part, replies)
    return _copy_then_delete(admin, target, step, part)


def _copy_then_delete(admin: QueueAdmin, target: QueueAdmin, step: Step,
                      part: list[Candidate]) -> tuple[set[str], int]:  # fmt: skip
    """Across slots: copy the jobs in (a copy made before a crash is recognised by its
    id and message), then remove from the source those the target holds."""
    have = [c for c in part if c.message is not None]
    copies = [(_pick(c)[0], c.id, c.message or b"", c.score, c.group or "") for c in have]
    stored = bulk.move_in(target, copies)
    sent = [c for c, reply in zip(have, stored) if reply > 0]
    replies = bulk.purge(admin, _window(step), [_pick(c)[:3] + (None,) for c in sent])
    removed = {c.id for c, reply in zip(sent, replies) if reply == 1}
    return removed, sum(1 for reply in stored if reply == -1)


def retry_dead(
    admin: QueueAdmin, jobfilter: JobFilter, reset: bool = False, dry_run: bool = False
) -> BulkResult:
    """Queue again the dead jobs matching the filter (retry_dead.lua); ``reset``: with
    their attempts back to 0."""

    def apply(step: Step) -> tuple[set[str], int]:
        entries = [(c.id, reset_attempts(c.message) if reset else None) for c in step.matched]
        return _done(step, _batched(admin.retry_dead, entries))

    return run(admin, jobfilter, ("dead",), apply, dry_run)


def delete_dead(admin: QueueAdmin, jobfilter: JobFilter, dry_run: bool = False) -> BulkResult:
    """Delete the dead jobs matching the filter and free their ids (delete_jobs.lua)."""

    def apply(step: Step) -> tuple[set[str], int]:
        return _done(step, _batched(admin.delete_dead, [c.id for c in step.matched]))

    return run(admin, jobfilter, ("dead",), apply, dry_run)


def run_scheduled(admin: QueueAdmin, jobfilter: JobFilter, dry_run: bool = False) -> BulkResult:
    """Run now the scheduled jobs matching the filter: to the tail of the queue, a grouped
    one to its group's line (run_scheduled.lua, the dashboard's "run now")."""

    def apply(step: Step) -> tuple[set[str], int]:
        return _done(step, _batched(admin.run_scheduled, [c.id for c in step.matched]))

    return run(admin, jobfilter, ("scheduled",), apply, dry_run)


def reschedule(
    admin: QueueAdmin,
    jobfilter: JobFilter,
    at: float,
    *,
    relative: bool = False,
    dry_run: bool = False,
) -> BulkResult:
    """Give the scheduled jobs matching the filter the due time ``at`` (unix seconds; a
    delay from the server's now when ``relative``, taken once, so that every job gets the
    same time and a job met again later in the walk is not moved twice)."""
    when = admin.server_time() + at if relative else at

    def apply(step: Step) -> tuple[set[str], int]:
        flags = bulk.reschedule(admin, [c.id for c in step.matched], when, relative=False)
        return _done(step, flags)

    return run(admin, jobfilter, ("scheduled",), apply, dry_run, hop=when)


def reset_attempts(message: bytes | None) -> bytes | None:
    """The message with its attempts back to 0; None (keep it) if it cannot be read."""
    if message is None:
        return None
    try:
        job = jobs.decode(message)
    except jobs.MessageDecodeError:
        return None
    return jobs.encode(jobs.Job(id=job.id, data=job.data, attempt=0))
