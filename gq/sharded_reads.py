"""The history and the job events of a sharded queue, merged over its shards (docs/
deployment.md, "One queue over many masters": "Operators see one queue").

Each shard keeps its own history (``<shard>:finished``) and its own events stream
(``<shard>:events``) in its slot. A page of the history merges the shards' pages by the
time each job ended, newest first; its cursor holds each shard's own place, so that the
next page resumes every shard where it stopped. The events are merged by stream id
(``<ms>-<seq>`` of each master's clock), then by shard: the order across shards is the
masters' clocks', not a global one. A composite ``since`` holds each shard's last id read,
so that resuming loses and repeats nothing.

Both cursors are ``shards:`` and one place per shard, in the order of ``queue.shards``,
comma-separated: a history place is an entry number ("" the newest, "-" read to the end),
an events place a stream id.
"""

from __future__ import annotations

import dataclasses
import heapq
import itertools
import re
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from gq import events as job_events
from gq import history
from gq.errors import ConfigurationError
from gq.history import HistoryEntry, HistoryPage
from gq.jobfilter import JobFilter
from gq.store.base import as_text
from gq.store.keys import QueueKeys
from gq.store.reshard import aserving

if TYPE_CHECKING:
    from gq.queue import Queue

#: Both composite cursors start with this (a plain queue's never does).
CURSOR_MARK = "shards:"
_NEWEST, _DONE = "", "-"
_STREAM_ID = re.compile(r"^\d+(-\d+)?$")


def encode(places: Sequence[str]) -> str:
    return CURSOR_MARK + ",".join(places)


def decode(cursor: str, shards: int, what: str, valid: re.Pattern[str]) -> list[str]:
    """Each shard's place in composite ``cursor``, each matching ``valid``."""
    places = cursor[len(CURSOR_MARK) :].split(",")
    ok = cursor.startswith(CURSOR_MARK) and len(places) == shards
    if not ok or not all(valid.fullmatch(place) for place in places):
        raise ConfigurationError(
            f"not {what} of this {shards}-shard queue: {cursor!r} (use the cursor a "
            "listing of this queue printed; a reshard since changes its shards)"
        )
    return places


# -- the history ----------------------------------------------------------------------

_HISTORY_PLACE = re.compile(r"|-|\d+")


def history_page(shards: list[Queue], jobfilter: JobFilter | None, limit: int,
                 cursor: str | None) -> HistoryPage:  # fmt: skip
    """Up to ``limit`` entries of every shard, newest first, from ``cursor``."""
    places = ([_NEWEST] * len(shards) if cursor is None
              else decode(cursor, len(shards), "a history cursor", _HISTORY_PLACE))  # fmt: skip
    scans = {i: history.scan(shards[i].store, jobfilter, limit, _number(place))
             for i, place in enumerate(places) if place != _DONE}  # fmt: skip
    streams = [[(-(found.score or 0.0), i, found) for found in matched]
               for i, (matched, _) in scans.items()]  # fmt: skip
    shown = list(itertools.islice(heapq.merge(*streams, key=lambda row: row[:2]), limit))
    after = [_history_after(places[i], scans.get(i), sum(1 for row in shown if row[1] == i))
             for i in range(len(shards))]  # fmt: skip
    more = any(place != _DONE for place in after)
    return HistoryPage(_entries(shards, [(i, found) for _, i, found in shown]),
                       encode(after) if more else None)  # fmt: skip


def _number(place: str) -> int | None:
    return None if place == _NEWEST else int(place)


def _history_after(place: str, scan: tuple[list[history.Ended], int | None] | None,
                   taken: int) -> str:  # fmt: skip
    """A shard's place after the first ``taken`` entries of its ``scan`` were shown."""
    if scan is None:
        return place
    matched, wanted = scan
    if taken == len(matched):  # all shown (or none matched): on from where its scan stopped
        return _DONE if wanted is None else str(wanted)
    if taken == 0:
        return place
    following = matched[taken - 1].number - 1  # cut inside: on from the first not shown
    return _DONE if following < 0 else str(following)


def _entries(shards: list[Queue], shown: list[tuple[int, history.Ended]]) -> list[HistoryEntry]:
    """The entries of ``shown`` in order, each read on its shard (its kept result)."""
    made: dict[int, list[HistoryEntry]] = {}
    for i in sorted({i for i, _ in shown}):
        found = [entry for shard, entry in shown if shard == i]
        made[i] = history.entries(shards[i].store, found, shards[i].name)[::-1]
    return [made[i].pop() for i, _ in shown]


# -- the events -----------------------------------------------------------------------


def read_events(shards: list[Queue], since: str | None, *, block: float | None,
                count: int) -> Iterator[job_events.Event]:  # fmt: skip
    """The events of every shard after ``since`` (checked, and "from now on" fixed, at
    once), merged by stream id then shard, each naming its shard and the cursor after it.
    With ``block`` it waits for more without end: when no shard has any, it blocks on one
    shard at a time for ``block / shards`` seconds, so an event on any shard is seen
    within that (plus a round trip), with no busy polling."""
    return _merged_events(shards, starts(shards, since), block, count)


