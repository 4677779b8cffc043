"""Waiting on the signals of queues in several Cluster slots (a sharded queue's shards):
one greenlet per queue blocked on its own signal, waking the poller (SPEC section 4's
protocol, per queue).

One BLPOP cannot span slots, and a short wait on each queue in turn sees a job up to a
poll duration late. A watcher costs a greenlet and a connection to its queue's master
while it waits, and nothing while its queue has jobs: it is armed when a fetch found the
queue empty (the fetch cleared the signal) and stops once it saw the signal raised again,
until the poller fetched from that queue. The poller thus learns which queues may have
jobs without reading their signals on every fetch (a round trip to every master). The
signal stays in its list (BLMOVE of the list onto itself) until a fetch finds fewer jobs
than it asked for, so a wake is never lost: a signal raised before the watcher is armed
is still there when it looks.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import gevent
import redis
from gevent.event import Event

from gq.store.base import ScriptedQueue, describe
from gq.store.signals import wait_for_signal

log = logging.getLogger("gq.poller.watchers")

#: How long a watcher whose wait failed pauses before it waits again (the poller, woken,
#: meets the same error in its own calls and backs off by its own policy).
ERROR_PAUSE = 0.5


class Watchers:
    """One watcher greenlet per queue of ``queues``, each waiting at most ``duration``
    seconds in one blocking call. The poller ``arm``s a queue's watcher once a fetch
    found it empty (its signal cleared), asks whether a queue was ``seen`` signalled
    since, ``take``s that news when it fetches from it, and ``wait``s for any."""

    def __init__(self, queues: Sequence[ScriptedQueue], duration: float, context: str) -> None:
        self._queues = {queue.keys.name: queue for queue in queues}
        self._duration = duration
        self._context = context
        self._armed = {name: Event() for name in self._queues}
        self._seen: set[str] = set()
        self._any = Event()
        self._greenlets: list[gevent.Greenlet] = []

    def arm(self, name: str) -> None:
        """Watch queue ``name``'s signal (until it is seen raised)."""
        if not self._greenlets:
            self._start()
        self._armed[name].set()

    def seen(self, name: str) -> bool:
        """Whether queue ``name``'s signal was seen raised since it was last taken."""
        return name in self._seen

    def take(self, name: str) -> None:
        """The poller fetches from queue ``name``: what its watcher saw is used."""
        self._seen.discard(name)

    def wait(self, names: Sequence[str], timeout: float) -> str | None:
        """Block until one of queues ``names`` may have jobs (its name) or ``timeout``
        passes (None)."""
        self._any.clear()
        for name in names:
            self.arm(name)
        if not self._first_seen(names):
            self._any.wait(timeout)
        return self._first_seen(names)

    def _first_seen(self, names: Sequence[str]) -> str | None:
        return next((name for name in names if name in self._seen), None)

    def _start(self) -> None:
        for name in self._queues:
            greenlet = gevent.spawn(self._watch, name)
            greenlet.name = f"gq-watcher-{name}"
            self._greenlets.append(greenlet)

    def _watch(self, name: str) -> None:
        armed, queue = self._armed[name], self._queues[name]
        while True:
            armed.wait()
            if self._step(queue):
                armed.clear()  # until the poller arms it again
                self._seen.add(name)
                self._any.set()

    def _step(self, queue: ScriptedQueue) -> bool:
        """One blocking wait on ``queue``'s signal; whether to wake the poller."""
        try:
            return wait_for_signal(queue, self._duration)
        except redis.RedisError as exc:
            log.warning("%s: waiting for the signal of %s failed: %s", self._context,
                        queue.keys.name, describe(exc))  # fmt: skip
            gevent.sleep(ERROR_PAUSE)
            return True  # the poller's fetch meets the error and backs off

    def close(self) -> None:
        """Stop every watcher (they only ever wait: no write is cut short)."""
        gevent.killall(self._greenlets, timeout=5)
        self._greenlets = []
