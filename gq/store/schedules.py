"""The Redis side of periodic schedules added at runtime (gq/schedules.py): a hash of
records (``QueueKeys.periodic_runtime``) and one of paused names
(``QueueKeys.periodic_paused``). Each change is one command on one hash, atomic as it
is; a removal also forgets the schedule's cursor (as ``gq periodic delete`` does)."""

from __future__ import annotations

from typing import Any

from gq.store.base import ScriptedQueue, as_text
from gq.store.keys import QueueKeys


def put(client: Any, queue: str, name: str, record: bytes) -> bool:
    """Keep ``record`` as schedule ``name``; True if it is new, False if it replaced one."""
    return bool(client.hset(QueueKeys(queue).periodic_runtime, name, record))


def exists(client: Any, queue: str, name: str) -> bool:
    return bool(client.hexists(QueueKeys(queue).periodic_runtime, name))


def set_paused(client: Any, queue: str, name: str, paused: bool) -> None:
    """Pause or resume ``name``. What came due while paused is not caught up: a resume
    moves its cursor to now before the pause is lifted (while paused, periodic.lua
    writes no cursor: no race with it)."""
    k = QueueKeys(queue)
    cursor = None if paused else client.hget(k.periodic, name)
    if cursor is not None:
        now = int(ScriptedQueue(client, queue).server_time())  # (its master's clock)
        if int(cursor) < now:
            client.hset(k.periodic, name, now)
    _mark_paused(client, k, name, paused)


def _mark_paused(client: Any, keys: QueueKeys, name: str, paused: bool) -> None:
    if paused:
        client.hset(keys.periodic_paused, name, "1")
    else:
        client.hdel(keys.periodic_paused, name)


def remove(client: Any, queue: str, name: str) -> bool:
    """Forget schedule ``name``: its record, its pause and its cursor; whether it existed."""
    k = QueueKeys(queue)
    found = client.hdel(k.periodic_runtime, name)
    client.hdel(k.periodic_paused, name)
    for key in (k.periodic, k.periodic_rules, k.periodic_enqueued):
        client.hdel(key, name)
    return bool(found)


def read(client: Any, queue: str) -> dict[str, tuple[bytes, bool]]:
    """Every runtime schedule of ``queue``: name -> (record, paused)."""
    k = QueueKeys(queue)
    records = client.hgetall(k.periodic_runtime)
    paused = {as_text(name) for name in client.hgetall(k.periodic_paused)}
    return {as_text(name): (bytes(value), as_text(name) in paused)
            for name, value in records.items()}  # fmt: skip


# -- a sharded queue's schedules (gq/sharded.py): each on its name's shard ------------

#: The rule text a moved schedule leaves on the shard it left (with a cursor ahead of
#: now): a consumer that still runs it there is told "done" until it reads it again.
MOVED = "moved"
#: Seconds the cursor left behind stays ahead of the server's now: far beyond one
#: heartbeat, after which every consumer has read the schedules again.
MOVED_HOLD = 300


def holder(client: Any, queues: tuple[str, ...], name: str) -> str | None:
    """The first of ``queues`` that keeps runtime schedule ``name``, None if none does."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.hexists(QueueKeys(queue).periodic_runtime, name)
    return next((q for q, found in zip(queues, pipe.execute()) if found), None)


def names_on(client: Any, queues: tuple[str, ...]) -> dict[str, list[str]]:
    """Queue -> the runtime schedules it keeps, for each of ``queues``."""
    pipe = client.pipeline(transaction=False)
    for queue in queues:
        pipe.hkeys(QueueKeys(queue).periodic_runtime)
    return {q: [as_text(n) for n in found] for q, found in zip(queues, pipe.execute())}


def relocate(client: Any, source: str, target: str, name: str, server_now: float) -> None:
    """Move runtime schedule ``name`` with its pause and cursor from queue ``source`` to
    ``target`` (two slots: no script spans both). Written on the target first, then
    taken off the source, so that a crash between leaves it on both (the next move
    takes the target's), never on neither. A consumer that proposes an occurrence on
    the source between the two writes may enqueue it there while another does on the
    target: at worst one occurrence runs twice (at-least-once, docs/decisions.md)."""
    s, t = QueueKeys(source), QueueKeys(target)
    record, paused = client.hget(s.periodic_runtime, name), client.hget(s.periodic_paused, name)
    if record is None:
        return
    if not client.hexists(t.periodic_runtime, name):  # one there already wins (a retry)
        kept = [client.hget(key, name) for key in (s.periodic, s.periodic_rules,
                                                   s.periodic_enqueued)]  # fmt: skip
        for key, value in zip((t.periodic, t.periodic_rules, t.periodic_enqueued), kept):
            if value is None:
                client.hdel(key, name)
            else:
                client.hset(key, name, value)
        _mark_paused(client, t, name, paused is not None)  # (its cursor as it was)
        client.hset(t.periodic_runtime, name, record)
    # Ahead of now on the source: a consumer still running it there hears "done".
    client.hset(s.periodic, name, int(server_now) + MOVED_HOLD)
    client.hset(s.periodic_rules, name, MOVED)
    client.hdel(s.periodic_paused, name)
    client.hdel(s.periodic_runtime, name)



def forget_moved(client: Any, queue: str, name: str) -> None:
    """Drop the cursor a move left on ``queue`` for ``name`` (its rule ``MOVED``), if any:
    a schedule added there again starts afresh instead of waiting for it to pass."""
    k = QueueKeys(queue)
    if as_text(client.hget(k.periodic_rules, name) or b"") == MOVED:
        for key in (k.periodic, k.periodic_rules, k.periodic_enqueued):
            client.hdel(key, name)
