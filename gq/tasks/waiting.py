"""Waiting for outcomes without polling (SPEC section 16, docs/decisions.md "Waiting for
results"): one pub/sub subscriber per process and Redis client, shared by every caller
of ``get()`` in it, wakes each caller when the script that wrote its outcome published
the id (scripts publish only ids a caller marked in ``Q:waiting``). A caller then reads
the outcome once. Whatever the subscription misses (a dropped connection, an outcome no
script publishes: a cancel, a recovery to dead) a caller sees at its next look, every
``LOOK`` seconds: one pipelined round trip, and one more when result slots are live.

The subscriber runs in a thread: a real one in a plain program, a greenlet where gevent
patched ``threading`` (a gq worker), so waiters in threads and greenlets alike wake by
an Event; asyncio waiters are woken through their loop's ``call_soon_threadsafe``.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable
from typing import Any, Callable

log = logging.getLogger("gq.waiting")

#: Seconds between a waiter's own looks at Redis, whatever pub/sub says.
LOOK = 1.0
#: How long a caller waits for a new channel's subscription to be confirmed.
SUBSCRIBE_WAIT = 2.0
# The subscriber's read timeout: how soon it takes a new channel up.
_TICK = 0.05

Wake = Callable[[], None]


class Subscriber:
    """One pub/sub connection of ``client``, its channels subscribed on first use."""

    def __init__(self, client: Any) -> None:
        self._client = client
        self._lock = threading.Lock()
        self._wakes: dict[tuple[str, str], list[Wake]] = {}
        self._wanted: dict[str, threading.Event] = {}
        self._asked: set[str] = set()
        self._thread: threading.Thread | None = None

    def watch(self, channel: str, names: Iterable[str], wake: Wake) -> Callable[[], None]:
        """Call ``wake`` when one of ``names`` is published on ``channel``; returns the
        function that stops it. Blocks (at most SUBSCRIBE_WAIT) until subscribed."""
        keys = [(channel, name) for name in names]
        with self._lock:
            for key in keys:
                self._wakes.setdefault(key, []).append(wake)
            ready = self._wanted.setdefault(channel, threading.Event())
            self._start()
        ready.wait(SUBSCRIBE_WAIT)  # not subscribed by then: the waiter's looks still see it

        def unwatch() -> None:
            with self._lock:
                for key in keys:
                    wakes = self._wakes.get(key, [])
                    if wake in wakes:
                        wakes.remove(wake)
                    if not wakes:
                        self._wakes.pop(key, None)

        return unwatch

    def _start(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._asked.clear()
            self._thread = threading.Thread(target=self._run, name="gq-results", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        while True:
            try:
                self._listen(self._client.pubsub())
            except Exception as exc:  # noqa: BLE001 - a lost connection: the looks cover it
                with self._lock:
                    for ready in self._wanted.values():
                        ready.clear()
                    self._asked.clear()
                    if not self._wakes:  # nobody waits: the next watch starts a new thread
                        self._thread = None
                        return
                log.warning("results subscriber: %s; subscribing again", exc)
                time.sleep(LOOK)

    def _listen(self, pubsub: Any) -> None:
        while True:
            with self._lock:
                new = [c for c in self._wanted if c not in self._asked]
            if new:
                pubsub.subscribe(*new)
                self._asked.update(new)
            message = pubsub.get_message(timeout=_TICK) if self._asked else None
            if message is None:
                if not self._asked:
                    time.sleep(_TICK)
                continue
            self._deliver(message)

    def _deliver(self, message: dict[str, Any]) -> None:
        channel = _text(message.get("channel"))
        if message.get("type") == "subscribe":
            ready = self._wanted.get(channel)
            if ready is not None:
                ready.set()
            return
        if message.get("type") != "message":
            return
        with self._lock:
            wakes = list(self._wakes.get((channel, _text(message.get("data"))), ()))
        for wake in wakes:
            wake()


def _text(value: Any) -> str:
    return value.decode("utf-8", "surrogateescape") if isinstance(value, bytes) else str(value)


_SUBSCRIBERS: dict[int, tuple[int, Any, Subscriber]] = {}
_GUARD = threading.Lock()


def subscriber(client: Any) -> Subscriber:
    """The process's subscriber for ``client`` (a fresh one in a forked child)."""
    with _GUARD:
        found = _SUBSCRIBERS.get(id(client))
        if found is None or found[0] != os.getpid() or found[1] is not client:
            found = _SUBSCRIBERS[id(client)] = (os.getpid(), client, Subscriber(client))
        return found[2]
