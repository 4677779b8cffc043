"""The history of finished jobs (issue 34): what ended on a queue, newest first.

The scripts that end a job write its entry in the same call (gq/scripts/lib/history.lua):
the list ``<queue>:finished``, oldest first (pushed at its tail); an entry is the server
time it ended (ms), its state, its id and the job's message as it was stored
(its task, its arguments, its Attempt, a dead job's Error). Its bounds live in Redis, in
``<queue>:finished:settings`` ("max" entries, "ttl" seconds), so that every consumer and
every operator sees the same (``gq history --queue Q --set-max N --set-ttl 2d``).

A page reads the list from its tail, from a cursor (an entry's number: the count of
entries written before it, which the reader works out from the count Redis keeps of all
ever written, read with each chunk), in bounded chunks (LRANGE with negative indexes), and
the kept result records of its entries in two more round trips: an entry whose task kept
a result links to it, and gets the start of its run (its ``duration``) from it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from gq import jobsearch
from gq.errors import ConfigurationError
from gq.jobfilter import Candidate, JobFilter
from gq.store.base import ScriptedQueue, as_text
from gq.store.outcomes import _look_for, _records

#: The defaults of lib/history.lua: entries kept per queue, and for how long (seconds).
HISTORY_MAX = 10000
HISTORY_TTL = 86400.0
#: The states of the history, by the letter lib/history.lua writes.
STATES = {b"d": "done", b"x": "dead", b"c": "cancelled", b"i": "cancelled"}
FINISHED = ("done", "dead", "cancelled")
#: The entries whose stored message counts no run of the one that ended: a run that
#: failed for good is counted in the message kill.lua stores; a job cancelled before
#: it ran never did.
_COUNTED = (b"x", b"c")
#: Entries read per round trip, and at most per page (a narrow filter returns a cursor).
CHUNK = 200
SCAN_MAX = 5000
ERROR_CHARS = 500


@dataclass(frozen=True)
class HistoryEntry:
    """One job that ended: its times are unix seconds (server clock), None when unknown."""

    id: str
    task: str | None  # None for a byte job
    state: str  # done, dead or cancelled
    args: str | None  # the arguments as text (cut), None when the message was not kept
    enqueued_at: float | None
    started_at: float | None  # known when its task kept a result
    finished_at: float
    attempts: int | None  # runs, this one included
    error: str | None  # a dead job's last error, cut to ERROR_CHARS
    result_kept: bool  # gq job ID / the dashboard's result page has it
    shard: str | None = None  # the shard it ended on, on a sharded queue's page
    call: tuple[list[Any], dict[str, Any]] | None = None  # a task's arguments as sent

    @property
    def duration(self) -> float | None:
        """How long its last run took (seconds), when its start is known."""
        return None if self.started_at is None else max(0.0, self.finished_at - self.started_at)

    @property
    def total(self) -> float | None:
        """From its enqueue to its end (seconds), when its enqueue time is known."""
        return None if self.enqueued_at is None else max(0.0, self.finished_at - self.enqueued_at)

    def as_dict(self) -> dict[str, Any]:
        """Its fields and durations (``shard`` only on a sharded queue's page)."""
        shown = {k: v for k, v in self.__dict__.items() if k != "shard" or v is not None}
        return {**shown, "duration": self.duration, "total": self.total}

    def as_json(self) -> dict[str, Any]:
        """What ``--json`` prints: ``args`` and ``kwargs`` as the task was called (None for
        a byte job or a message not kept), ``args_text`` as the table shows them."""
        return jobsearch.call_fields(self.as_dict())


@dataclass(frozen=True)
class HistoryPage:
    """Entries, newest first, and the cursor to go on from (None: the end)."""

    entries: list[HistoryEntry]
    cursor: str | None


class Ended(Candidate):
    """A history entry as a JobFilter reads it: its age is its end."""

    ran = 1  # the run that ended, when its message does not count it yet
    number = 0  # its place in the history (lib/history.lua): a cursor names one

    @property
    def age_time(self) -> float | None:
        return self.score


def decode_member(member: bytes, number: int) -> Ended:
    """The candidate of one stored entry (lib/history.lua's layout), the ``number``-th
    written."""
    size = member[14] * 256 + member[15]
    job_id = member[16 : 16 + size].decode("utf-8", "surrogateescape")
    state = member[13:14]
    found = Ended(job_id, STATES.get(state, "done"), int(member[:13]) / 1000,
                  member[16 + size :] or None)  # fmt: skip
    found.number = number
    found.ran = 0 if state in _COUNTED else 1
    return found


def settings(queue: ScriptedQueue) -> tuple[int, float]:
    """The history's bounds: (max entries, ttl seconds); 0 in either: no history."""
    found = queue.client.hmget(queue.keys.finished_settings, ["max", "ttl"])
    max_, ttl = (as_text(v) if v is not None else None for v in found)
    return (HISTORY_MAX if max_ is None else int(max_),
            HISTORY_TTL if ttl is None else float(ttl))  # fmt: skip


def configure(queue: ScriptedQueue, history_max: int | None = None,
              history_ttl: float | None = None) -> tuple[int, float]:  # fmt: skip
    """Set the history's bounds for every consumer of the queue; 0 turns it off."""
    fields: dict[str, str] = {}
    if history_max is not None:
        if isinstance(history_max, bool) or not isinstance(history_max, int) or history_max < 0:
            raise ConfigurationError(f"history_max must be an int >= 0, not {history_max!r}")
        fields["max"] = str(history_max)
    if history_ttl is not None:
        if not history_ttl >= 0:
            raise ConfigurationError(f"history_ttl must be seconds >= 0, not {history_ttl!r}")
        fields["ttl"] = str(math.ceil(history_ttl))  # (whole seconds: PEXPIRE takes ms)
    if fields:
        client: Any = queue.client  # (the protocol of gq.store.base names fewer commands)
        client.hset(queue.keys.finished_settings, mapping=fields)
    return settings(queue)


def states_of(jobfilter: JobFilter) -> frozenset[str]:
    """The history states a filter names ("finished": all of them)."""
    named = set(jobfilter.states)
    refused = named - {"finished", *FINISHED}
    if refused:
        raise ConfigurationError(
            f"state {sorted(refused)[0]!r} is not in the history: finished, {', '.join(FINISHED)}"
        )
    return frozenset(FINISHED) if not named or "finished" in named else frozenset(named)


def _wanted_number(cursor: str | None) -> int | None:
    """A cursor: the number of the next entry to read (None: the newest)."""
    if cursor is None:
        return None
    try:
        return int(cursor)
    except ValueError:
        raise ConfigurationError(f"not a gq history cursor: {cursor!r}") from None


def page(queue: ScriptedQueue, jobfilter: JobFilter | None = None, limit: int = 50,
         cursor: str | None = None) -> HistoryPage:  # fmt: skip
    """Up to ``limit`` entries matching ``jobfilter``, newest first, from ``cursor``; a
    page reads at most SCAN_MAX entries (a narrow filter may return fewer with a cursor)."""
    matched, wanted = scan(queue, jobfilter, limit, _wanted_number(cursor))
    return HistoryPage(entries(queue, matched), None if wanted is None else str(wanted))


def scan(queue: ScriptedQueue, jobfilter: JobFilter | None, limit: int,
         wanted: int | None) -> tuple[list[Ended], int | None]:  # fmt: skip
    """Up to ``limit`` stored entries matching ``jobfilter``, newest first, from entry
    number ``wanted`` (None: the newest), and the number to go on from (None: the end).
    A sharded queue's page merges the shards' scans (gq/sharded_reads.py)."""
    if limit < 1:
        raise ConfigurationError(f"a history page's limit must be at least 1, not {limit!r}")
    jobfilter = jobfilter or JobFilter()
    states_of(jobfilter)  # (a state outside the history is refused before any read)
    now, read = queue.server_time(), 0
    matched: list[Ended] = []
    while len(matched) < limit and read < SCAN_MAX and (wanted is None or wanted >= 0):
        rows, newest = _chunk(queue, wanted)
        for k, row in enumerate(rows):
            found = decode_member(row, newest - k)
            read, wanted = read + 1, found.number - 1
            if _keeps(found, jobfilter, now):
                matched.append(found)
                if len(matched) == limit:
                    break
        # The head, read to its end (wanted None: nothing was there to read).
        if len(rows) < CHUNK and (wanted is None or wanted == newest - len(rows)):
            return matched, None
    return matched, wanted if wanted is not None and wanted >= 0 else None


def _chunk(queue: ScriptedQueue, wanted: int | None) -> tuple[list[bytes], int]:
    """Up to CHUNK entries from number ``wanted`` (None: the newest) down, newest first,
    and the number of the first (history_page.lua: placed and read in one call)."""
    keys = [queue.keys.finished_settings, queue.keys.finished]
    newest, rows = queue._run("history_page", keys, ["" if wanted is None else wanted, CHUNK])
    return list(rows)[::-1], int(newest)


def _keeps(found: Ended, jobfilter: JobFilter, now: float) -> bool:
    return found.state in states_of(jobfilter) and jobfilter.matches(found, now)


def entries(queue: ScriptedQueue, found: list[Ended],
            shard: str | None = None) -> list[HistoryEntry]:  # fmt: skip
    """The entries of ``found``, with their kept results' start (two round trips)."""
    if not found:
        return []
    ids = [c.id for c in found]
    pipe: Any = queue.client.pipeline(transaction=False)
    _look_for(pipe, queue.keys, ids)
    records = _records(queue, ids, pipe.execute())
    return [_entry(c, record, shard) for c, record in zip(found, records)]


def _entry(c: Ended, record: Any, shard: str | None) -> HistoryEntry:
    job = c.job
    shown = jobsearch.found_job(c) if c.message is not None else None
    error = c.error if c.state == "dead" else None
    kept = record is not None
    # (a record of this run ended when the entry did: an earlier run's start is not this one's)
    this_run = kept and record.at is not None and abs(record.at - (c.score or 0.0)) < 2
    return HistoryEntry(
        id=c.id, task=c.task, state=c.state, args=shown.args if shown else None,
        enqueued_at=c.enqueued_at, started_at=record.started if this_run else None,
        finished_at=float(c.score or 0.0), attempts=None if job is None else job.attempt + c.ran,
        error=None if error is None else error[:ERROR_CHARS], result_kept=kept, shard=shard,
        call=shown.call if shown else None,
    )  # fmt: skip


def as_search_page(queue: ScriptedQueue, jobfilter: JobFilter, limit: int = 50,
                   cursor: str | None = None) -> jobsearch.SearchPage:  # fmt: skip
    """A history page as ``gq jobs --state finished`` lists it: each ended job's end time
    in ``died_at`` (its state says how it ended)."""
    return search_page(page(queue, jobfilter, limit, cursor))


def search_page(found: HistoryPage) -> jobsearch.SearchPage:
    """History page ``found`` as a search's page (a sharded queue's too)."""
    return jobsearch.SearchPage([_found(e) for e in found.entries], found.cursor)


def _found(e: HistoryEntry) -> jobsearch.FoundJob:
    return jobsearch.FoundJob(
        id=e.id, state=e.state, task=e.task, args=e.args or "", attempt=e.attempts,
        enqueued_at=e.enqueued_at, due_at=None, died_at=e.finished_at, error=e.error, group=None,
        call=e.call,
    )  # fmt: skip
