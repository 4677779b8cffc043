"""Waiting for a queue's signal (SPEC section 9): the list ``Q:signal`` holds a "1" while
the queue may have jobs; producers and every script that frees room raise it. One queue's
wait leaves the "1" for the other consumers; a wait over several queues reads them all in
one round trip where they share a server slot."""

from __future__ import annotations

import time
from collections.abc import Sequence

import redis
from redis.crc import key_slot

from gq.store.base import ScriptedQueue, as_text, each_key, out_of_memory, permission_errors

# How often a consumer on the embedded server (fakeredis) looks for the signal.
EMBEDDED_POLL = 0.01
# How often a consumer looks for jobs while Redis refuses the blocking wait (maxmemory).
OOM_POLL = 0.5


def wait_for_signal(queue: ScriptedQueue, timeout: float) -> bool:
    """Block until ``queue`` may have jobs (True) or ``timeout`` seconds pass (False)."""
    key = queue.keys.signal
    if queue._embedded:
        return _poll_signal(queue, key, timeout)
    try:
        with permission_errors("BLMOVE"):
            # A float timeout: BLMOVE takes one (Redis 6+), redis-py annotates it int.
            return queue.client.blmove(key, key, timeout, "LEFT", "LEFT") is not None  # type: ignore[arg-type]
    except redis.ResponseError as exc:
        if not out_of_memory(exc):
            raise
        # At maxmemory (noeviction) Redis refuses BLMOVE before it looks at the list,
        # but fetch still runs (fetch.lua) and is what frees memory: poll instead.
        time.sleep(min(timeout, OOM_POLL))  # gevent.sleep in a patched process
        return True


def _poll_signal(queue: ScriptedQueue, key: str, timeout: float) -> bool:
    # fakeredis answers BLMOVE at once (2.41), and a greenlet killed inside its blocking
    # commands releases the server's lock twice: poll instead, so that a stop interrupts
    # a sleep, never fakeredis.
    deadline = time.monotonic() + timeout
    while queue.client.lmove(key, key, "LEFT", "LEFT") is None:
        if time.monotonic() >= deadline:
            return False
        time.sleep(EMBEDDED_POLL)  # gevent.sleep in a patched process
    return True


def signalled(queues: Sequence[ScriptedQueue]) -> list[bool]:
    """Whether each queue's signal is raised ("it may have jobs"), in one round trip."""
    signals = [queue.keys.signal for queue in queues]
    return [bool(flag) for flag in each_key(queues[0].client, "exists", signals)]


def spans_slots(queues: Sequence[ScriptedQueue]) -> bool:
    """Whether the queues live in several Cluster slots (one BLPOP cannot wait on all)."""
    if len(queues) < 2 or not queues[0].cluster or queues[0]._embedded:
        return False
    return len({key_slot(queue.keys.signal.encode()) for queue in queues}) > 1


def wait_for_any_signal(queues: Sequence[ScriptedQueue], timeout: float) -> int | None:
    """Block until one of the queues may have jobs (its index) or ``timeout`` passes.

    One BLPOP over every signal list where they share a server slot (a plain Redis, or
    queues with one hash tag on a Cluster); BLPOP takes the "1", so it is put back at
    once for the other consumers (BLMOVE, which leaves it, takes one list only). On a
    Cluster whose queues live in several slots, a short blocking wait on each in turn:
    a signal is then seen within ``timeout`` at worst.
    """
    first = queues[0]
    keys = [queue.keys.signal for queue in queues]
    if first._embedded:
        return _poll_signals(queues, timeout)
    if first.cluster and len({key_slot(key.encode()) for key in keys}) > 1:
        share = max(EMBEDDED_POLL * 10, timeout / len(queues))
        return next((i for i, q in enumerate(queues) if wait_for_signal(q, share)), None)
    with permission_errors("BLPOP"):
        reply = first.client.blpop(keys, timeout)
    if reply is None:
        return None
    key = as_text(reply[0])
    _put_back(first, key)
    return keys.index(key)


def _put_back(queue: ScriptedQueue, key: str) -> None:
    """Raise the signal BLPOP took, for the other consumers."""
    pipe = queue.client.pipeline(transaction=False)
    pipe.lpush(key, "1")
    pipe.ltrim(key, 0, 0)  # one "1" at most, whatever a writer did meanwhile
    pipe.execute()


def _poll_signals(queues: Sequence[ScriptedQueue], timeout: float) -> int | None:
    deadline = time.monotonic() + timeout
    while True:
        flags = signalled(queues)
        if any(flags):
            return flags.index(True)
        if time.monotonic() >= deadline:
            return None
        time.sleep(EMBEDDED_POLL)  # gevent.sleep in a patched process