def _merged_events(shards: list[Queue], places: list[str], block: float | None,
                   count: int) -> Iterator[job_events.Event]:  # fmt: skip
    turn = 0
    while True:
        yield from _round(shards, places, count)
        if block is None:
            return
        shard = shards[turn % len(shards)]
        wait_ms = max(1, int(block * 1000 / len(shards)))
        shard.client.xread({shard.store.keys.events: places[turn % len(shards)]},
                           count=1, block=wait_ms)  # fmt: skip
        turn += 1  # (what it found is read by the next round, in its merged place)


def _round(shards: list[Queue], places: list[str],
           count: int) -> Iterator[job_events.Event]:  # fmt: skip
    """Every event there is now after ``places``, merged; ``places`` follow what is read."""
    streams = [_ordered(i, job_events.read(shard.client, shard.name, places[i], count=count))
               for i, shard in enumerate(shards)]  # fmt: skip
    for _, i, event in heapq.merge(*streams, key=lambda row: (row[0], row[1])):
        yield _placed(event, i, shards[i].name, places)


def _placed(event: job_events.Event, i: int, shard: str, places: list[str]) -> job_events.Event:
    """``event`` of shard number ``i`` read: its shard named, with the cursor after it."""
    places[i] = event.id
    return dataclasses.replace(event, shard=shard, cursor=encode(places))


def _ordered(shard: int, found: Iterator[job_events.Event],
             ) -> Iterator[tuple[tuple[int, int], int, job_events.Event]]:  # fmt: skip
    """Each event of ``shard`` with its place in the merge."""
    for event in found:
        yield _order(event), shard, event


def _order(event: job_events.Event) -> tuple[int, int]:
    """An event's place in the merge: its stream id's (ms, seq)."""
    ms, _, seq = event.id.partition("-")
    return int(ms), int(seq or 0)


def starts(shards: list[Queue], since: str | None) -> list[str]:
    """Each shard's place for ``since``: a composite cursor's, one stream id's ("0": all
    kept) for every shard, or (None) each shard's newest id (from now on)."""
    if since is None:
        return [job_events.newest_id(shard.client, shard.name) for shard in shards]
    return _given_starts([shard.name for shard in shards], since)


def _given_starts(names: list[str], since: str) -> list[str]:
    if _STREAM_ID.match(since):
        return [since] * len(names)
    return decode(since, len(names), "an events cursor", _STREAM_ID)


def newest(shards: list[Queue]) -> str:
    """The cursor of every shard's newest event: reading after it gives what comes next."""
    return encode(starts(shards, None))


# -- the events, for asyncio (gq.aio.events) ------------------------------------------


async def aread_events(
    client: Any, name: str, shards: int, since: str | None, *, block: float | None, count: int
) -> AsyncIterator[job_events.Event]:
    """``read_events`` on a ``redis.asyncio`` client: the shards are those Redis says
    ``name`` is served by (read, and ``since`` checked, at the first step)."""
    names = list((await aserving(client, name, shards)).queues)
    places = await _astarts(client, names, since)
    turn = 0
    while True:
        async for event in _around(client, names, places, count):
            yield event
        if block is None:
            return
        wait_ms = max(1, int(block * 1000 / len(names)))
        shard = turn % len(names)
        await client.xread({QueueKeys(names[shard]).events: places[shard]}, count=1,
                           block=wait_ms)  # fmt: skip
        turn += 1


async def _astarts(client: Any, names: list[str], since: str | None) -> list[str]:
    if since is not None:
        return _given_starts(names, since)
    newest = [await client.xrevrange(QueueKeys(shard).events, count=1) for shard in names]
    return [as_text(found[0][0]) if found else "0-0" for found in newest]


async def _around(client: Any, names: list[str], places: list[str],
                  count: int) -> AsyncIterator[job_events.Event]:  # fmt: skip
    """``_round`` for asyncio: the shards' streams merged by hand (no async heapq.merge)."""
    streams = [job_events.aread(client, shard, places[i], count=count)
               for i, shard in enumerate(names)]  # fmt: skip
    heads: dict[int, job_events.Event] = {}
    for i, stream in enumerate(streams):
        first = await _next(stream)
        if first is not None:
            heads[i] = first
    while heads:
        i = min(heads, key=lambda shard: (_order(heads[shard]), shard))
        yield _placed(heads[i], i, names[i], places)
        head = await _next(streams[i])
        if head is None:
            del heads[i]
        else:
            heads[i] = head


async def _next(stream: AsyncIterator[job_events.Event]) -> job_events.Event | None:
    try:
        return await stream.__anext__()
    except StopAsyncIteration:
        return None
