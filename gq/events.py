"""The opt-in stream of job events of a queue (issue 34): turned on and off, and read.

The scripts that change a job's state write its event in the same call (lib/events.lua)
when the queue's flow settings hash holds ``events_maxlen``, so every producer, worker and
script sees the switch at once and no event is announced for a change that did not
happen. The stream (``QueueKeys.events``) is capped with ``XADD ... MAXLEN ~``.

    q = gq.Queue("emails"); q.enable_events(maxlen=100_000)
    for event in q.events(since="0", block=5.0):
        print(event.event, event.job_id, event.task)
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from typing import Any

from gq.store.base import as_text
from gq.store.keys import QueueKeys

#: ``enable_events``' cap: events kept per queue (docs/decisions.md, 2026-12-04).
DEFAULT_MAXLEN = 100_000
#: The flow settings hash's field that turns the stream on (lib/events.lua reads it).
MAXLEN_FIELD = "events_maxlen"
#: The event names the scripts write.
EVENT_NAMES = ("enqueued", "started", "retried", "done", "dead", "cancelled", "progress")
#: Events read per round trip when none is asked for.
DEFAULT_COUNT = 100
#: The fields every event has; the others go to ``Event.extra``.
_COMMON = ("event", "job", "task", "attempts")


@dataclass(frozen=True)
class Event:
    """One job event: its stream ``id`` (``<server ms>-<seq>``: resume after it with
    ``since``), the ``event`` name, the job, its task ("" when not a task job), its
    attempts (None where the message did not say), the server ``time`` in unix seconds
    and the ``extra`` fields (``error``, ``delay``, ``fraction``, ``note``). Read from a
    sharded queue, it names its ``shard`` and the ``cursor`` to resume after it (its
    ``id`` is its shard's stream id: gq/sharded_reads.py)."""

    id: str
    event: str
    job_id: str
    task: str
    attempts: int | None
    time: float
    extra: dict[str, str] = field(default_factory=dict)
    shard: str | None = None
    cursor: str | None = None

    @property
    def since(self) -> str:
        """The ``since`` that resumes after this event."""
        return self.id if self.cursor is None else self.cursor

    def as_json(self) -> dict[str, Any]:
        """The event as a JSON object (``gq events --json``; a sharded queue's with its
        ``shard`` and ``cursor``)."""
        sharded = {} if self.shard is None else {"shard": self.shard, "cursor": self.cursor}
        return {"id": self.id, "event": self.event, "job_id": self.job_id, "task": self.task,
                "attempts": self.attempts, "time": self.time, **sharded, **self.extra}  # fmt: skip


def parse(entry_id: Any, fields: dict[Any, Any]) -> Event:
    """An ``Event`` from a stream entry as redis-py returns it."""
    text = {as_text(k): as_text(v) for k, v in fields.items()}
    eid = as_text(entry_id)
    attempts = text.get("attempts", "")
    return Event(eid, text.get("event", ""), text.get("job", ""), text.get("task", ""),
                 int(attempts) if attempts.isdigit() else None,
                 int(eid.split("-")[0]) / 1000,
                 {k: v for k, v in text.items() if k not in _COMMON})  # fmt: skip


def enable(client: Any, queue: str, maxlen: int = DEFAULT_MAXLEN) -> None:
    """Turn ``queue``'s events on, keeping about ``maxlen`` of them (the scripts' next call
    sees it)."""
    if type(maxlen) is not int or maxlen < 1:
        raise ValueError(f"maxlen is a positive int, not {maxlen!r}")
    client.hset(QueueKeys(queue).flow, MAXLEN_FIELD, maxlen)


def disable(client: Any, queue: str) -> None:
    """Turn ``queue``'s events off; the events kept stay readable until the stream is
    deleted (``DEL <queue>:events``) or trimmed by the next enable."""
    client.hdel(QueueKeys(queue).flow, MAXLEN_FIELD)


def maxlen(client: Any, queue: str) -> int:
    """The cap of ``queue``'s events, 0 while they are off."""
    raw = client.hget(QueueKeys(queue).flow, MAXLEN_FIELD)
    return int(raw) if raw is not None and as_text(raw).isdigit() else 0


def _start(since: str | None) -> str:
    # None: only what comes from now on ("$" for XREAD; see read()).
    return "$" if since is None else since


def _events(reply: Any) -> list[Event]:
    return [parse(eid, fields) for _, entries in reply or [] for eid, fields in entries]


def read(client: Any, queue: str, since: str | None = None, *,
         block: float | None = None, count: int = DEFAULT_COUNT) -> Iterator[Event]:  # fmt: skip
    """The events after ``since`` (a stream id; "0" from the first kept; None from now
    on), oldest first. Without ``block`` it stops at the last one; with it, it waits up to
    ``block`` seconds at a time for more and never stops (break out of the loop)."""
    key, last = QueueKeys(queue).events, _start(since)
    block_ms = None if block is None else max(1, int(block * 1000))
    if last == "$":
        last = newest_id(client, queue)
    while True:
        found = _events(client.xread({key: last}, count=count, block=block_ms))
        yield from found
        if found:
            last = found[-1].id
        elif block_ms is None:
            return


def newest_id(client: Any, queue: str) -> str:
    """The id of ``queue``'s newest event ("0-0" if none): reading after it gives what
    comes from now on. ("$" is resolved once so: a later XREAD with "$" would skip what
    came between two reads.)"""
    newest = client.xrevrange(QueueKeys(queue).events, count=1)
    return as_text(newest[0][0]) if newest else "0-0"


async def aread(
    client: Any, queue: str, since: str | None = None, *,
    block: float | None = None, count: int = DEFAULT_COUNT,
) -> AsyncIterator[Event]:  # fmt: skip
    """``read`` on a ``redis.asyncio`` client: ``async for event in aread(...)``."""
    key, last = QueueKeys(queue).events, _start(since)
    block_ms = None if block is None else max(1, int(block * 1000))
    if last == "$":
        newest = await client.xrevrange(key, count=1)
        last = as_text(newest[0][0]) if newest else "0-0"
    while True:
        found = _events(await client.xread({key: last}, count=count, block=block_ms))
        for event in found:
            yield event
        if found:
            last = found[-1].id
        elif block_ms is None:
            return
