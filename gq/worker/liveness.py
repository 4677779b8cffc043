"""How a consumer proves it is alive (SPEC section 5): the heartbeat step, the thread
heartbeat for a starved hub, and the ticker that notices when the hub stood still (a
SIGSTOP, C code that held it) long enough for the lease to end."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Callable

import gevent
import redis

from gq.errors import GQError
from gq.job import Job
from gq.options import ConsumerOptions
from gq.store.base import describe
from gq.store.jobs import RedisQueue
from gq.worker.facts import Reporter
from gq.worker.loops import ThreadHeartbeat

log = logging.getLogger("gq.consumer")

# A local clock this far from the Redis server's is worth a warning: gq itself only uses
# Redis time for liveness, but curlyq consumers on the same queue use their own clocks.
CLOCK_SKEW_WARNING = 5.0
# The ticker greenlet's period at most (it proves to the thread heartbeat that the hub
# runs, and notices when it did not).
TICK_SECONDS = 1.0

# Takes out of the buffer the jobs a predicate rejects (Processor.drop_buffered).
DropBuffered = Callable[[Callable[[Job], bool]], list[Job]]
# What the buffer holds now (Processor.buffered_jobs).
Buffered = Callable[[], list[Job]]


class Liveness:
    """The heartbeats of one consumer on each of its ``queues``. ``reporter`` is the
    running consumer's (facts and history go with the heartbeat), None between runs."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        consumer_id: str,
        opts: ConsumerOptions,
        context: str,
    ) -> None:
        self._queues = queues
        self._id = consumer_id
        self._opts = opts
        self._context = context
        self.reporter: Reporter | None = None
        self.thread_heartbeat: ThreadHeartbeat | None = None
        self._skew_warned = False

    def register(self) -> float:
        """Heartbeat on every queue; the server's time."""
        return min(queue.register(self._id) for queue in self._queues.values())

    def heartbeat_step(self) -> bool:
        server_now = self.register()
        if self.reporter is not None:
            self.reporter.beat(server_now)  # facts and history; never raises
        skew = time.time() - server_now
        if abs(skew) > CLOCK_SKEW_WARNING and not self._skew_warned:
            self._skew_warned = True
            log.warning("%s: this host's clock is %+.1f s off the Redis server's; gq uses "
                        "the server's clock, but curlyq consumers on this queue do not",
                        self._context, skew)  # fmt: skip
        return False

    def start_thread_heartbeat(self) -> None:
        self.thread_heartbeat = None
        twins = [queue.for_thread() for queue in self._queues.values()]
        if None in twins:  # cluster, Sentinel, fakeredis: the greenlet heartbeat only
            return
        opts = self._opts
        beat = ThreadHeartbeat(
            lambda: [twin.register(self._id) for twin in twins if twin is not None],
            opts.heartbeat_poll_interval,
            self._context,
            give_up_after=opts.custodian_consumer_timeout,
        )
        self.thread_heartbeat = beat
        beat.start()

    def stop_thread_heartbeat(self) -> None:
        if self.thread_heartbeat is not None:
            self.thread_heartbeat.stop()

    def tick(self, drop_buffered: DropBuffered, buffered: Buffered) -> None:
        """Prove to the thread heartbeat that the hub runs, and notice when it did not run
        for half the consumer timeout or more (C code that held it, a SIGSTOP): the lease
        ends between the consumer timeout and the timeout plus the heartbeat interval
        after the last beat, and the last beat may be an interval old already."""
        beat = self.thread_heartbeat
        # A stop between the poller's first fetch and this greenlet's first run (seen: a
        # SIGSTOP as soon as the jobs were in flight) would go unnoticed if the clock
        # started late: the ticker is spawned first, and starts with the thread
        # heartbeat's clock where there is one, taken before any greenlet ran.
        last = beat.last if beat is not None else time.monotonic()
        while True:
            gevent.sleep(min(TICK_SECONDS, self._opts.heartbeat_poll_interval / 4))
            now = time.monotonic()
            if self.thread_heartbeat is not None:
                self.thread_heartbeat.last = now
            if now - last > self._opts.custodian_consumer_timeout / 2:
                self._after_freeze(now - last, drop_buffered, buffered)
            last = now

    def _registered_again(self) -> set[tuple[str, str]]:
        """Register, and read the (queue, id) of every job this consumer still owns."""
        self.register()
        return {(n, i) for n, q in self._queues.items() for i in q.inflight_ids(self._id)}

    def _after_freeze(self, seconds: float, drop_buffered: DropBuffered,
                      buffered: Buffered) -> None:  # fmt: skip
        """After the hub stood still that long, other consumers may have recovered this
        one's jobs: register again, and drop the buffered jobs that are no
        longer in this consumer's in-flight set (they run elsewhere now). Running jobs that
        were recovered finish here too, but every write for them (ack, retry, kill) finds
        them gone from the in-flight set and changes nothing.

        Only jobs buffered before the in-flight set is read may be dropped: reading it
        yields, and a fetch that lands meanwhile buffers jobs this consumer owns that the
        read did not see. Dropped, they stayed in flight for good (the consumer lives on
        and heartbeats, so no custodian recovers them)."""
        # id -> the job itself: held, so that no job fetched meanwhile can take its id().
        before = {id(job): job for job in buffered()}
        try:
            owned = self._registered_again()
        except (redis.RedisError, GQError) as exc:
            log.warning("%s: the hub stood still for %.1f s; could not check which jobs "
                        "this consumer still owns: %s", self._context, seconds,
                        describe(exc))  # fmt: skip
            return
        dropped = drop_buffered(lambda job: id(job) not in before or (job.queue, job.id) in owned)
        log.warning("%s: the hub stood still for %.1f s (blocked, or the process was "
                    "stopped), so the lease may have ended and other consumers recovered "
                    "its jobs: dropped %d buffered job(s) no longer its own; running jobs "
                    "no longer its own will not be acknowledged", self._context, seconds,
                    len(dropped))  # fmt: skip
