"""Waiting on the signals of queues in several Cluster slots (a sharded queue's shards):
one greenlet per queue blocked on its own signal, waking the poller (SPEC section 4's
protocol, per queue).

One BLPOP cannot span slots, and a short wait on each queue in turn sees a job up to a
poll duration late. A watcher costs a greenlet and a connection to its queue's master
while it waits, and nothing while the poller fetches: once its signal is seen it stops
until the poller waits again. The signal stays in its list (BLMOVE of the list onto
itself) until a fetch finds fewer jobs than it asked for, so a wake is never lost: a
signal raised while the poller fetched is still there when it next waits.
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
    seconds in one blocking call; ``wait(indexes, timeout)`` for the poller."""

    def __init__(self, queues: Sequence[ScriptedQueue], duration: float, context: str) -> None:
        self._queues = list(queues)
        self._duration = duration
        self._context = context
        self._armed = [Event() for _ in self._queues]
        self._woken: set[int] = set()
        self._any = Event()
        self._greenlets: list[gevent.Greenlet] = []

    def wait(self, indexes: Sequence[int], timeout: float) -> int | None:
        """Block until one of the queues at ``indexes`` may have jobs (its index) or
        ``timeout`` passes (None)."""
        if not self._greenlets:
            self._start()
        self._any.clear()
        self._woken.clear()
        for index in indexes:
            self._armed[index].set()
        self._any.wait(timeout)
        woken = [index for index in indexes if index in self._woken]
        return woken[0] if woken else None

    def _start(self) -> None:
        for index, queue in enumerate(self._queues):
            greenlet = gevent.spawn(self._watch, index)
            greenlet.name = f"gq-watcher-{queue.keys.name}"
            self._greenlets.append(greenlet)

    def _watch(self, index: int) -> None:
        armed, queue = self._armed[index], self._queues[index]
        while True:
            armed.wait()
            if self._step(queue):
                armed.clear()  # until the poller waits again
                self._woken.add(index)
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
