"""Finding a queue's jobs by filter (issue 34): the walk every search and bulk action shares,
and the jobs a search returns (``gq jobs``, ``gq.Queue.jobs``, later the dashboard).

The walk reads one bounded page at a time (gq/store/scan.py), keeps the jobs the filter
matches, and hands each page to its caller, who may change some of them and say which
left their place so that the next page starts exactly (``Page.next``). Each id is
handled once per walk: a job seen twice (pushed again at the tail, or rescheduled later
in the set) is skipped the second time.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from gq.errors import ConfigurationError
from gq.jobfilter import Candidate, JobFilter
from gq.store import scan
from gq.store.admin import QueueAdmin
from gq.tasks.describe import VALUE_CHARS, describe, shown

#: The states a search walks when its filter names none.
SEARCH_STATES = ("ready", "scheduled", "dead", "running")


@dataclass
class Step:
    """One page of a walk: the jobs the filter matched, the page and where it was read."""

    matched: list[Candidate]
    page: scan.Page
    at: str
    removed: set[str] = field(default_factory=set)  # ids of the page that left their place


def walk(
    admin: QueueAdmin,
    jobfilter: JobFilter,
    states: Sequence[str],
    cursor: str | None = None,
    hop: float | None = None,
) -> Iterator[Step]:
    """The pages of ``states`` from ``cursor`` (the start when None), the filter applied;
    the caller fills ``Step.removed`` before asking for the next page. ``hop``: a score of
    the sets the walk jumps over (scan.past)."""
    now = admin.server_time()
    seen: set[str] = set()
    at = cursor or scan.first(states)
    while at is not None:
        page = scan.read(admin, states, at)
        fresh = [c for c in map(_candidate, page.found) if c.id not in seen]
        seen.update(c.id for c in fresh)
        step = Step([c for c in fresh if jobfilter.matches(c, now)], page, at)
        yield step
        at = page.next(frozenset(step.removed))
        at = at if hop is None else scan.past(at, hop)


def _candidate(found: scan.Found) -> Candidate:
    job_id, state, score, message, line = found
    return Candidate(job_id, state, score, message, line or "")


@dataclass(frozen=True)
class FoundJob:
    """A job as a search shows it: its arguments as text, escaped and cut (describe.py)."""

    id: str
    state: str
    task: str | None
    args: str  # "arg, ..., key=value" for a task; the data's preview for a byte job
    attempt: int | None
    enqueued_at: float | None
    due_at: float | None
    died_at: float | None
    error: str | None
    group: str | None
    call: tuple[list[Any], dict[str, Any]] | None = None  # a task's arguments as sent

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def as_json(self) -> dict[str, Any]:
        """What ``--json`` prints: a task's ``args`` and ``kwargs`` as it was called (None
        for a byte job), and ``args_text`` as the table shows them (a byte job's data)."""
        return call_fields(self.as_dict())


@dataclass(frozen=True)
class SearchPage:
    """Jobs found, and the cursor to go on from (None: the walk is over)."""

    jobs: list[FoundJob]
    cursor: str | None


def search(
    admin: QueueAdmin,
    jobfilter: JobFilter,
    limit: int = 50,
    cursor: str | None = None,
    budget: float | None = None,
) -> SearchPage:
    """Up to ``limit`` jobs matching ``jobfilter``, from ``cursor``; with ``budget`` (s),
    the search stops after that long with what it found and a cursor to go on from."""
    if limit < 1:
        raise ConfigurationError(f"a search's limit must be at least 1, not {limit!r}")
    states = jobfilter.within(SEARCH_STATES)
    at, skip = _split(cursor)
    found: list[FoundJob] = []
    deadline = None if budget is None else time.monotonic() + budget
    for step in walk(admin, jobfilter, states, at):
        matched = [found_job(c) for c in step.matched[skip:]]
        room = limit - len(found)
        found += matched[:room]
        if len(matched) > room:  # cut inside this page: resume it past what was shown
            return SearchPage(found, f"{step.at}#{skip + room}")
        skip = 0
        if len(found) >= limit or (deadline is not None and time.monotonic() > deadline):
            return SearchPage(found, step.page.next())
    return SearchPage(found, None)


def _split(cursor: str | None) -> tuple[str | None, int]:
    """A search's cursor: a walk's, and the matches of its first page already shown."""
    if cursor is None:
        return None, 0
    at, _, skip = cursor.partition("#")
    try:
        return at, int(skip or 0)
    except ValueError:
        raise ConfigurationError(f"not a gq search cursor: {cursor!r}") from None


def found_job(c: Candidate) -> FoundJob:
    job = c.job
    view = describe(job.data if job else None, VALUE_CHARS)
    args = view.task.arguments() if view.task is not None else _bytes_text(job)
    return FoundJob(
        id=c.id,
        state=c.state,
        task=c.task,
        args=args if view.problem is None else view.problem,
        attempt=job.attempt if job else None,
        enqueued_at=c.enqueued_at,
        due_at=c.score if c.state == "scheduled" else None,
        died_at=c.score if c.state == "dead" else None,
        error=c.error if c.message is not None else "no message stored",
        group=c.group,
        call=None if c.envelope is None else (list(c.envelope.args), dict(c.envelope.kwargs)),
    )


def call_fields(row: dict[str, Any]) -> dict[str, Any]:
    """A row's ``call`` as JSON's ``args`` and ``kwargs``, its text as ``args_text``."""
    call, text = row.pop("call"), row.pop("args")
    args, kwargs = (None, None) if call is None else call
    return {**row, "args": args, "kwargs": kwargs, "args_text": text}


def _bytes_text(job: Any) -> str:
    return "" if job is None else shown(bytes(job.data))


def running(admin: QueueAdmin, limit: int) -> list[tuple[FoundJob, str | None]]:
    """Up to ``limit`` jobs in flight, each with the id of the consumer holding it (None
    when that consumer left while the walk ran): the dashboard's running list. The walk
    of "running" reads one consumer's in-flight set after another; its cursor
    (``running|<consumer index>|<SSCAN cursor>``, gq/store/scan.py) says whose. (A
    consumer registering or leaving during the walk can shift the index: a display only.)"""
    holders = [consumer_id for consumer_id, _, _ in admin.consumers()]
    found: list[tuple[FoundJob, str | None]] = []
    for step in walk(admin, JobFilter(), ("running",)):
        index = int(step.at.split("|")[1])
        holder = holders[index] if index < len(holders) else None
        found += [(found_job(c), holder) for c in step.matched[: limit - len(found)]]
        if len(found) >= limit:
            break
    return found
