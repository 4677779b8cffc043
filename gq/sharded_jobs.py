"""Jobs of a sharded queue found and changed by filter or by id (docs/deployment.md, "One
queue over many masters"): what ``gq jobs``, ``gq purge``, ``gq move``, ``gq dead
retry|delete`` and ``gq scheduled run|reschedule|delete`` do over every shard.

- **By filter**: each action runs shard by shard, its counts summed. A search merges the
  shards' pages by time (state by state, in the search's order of states) and its cursor
  holds each shard's own, so that the next page resumes every shard where it stopped.
- **By id**: each id is asked of the shard its id routes to; the ids not found there (a
  grouped or unique job given its own id routes by its group or lock) of the others.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from gq import bulk, history, sharded_reads
from gq.errors import ConfigurationError
from gq.jobfilter import JobFilter
from gq.jobsearch import SEARCH_STATES, FoundJob, SearchPage
from gq.store.admin import Entry, QueueAdmin
from gq.store.shards import Layout

if TYPE_CHECKING:
    from gq.queue import Queue

#: A sharded search cursor starts with this (a shard's own never does).
CURSOR_MARK = "shards:"
#: A shard's place in a sharded cursor before its first page.
_START = ""

IdCall = Callable[[QueueAdmin, list[str]], Sequence[Any]]


class ShardedJobs:
    """``gq.Queue``'s methods on jobs by filter, over ``self.shards`` (a ShardedQueue)."""

    name: str
    shards: list[Queue]

    def jobs(self, filter: JobFilter | None = None, limit: int = 50, cursor: str | None = None,
             budget: float | None = None) -> SearchPage:  # fmt: skip
        """Up to ``limit`` jobs of all shards matching ``filter``, merged by time; the
        cursor goes on over every shard. The state "finished" lists their merged history."""
        if filter is not None and "finished" in filter.states:
            found = sharded_reads.history_page(self.shards, filter, limit, cursor)
            return history.search_page(found)
        return search(self.shards, filter or JobFilter(), limit, cursor, budget)

    def purge(self, filter: JobFilter, *, dry_run: bool = False,
              everything: bool = False) -> bulk.BulkResult:  # fmt: skip
        bulk.unfiltered_guard(filter, everything or dry_run, "purge")
        return summed(s.purge(filter, dry_run=dry_run, everything=True) for s in self.shards)

    def move(self, filter: JobFilter, *, to: str, dry_run: bool = False) -> bulk.BulkResult:
        """Move the matching jobs of every shard to queue ``to`` (each job to its shard
        there when ``to`` is sharded: ``bulk.move_target``)."""
        if to == self.name:
            raise ConfigurationError(f"cannot move jobs of {self.name} to the same queue")
        return summed(s.move(filter, to=to, dry_run=dry_run) for s in self.shards)

    def retry_dead(self, filter: JobFilter, *, reset_attempts: bool = False,
                   dry_run: bool = False) -> bulk.BulkResult:  # fmt: skip
        return summed(s.retry_dead(filter, reset_attempts=reset_attempts, dry_run=dry_run)
                      for s in self.shards)  # fmt: skip

    def delete_dead(self, filter: JobFilter, *, dry_run: bool = False,
                    everything: bool = False) -> bulk.BulkResult:  # fmt: skip
        bulk.unfiltered_guard(filter, everything or dry_run, "delete")
        return summed(s.delete_dead(filter, dry_run=dry_run, everything=True) for s in self.shards)

    def run_scheduled(self, filter: JobFilter, *, dry_run: bool = False) -> bulk.BulkResult:
        return summed(s.run_scheduled(filter, dry_run=dry_run) for s in self.shards)

    def reschedule(
        self, filter: JobFilter, *, at: float | None = None, after: float | None = None,
        dry_run: bool = False,
    ) -> bulk.BulkResult:  # fmt: skip
        if (at is None) == (after is None):
            raise ConfigurationError("reschedule needs one of at= and after=")
        return summed(s.reschedule(filter, at=at, after=after, dry_run=dry_run)
                      for s in self.shards)  # fmt: skip


def summed(results: Any) -> bulk.BulkResult:
    """The shards' results of one action added up."""
    every = list(results)
    return bulk.BulkResult(sum(r.matched for r in every), sum(r.done for r in every),
                           sum(r.conflicts for r in every))  # fmt: skip


# -- the merged search ----------------------------------------------------------------


def search(shards: list[Queue], jobfilter: JobFilter, limit: int, cursor: str | None,
           budget: float | None) -> SearchPage:  # fmt: skip
    """A page of every shard from ``cursor`` (each shard's own place), merged by time."""
    places = decode(cursor, len(shards))
    pages = {i: shards[i].jobs(jobfilter, limit, place or None, budget)
             for i, place in enumerate(places) if place is not None}  # fmt: skip
    states = jobfilter.within(SEARCH_STATES)
    streams = [[(_order(job, states), i, job) for job in page.jobs] for i, page in pages.items()]
    shown = list(itertools.islice(heapq.merge(*streams, key=lambda row: row[0]), limit))
    taken = [sum(1 for _, i, _ in shown if i == shard) for shard in range(len(shards))]
    after = [_after(shards[i], jobfilter, places[i], pages.get(i), taken[i])
             for i in range(len(shards))]  # fmt: skip
    more = any(place is not None for place in after)
    return SearchPage([job for _, _, job in shown], encode(after) if more else None)


def _after(shard: Queue, jobfilter: JobFilter, place: str | None, page: SearchPage | None,
           taken: int) -> str | None:  # fmt: skip
    """Shard's place after ``taken`` of its ``page`` were shown (a prefix of it: merged)."""
    if page is None:
        return place
    if taken == len(page.jobs):  # all shown (or none found): where the shard's page ended
        return page.cursor
    if taken == 0:
        return place
    # Cut inside the page: the place after exactly ``taken`` matches (one more read).
    return shard.jobs(jobfilter, taken, place or None).cursor


