"""Bounded, paged reads of a queue's jobs by state, with resumable cursors (issue 34):
what a search and every bulk action walk. No read takes more than ``PAGE`` entries of a
set in one command, and none reads a whole large key (no KEYS, no ``LRANGE 0 -1``), so a
scan of 100,000 jobs never blocks Redis for more than a moment and is safe while
workers run.

How each state is walked, and what a concurrent change does to a walk:

- ready: the active list from its tail (newest first) by offset, so workers taking jobs
  from the head never shift what is left to read (a push at the tail may show a job
  twice: callers count each id once); then the groups' lines (``HSCAN``).
- scheduled (soonest first) and dead (newest first): by score, resuming at the last
  score read and skipping the members of that score already read, so a job that leaves
  the set moves nothing else.
- running: each registered consumer's in-flight set (``SSCAN``): read only.

A cursor is text (``state|position|extra``), so the CLI and the dashboard can hand it back.
An action that removed jobs of the page it read passes their ids to ``Page.next`` so
that the list's offset and a score's skip count stay exact.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from gq.errors import ConfigurationError
from gq.store.admin import QueueAdmin
from gq.store.base import as_text
from gq.store.groupkeys import group_key

#: Entries read per command.
PAGE = 500

#: A job found: (id, state, the set's score or None, message or None, the field of the
#: groups' lines hash that holds it, ``group\nN``, for a job waiting in its group's line).
Found = tuple[str, str, "float | None", "bytes | None", "str | None"]


@dataclass
class Page:
    """Jobs read in one step and how to go on: ``next(removed)`` is the cursor after it
    (None when the walk is over), given the ids of this page the caller removed."""

    found: list[Found]
    following: Callable[[frozenset[str]], str | None]
    #: For the active list: the window it read (offset from the tail, length).
    window: tuple[int, int] | None = None

    def next(self, removed: frozenset[str] = frozenset()) -> str | None:
        return self.following(removed)


def first(states: Sequence[str]) -> str | None:
    """The cursor that starts a walk of ``states``."""
    return _start(states[0]) if states else None


def _start(state: str) -> str:
    return {"ready": "ready|list|0", "running": "running|0|0"}.get(state, f"{state}||0")


def read(admin: QueueAdmin, states: Sequence[str], cursor: str, count: int = PAGE) -> Page:
    """One page of the walk of ``states`` from ``cursor``."""
    state, a, b = _parts(cursor)
    if state not in states:
        raise ConfigurationError(f"cursor {cursor!r} is not for states {', '.join(states)}")
    page = _READERS[state](admin, a, b, max(1, min(count, PAGE)))
    return _chained(page, states, state)


def _parts(cursor: str) -> tuple[str, str, str]:
    parts = cursor.split("|")
    if len(parts) != 3:
        raise ConfigurationError(f"not a gq cursor: {cursor!r}")
    return parts[0], parts[1], parts[2]


def _chained(page: Page, states: Sequence[str], state: str) -> Page:
    """The page, whose end of walk goes on to the next state."""
    after = states[states.index(state) + 1 :]
    inner = page.following

    def following(removed: frozenset[str]) -> str | None:
        return inner(removed) or (_start(after[0]) if after else None)

    page.following = following
    return page


def _ready(admin: QueueAdmin, where: str, position: str, count: int) -> Page:
    if where == "lines":
        return _lines(admin, position, count)
    offset = _int(position)
    ids = [
        as_text(i) for i in _client(admin).lrange(admin.keys.active, -offset - count, -offset - 1)
    ]
    ids.reverse()  # newest first
    messages = admin.messages(ids)
    found: list[Found] = [(i, "ready", None, m, None) for i, m in zip(ids, messages)]

    def following(removed: frozenset[str]) -> str | None:
        if len(ids) < count:
            return "ready|lines|0"
        return f"ready|list|{offset + len(ids) - sum(1 for i in ids if i in removed)}"

    return Page(found, following, window=(offset, len(ids)))


def _lines(admin: QueueAdmin, position: str, count: int) -> Page:
    key = group_key(admin.keys.name, "lines")
    cursor, fields = _client(admin).hscan(key, _int(position), count=count)
    entries = [(as_text(f), as_text(v)) for f, v in fields.items() if b"\n" in f]
    entries = [(f, v) for f, v in entries if not f.endswith("\nend") and v]
    messages = admin.messages([v for _, v in entries])
    found: list[Found] = [(v, "ready", None, m, f) for (f, v), m in zip(entries, messages)]
    done = int(cursor) == 0
    return Page(found, lambda _: None if done else f"ready|lines|{int(cursor)}")


def _scored(state: str, desc: bool) -> Callable[[QueueAdmin, str, str, int], Page]:
    def reader(admin: QueueAdmin, at: str, skip: str, count: int) -> Page:
        key = admin.keys.dead if state == "dead" else admin.keys.scheduled
        edge = at or ("+inf" if desc else "-inf")
        far = "-inf" if desc else "+inf"
        rows: Any = _client(admin).zrange(
            key, edge, far, desc=desc, byscore=True, offset=_int(skip), num=count, withscores=True
        )
        entries = [(as_text(member), float(score)) for member, score in rows]
        messages = admin.messages([i for i, _ in entries])
        found: list[Found] = [(i, state, s, m, None) for (i, s), m in zip(entries, messages)]

        def following(removed: frozenset[str]) -> str | None:
            if len(entries) < count:
                return None
            last = entries[-1][1]
            kept = sum(1 for i, s in entries if s == last and i not in removed)
            same = kept + (_int(skip) if repr(last) == at else 0)
            return f"{state}|{last!r}|{same}"

        return Page(found, following)

    return reader


def past(cursor: str | None, score: float) -> str | None:
    """``cursor``, or, when it resumes at exactly ``score`` in a scored set, the cursor just
    past that score: a reschedule that gave many jobs one time never reads them again
    (skipping them one offset at a time would cost the set's size per read)."""
    if cursor is None:
        return None
    state, at, _ = _parts(cursor)
    if state in ("scheduled", "dead") and at == repr(score):
        return f"{state}|({score!r}|0"
    return cursor


def _running(admin: QueueAdmin, index: str, position: str, count: int) -> Page:
    consumers = admin.consumers()
    at = _int(index)
    if at >= len(consumers):
        return Page([], lambda _: None)
    key = admin.keys.inflight(consumers[at][0])
    cursor, members = _client(admin).sscan(key, _int(position), count=count)
    ids = sorted(as_text(m) for m in members)
    found: list[Found] = [(i, "running", None, m, None) for i, m in zip(ids, admin.messages(ids))]
    more = int(cursor) != 0
    following = f"running|{at}|{int(cursor)}" if more else f"running|{at + 1}|0"
    last = at + 1 >= len(consumers) and not more
    return Page(found, lambda _: None if last else following)


def _client(admin: QueueAdmin) -> Any:
    """The client, for the paged reads the boundary's protocol leaves out (LRANGE, HSCAN,
    SSCAN, ZRANGE BYSCORE with LIMIT): their replies are read right here."""
    return admin.client


def _int(text: str) -> int:
    try:
        value = int(text or 0)
    except ValueError:
        raise ConfigurationError(f"not a gq cursor position: {text!r}") from None
    if value < 0:
        raise ConfigurationError(f"not a gq cursor position: {text!r}")
    return value


_READERS: dict[str, Callable[[QueueAdmin, str, str, int], Page]] = {
    "ready": _ready,
    "scheduled": _scored("scheduled", desc=False),
    "dead": _scored("dead", desc=True),
    "running": _running,
}
