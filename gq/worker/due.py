"""When the scheduler next has work: the earliest due time a consumer wrote (its own
retries), read (the scheduled sets' heads at each pass) or heard (a producer's delayed
enqueue publishes its due time on ``<scheduled key>:due``, from schedule.lua).

The scheduler loop sleeps until that time, at most its poll interval, and a sooner time
wakes it at once: a retry ``after=1`` runs a second later, not at the next poll.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Mapping
from typing import Any

import redis
from gevent.event import Event

from gq.store.base import as_text
from gq.store.jobs import RedisQueue

log = logging.getLogger("gq.scheduler")

#: How long the listener blocks for a message: also how late it notices a stop.
LISTEN_TIMEOUT = 0.25
# A head the server did not move although this host's clock says it is due (the clocks
# differ): looked at again this much later, not in a busy loop.
SKEW_RETRY = 0.05


def due_channel(queue: RedisQueue) -> str:
    """The channel a delayed enqueue publishes its earliest due time on (gq's, not curlyq's)."""
    return f"{queue.keys.scheduled}:due"


class DueTimes:
    """The earliest known due time and the event that wakes the scheduler for a sooner one."""

    def __init__(self) -> None:
        self.next = math.inf
        self.wake = Event()
        self._overdue = math.inf  # a head seen due by this host's clock at the last read

    def note(self, at: float) -> None:
        """A job is due at ``at`` (unix seconds): wake the scheduler if that is sooner."""
        if at < self.next:
            self.next = at
            self.wake.set()

    def read_heads(self, queues: Mapping[str, RedisQueue]) -> None:
        """After a pass: the earliest score left in the scheduled sets, one round trip each."""
        heads = [_head(queue) for queue in queues.values()]
        head = min([at for at in heads if at is not None], default=math.inf)
        now = time.time()
        if head > now:
            self.next, self._overdue = head, math.inf
        elif head != self._overdue:  # it came due while the pass was on the wire: again now
            self.next, self._overdue = now, head
        else:  # due by this host's clock, still not by the server's: the clocks differ
            self.next = now + SKEW_RETRY

    def delay(self, poll: float) -> float:
        """Seconds until the scheduler's next pass: the next due time, at most ``poll``."""
        return max(0.0, min(poll, self.next - time.time()))


def _head(queue: RedisQueue) -> float | None:
    head = queue.client.zrange(queue.keys.scheduled, 0, 0, withscores=True)
    return float(head[0][1]) if head else None


class DueListener:
    """Hears the due times producers publish for ``queues``; one pubsub connection, opened
    at the first step and again after a failure (the loop's backoff in between)."""

    def __init__(self, queues: Mapping[str, RedisQueue], due: DueTimes) -> None:
        self._queues = list(queues.values())
        self._due = due
        self._pubsub: Any = None
        self.refused = False  # the server's ACL refuses the channel: the poll alone, for good

    @property
    def usable(self) -> bool:
        # fakeredis polls (gq.store.signals) and a Cluster's pubsub is per node: both keep
        # the poll interval and the consumer's own retries.
        first = self._queues[0]
        return not first._embedded and not first.cluster

    def step(self) -> bool:
        if self.refused:
            return False
        try:
            message = self._next_message()
        except redis.exceptions.NoPermissionError as exc:
            self.close()
            self.refused = True
            log.warning("the server refuses the due-time channel (%s): delayed jobs run at "
                        "the scheduler's poll, a worker's own retries on time", exc)
            return False
        if message is not None and message.get("type") == "message":
            self._heard(message["data"])
        return False

    def _next_message(self) -> Any:
        if self._pubsub is None:
            self._subscribe()
        try:
            return self._pubsub.get_message(ignore_subscribe_messages=True,
                                            timeout=LISTEN_TIMEOUT)  # fmt: skip
        except Exception:
            self.close()  # a fresh connection at the next step
            raise

    def _subscribe(self) -> None:
        client: Any = self._queues[0].client  # a plain redis.Redis (usable says so)
        pubsub = client.pubsub()
        pubsub.subscribe(*[due_channel(queue) for queue in self._queues])
        self._pubsub = pubsub

    def _heard(self, data: Any) -> None:
        try:
            self._due.note(float(as_text(data)))
        except ValueError:  # not gq's message: nothing to wake for
            log.debug("ignored a due-time message %r", data)

    def close(self) -> None:
        pubsub, self._pubsub = self._pubsub, None
        if pubsub is not None:
            try:
                pubsub.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                log.debug("could not close the due-time subscription", exc_info=True)