def _order(job: FoundJob, states: Sequence[str]) -> tuple[int, float]:
    """A job's place in the merge: its state's turn, then its time as a shard's walk
    orders it: scheduled soonest first, the others newest first (ready by enqueue time,
    dead by death; grouped and running jobs come in no order of time on a shard either)."""
    if job.state == "scheduled":
        return states.index("scheduled"), job.due_at or 0.0
    when = job.died_at if job.state == "dead" else job.enqueued_at
    return states.index(job.state), -(when or 0.0)


def encode(places: list[str | None]) -> str:
    text = json.dumps(places, separators=(",", ":")).encode()
    return CURSOR_MARK + base64.urlsafe_b64encode(text).decode()


def decode(cursor: str | None, shards: int) -> list[str | None]:
    """Each shard's place in ``cursor`` (None: its walk is over); every start if None."""
    if cursor is None:
        return [_START] * shards
    try:
        places = json.loads(base64.urlsafe_b64decode(cursor[len(CURSOR_MARK) :].encode()))
        ok = cursor.startswith(CURSOR_MARK) and len(places) == shards
        ok = ok and all(p is None or isinstance(p, str) for p in places)
    except ValueError:
        ok = False
    if not ok:
        raise ConfigurationError(f"not a search cursor of this {shards}-shard queue: {cursor!r}")
    return list(places)


# -- by id ----------------------------------------------------------------------------


def routed(plan: Layout, admins: dict[str, QueueAdmin], ids: Sequence[str], call: IdCall,
           found: Callable[[Any], bool] = bool) -> list[Any]:  # fmt: skip
    """``call`` on each id's own shard, then the ids not ``found`` there on the others;
    each id's outcome, in order (the first found, else its own shard's)."""
    outcome: dict[str, Any] = {}
    for shard, part in _by_shard(plan, ids).items():
        outcome.update(zip(part, call(admins[shard], part)))
    for shard, admin in admins.items():
        left = [i for i in dict.fromkeys(ids) if not found(outcome[i]) and plan.for_id(i) != shard]
        hits = [(i, out) for i, out in zip(left, call(admin, left) if left else []) if found(out)]
        outcome.update(hits)
    return [outcome[job_id] for job_id in ids]


def _by_shard(plan: Layout, ids: Sequence[str]) -> dict[str, list[str]]:
    parts: dict[str, list[str]] = {}
    for job_id in dict.fromkeys(ids):
        parts.setdefault(plan.for_id(job_id), []).append(job_id)
    return parts


class ShardedIds:
    """The reads and writes by id that ``gq dead|scheduled ...`` make of ``queue.store``,
    over the shards of a ShardedAdmin (``plan``, ``by_name``: each shard's QueueAdmin)."""

    plan: Layout
    by_name: dict[str, QueueAdmin]

    def exists(self) -> bool:
        return any(admin.exists() for admin in self.by_name.values())

    def messages(self, ids: Sequence[str]) -> list[bytes | None]:
        return routed(self.plan, self.by_name, ids, lambda a, part: a.messages(part),
                      lambda message: message is not None)  # fmt: skip

    def retry_dead(self, entries: Sequence[tuple[str, bytes | None]]) -> list[bool]:
        """Each dead job back to the tail of its shard (with ``entries``' message if any)."""
        given = dict(entries)
        return routed(self.plan, self.by_name, list(given),
                      lambda a, part: a.retry_dead([(i, given[i]) for i in part]))  # fmt: skip

    def delete_dead(self, ids: Sequence[str]) -> list[bool]:
        return routed(self.plan, self.by_name, ids, lambda a, part: a.delete_dead(part))

    def delete_scheduled(self, ids: Sequence[str]) -> list[bool]:
        return routed(self.plan, self.by_name, ids, lambda a, part: a.delete_scheduled(part))

    def run_scheduled(self, ids: Sequence[str]) -> list[bool]:
        return routed(self.plan, self.by_name, ids, lambda a, part: a.run_scheduled(part))

    def cancel(self, ids: Sequence[str]) -> list[str]:
        """Each job cancelled where it is: "removed", "requested" or "" (QueueAdmin.cancel)."""
        return routed(self.plan, self.by_name, ids, lambda a, part: a.cancel(part))

    def dead_page(self, offset: int, count: int) -> list[Entry]:
        """Dead jobs of all shards from ``offset``, newest first (each shard read from its
        head: a page deep in the list costs its offset)."""
        pages = [a.dead_page(0, offset + count) for a in self.by_name.values()]
        return _window(pages, offset, count, lambda entry: -entry[1])

    def scheduled_page(self, offset: int, count: int) -> list[Entry]:
        """Scheduled jobs of all shards from ``offset``, soonest first."""
        pages = [a.scheduled_page(0, offset + count) for a in self.by_name.values()]
        return _window(pages, offset, count, lambda entry: entry[1])

    def work_through(self, state: str, operation: Callable[[Sequence[str]], list[bool]]) -> int:
        """``operation`` (this object's, routed by id) over each shard's set in turn."""
        return sum(admin.work_through(state, operation) for admin in self.by_name.values())


def _window(pages: list[list[Entry]], offset: int, count: int,
            key: Callable[[Entry], float]) -> list[Entry]:  # fmt: skip
    """Entries ``offset`` to ``offset + count`` of the shards' sorted ``pages`` merged."""
    if count <= 0 or offset < 0:
        return []
    return list(itertools.islice(heapq.merge(*pages, key=key), offset, offset + count))
