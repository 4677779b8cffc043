"""The Consumer: five greenlets (poller, processor, heartbeat, scheduler, custodian) around
one Redis connection pool, with a graceful stop (SPEC section 5)."""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Iterable
from typing import Any, Callable

import gevent
import redis
from gevent.event import Event

from gq import job as jobs
from gq._config import check_queue_name, resolve_client
from gq.errors import ConfigurationError, GQError, ShutdownTimeoutError
from gq.facts import Reporter
from gq.job import MessageDecodeError
from gq.loops import Loop, ThreadHeartbeat
from gq.options import ConsumerOptions
from gq.processor import Handler, Processor, Stats
from gq.recorder import Recorder
from gq.redis_queue import MAX_BATCH, RedisQueue

log = logging.getLogger("gq.consumer")

# A local clock this far from the Redis server's is worth a warning: gq itself only uses
# Redis time for liveness, but curlyq consumers on the same queue use their own clocks.
CLOCK_SKEW_WARNING = 5.0
# Connections of a pool gq builds: the poller's blocking wait, the acker, the three
# maintenance loops, and room for failing jobs' retries; more callers wait their turn.
POOL_CONNECTIONS = 16


class Consumer:
    """Runs a handler for every job of queue ``queue``; see SPEC section 2 for ``options``."""

    def __init__(
        self,
        queue: str,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        **options: Any,
    ) -> None:
        self.queue = check_queue_name(queue)
        unknown = set(options) - set(ConsumerOptions.names())
        if unknown:
            raise ConfigurationError(f"unknown consumer option(s): {', '.join(sorted(unknown))}")
        self.opts = ConsumerOptions(**options)
        self.id = str(uuid.uuid4())
        # The blocking wait for the signal lasts poller_poll_duration: reads may take
        # that long, and only a silence well beyond it means the connection is gone.
        client = resolve_client(
            url,
            client,
            max_connections=POOL_CONNECTIONS,
            socket_timeout=self.opts.poller_poll_duration + 10.0,
            socket_connect_timeout=10.0,
        )
        self._queue = RedisQueue(client, self.queue)
        self.inflight_key = self._queue.keys.inflight(self.id)
        self.context = f"queue={self.queue} consumer={self.id}"
        self.stats = Stats()
        # Counts outcomes for the facts, the history and (gq.metrics.enable) the metrics.
        self.recorder = Recorder(self.queue)
        self._reporter: Reporter | None = None
        self._stop_requested = Event()
        self._force = Event()
        self._fatal: BaseException | None = None
        self._running = False
        self._processor: Processor | None = None
        self._poller_waiting = False
        self._more_ready = False  # the last fetch was full: jobs are probably waiting
        self._skew_warned = False
        self._fetch_unsure = False  # a fetch failed: its reply (and jobs) may be lost
        self._isolate = False  # a suspect job runs, or waits for this consumer to be idle
        self._thread_heartbeat: ThreadHeartbeat | None = None
        self._ticker: gevent.Greenlet | None = None

    # -- public API ---------------------------------------------------------------------

    def run(self, handler: Handler) -> None:
        """Process jobs until ``stop()``; return after a clean stop, raise on a fatal error."""
        _require_monkey_patching()
        if not callable(handler):
            raise ConfigurationError(f"handler must be callable, not {handler!r}")
        if self._running:
            raise GQError("this consumer is already running")
        self._running = True
        try:
            self._run(handler)
        finally:
            self._running = False
            self._stop_requested = Event()
            self._force = Event()
            self._fatal = None

    def consume(
        self, handler: Handler, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)
    ) -> None:
        """``run`` with signal handling: the first signal stops gracefully, a second at once."""
        received = 0

        def on_signal(signum: int = 0) -> None:
            nonlocal received
            received += 1
            if received == 1:
                log.info(
                    "%s: signal received, stopping gracefully (again to stop now)", self.context
                )
                self.stop()
            else:
                log.warning("%s: second signal, stopping now", self.context)
                self._stop_now()

        sigs = list(signals)
        previous = {sig: signal.getsignal(sig) for sig in sigs}
        watchers = [gevent.signal_handler(sig, on_signal) for sig in sigs]
        try:
            self.run(handler)
        finally:
            for watcher in watchers:
                watcher.cancel()
            for sig, old in previous.items():
                if old is not None:
                    signal.signal(sig, old)

    def stop(self) -> None:
        """Ask for a graceful stop and return at once; never blocks, never raises."""
        self._stop_requested.set()

    # -- the run --------------------------------------------------------------------------

    def _run(self, handler: Handler) -> None:
        opts = self.opts
        self._queue.register(self.id)  # before anything else; a failure raises at once
        log.info(
            "%s: started (concurrency=%d, buffer=%d)",
            self.context,
            opts.processor_concurrency,
            opts.poller_buffer_size,
        )
        self._check_eviction_policy()
        self._start_thread_heartbeat()
        processor = self._processor = Processor(
            self._queue, self.id, opts, handler, self._abort, self.context, self.recorder
        )
        self._reporter = Reporter(self._queue, self.id, opts, self.recorder, self.context)
        self.stats = processor.stats
        loops = {
            "Poller": self._loop("Poller", self.poll_step, lambda: 0.0, "poller"),
            "Heartbeat": self._loop(
                "Heartbeat", self.heartbeat_step, lambda: opts.heartbeat_poll_interval, "heartbeat"
            ),
            "Scheduler": self._loop(
                "Scheduler", self.scheduler_step, lambda: opts.scheduler_poll_interval, "scheduler"
            ),
            "Custodian": self._loop(
                "Custodian", self.custodian_step, lambda: opts.custodian_poll_interval, "custodian"
            ),
        }
        greenlets = {name: self._spawn(name, loop.run) for name, loop in loops.items()}
        greenlets["Acker"] = self._spawn("Acker", processor.acker.run)
        if self._ticker is not None:
            greenlets["Ticker"] = self._ticker
        self._stop_requested.wait()
        try:
            if self._fatal is None:
                self._shutdown(processor, loops, greenlets)
        finally:
            if self._thread_heartbeat is not None:
                self._thread_heartbeat.stop()
            # Whatever is still alive here is abandoned: no more Redis calls. Jobs of
            # killed handlers stay in flight for another consumer's custodian.
            gevent.killall([*greenlets.values(), *processor.workers], timeout=5)
        if self._fatal is not None:
            raise self._fatal
        log.info(
            "%s: stopped (done=%d failed=%d)", self.context, self.stats.done, self.stats.failed
        )

    def _shutdown(
        self, processor: Processor, loops: dict[str, Loop], greenlets: dict[str, gevent.Greenlet]
    ) -> None:
        """The stop order: stop fetching, give back the buffer, let handlers finish while
        the heartbeat keeps running, acknowledge, then stop the maintenance loops."""
        loops["Poller"].stopping.set()
        if self._poller_waiting:
            greenlets["Poller"].kill()  # only ever interrupted while it waits
        self._wait_for(greenlets["Poller"])
        self._give_back(processor.take_buffered())
        if self._fatal is not None:
            return
        grace = self.opts.shutdown_grace_period or None  # 0 set on a live opts: wait forever
        joiner = gevent.spawn(processor.wait_quiet)
        self._wait_for(joiner, timeout=grace)
        if self._fatal is not None:
            return
        if not joiner.dead:
            joiner.kill()
            self._fatal = ShutdownTimeoutError(processor.running, grace)
            log.error("%s: %s", self.context, self._fatal)
            return
        self._wait_for(gevent.spawn(processor.acker.flush))
        if self._fatal is not None:
            return
        if self._thread_heartbeat is not None:
            self._thread_heartbeat.stop()  # before the deregister it could undo
        for name in ("Heartbeat", "Scheduler", "Custodian"):
            loops[name].stopping.set()
        for name in ("Heartbeat", "Scheduler", "Custodian"):
            self._wait_for(greenlets[name])
        if self._reporter is not None:
            self._reporter.final()  # the last minutes' counts; never raises
        try:
            self._queue.deregister(self.id)
        except redis.RedisError as exc:
            log.warning("%s: could not deregister: %s", self.context, exc)

    def _wait_for(self, greenlet: gevent.Greenlet, timeout: float | None = None) -> None:
        """Wait for ``greenlet``, but no longer than a fatal error or a forced stop."""
        gevent.wait([greenlet, self._force], count=1, timeout=timeout)
        if self._force.is_set() and self._fatal is None and not greenlet.dead:
            unfinished = self._processor.running if self._processor else 0
            self._fatal = ShutdownTimeoutError(unfinished, None)

    def _check_eviction_policy(self) -> None:
        try:
            policy = self._queue.eviction_policy()
        except redis.RedisError as exc:  # CONFIG refused (ACL) or unknown: not ours to judge
            log.debug("%s: could not read maxmemory-policy: %s", self.context, exc)
            return
        if policy is not None and policy != "noeviction":
            log.warning(
                "%s: Redis evicts keys at maxmemory (maxmemory-policy %s): it can drop "
                "jobs; set maxmemory-policy noeviction",
                self.context,
                policy,
            )

    def _start_thread_heartbeat(self) -> None:
        self._thread_heartbeat = self._ticker = None
        twin = self._queue.for_thread()
        if twin is None:  # cluster, Sentinel, fakeredis: the greenlet heartbeat only
            return
        beat = ThreadHeartbeat(
            lambda: twin.register(self.id), self.opts.heartbeat_poll_interval, self.context
        )
        self._thread_heartbeat = beat
        beat.start()

        def tick() -> None:  # proves to the thread that the hub runs
            while True:
                beat.last = time.monotonic()
                gevent.sleep(beat.interval / 4)

        self._ticker = self._spawn("Ticker", tick)

    def _give_back(self, buffered: list[jobs.Job]) -> None:
        if not buffered:
            return
        try:
            count = self._queue.requeue(self.id, [job.id for job in buffered])
        except redis.RedisError as exc:
            # Left in flight: the custodians recover them once this consumer is gone.
            log.warning(
                "%s: could not give back %d buffered job(s): %s", self.context, len(buffered), exc
            )
            return
        log.info("%s: gave back %d buffered job(s)", self.context, count)

    def _stop_now(self) -> None:
        self._force.set()
        self._stop_requested.set()

    def _abort(self, error: BaseException) -> None:
        if self._fatal is None:
            self._fatal = error
        self._force.set()
        self._stop_requested.set()

    def _spawn(self, name: str, target: Callable[[], None]) -> gevent.Greenlet:
        greenlet = gevent.Greenlet(target)
        greenlet.name = f"gq-{name.lower()}"

        def on_death(dead: gevent.Greenlet) -> None:
            if dead.exception is not None:
                log.error("%s: %s stopped: %r", self.context, name, dead.exception)
                self._abort(dead.exception)

        greenlet.link_exception(on_death)
        greenlet.start()
        return greenlet

    def _loop(
        self, name: str, step: Callable[[], bool], interval: Callable[[], float], prefix: str
    ) -> Loop:
        return Loop(
            name,
            step,
            interval=interval,
            max_attempts=lambda: getattr(self.opts, f"{prefix}_max_attempts") or 0,
            max_backoff=lambda: getattr(self.opts, f"{prefix}_max_backoff"),
            context=self.context,
        )

    # -- loop steps (one iteration each; True means "a full batch, go again at once") -------

    def poll_step(self) -> bool:
        processor = self._processor
        assert processor is not None, "poll_step needs a running consumer"
        if self._fetch_unsure:  # first: with the queue empty, no fetch may come for long
            self._reconcile(processor)
        # Waiting for room in the buffer or for the signal changes nothing in Redis, so a
        # stop may interrupt the poller there (and only there).
        self._poller_waiting = True
        try:
            if self._isolate:
                # A suspect job (recovered from a crashed consumer) runs alone, or is next
                # and must: if it crashes this process too, only it is charged a recovery.
                processor.wait_idle()
            processor.wait_for_room()
            # After a full batch the signal is still there (fetch clears it only when it
            # finds fewer jobs than asked for): skip the wait's round trip and fetch again.
            if not self._more_ready:
                if not self._queue.wait_for_signal(self.opts.poller_poll_duration):
                    return True
        finally:
            self._poller_waiting = False
        # Only the poller adds to the buffer, so its room can only grow until the put.
        count = min(processor.room(), MAX_BATCH)
        self._more_ready = False
        self._fetch_unsure = True  # until its jobs are buffered or discarded
        fetched = self._queue.fetch(self.id, count, idle=processor.idle())
        self._isolate = fetched.suspect
        # A batch cut short before a suspect leaves jobs behind it: look again at once.
        self._more_ready = len(fetched) == count or fetched.suspect
        good: list[jobs.Job] = []
        bad: list[tuple[str, bytes | None, str]] = []
        decode = jobs.decode
        for job_id, message in fetched:
            try:
                if message is None:
                    raise MessageDecodeError("its message is missing")
                job = decode(message)
                if job.id != job_id:
                    raise MessageDecodeError(f"its message names another id, {job.id!r}")
            except MessageDecodeError as exc:
                bad.append((job_id, message, str(exc)))
                continue
            good.append(job)
        processor.put(good)
        self._discard(bad)
        self._fetch_unsure = False
        return True

    def _reconcile(self, processor: Processor) -> None:
        """After a failed fetch: give back the jobs Redis says this consumer holds but
        this process does not (a fetch whose reply was lost). Only the poller fetches,
        and it is here, so no fetch is in flight; an id acknowledged meanwhile is not
        in the set any more, and requeue moves only what it still finds there."""
        stray = self._queue.inflight_ids(self.id) - processor.held
        if stray:
            count = self._queue.requeue(self.id, sorted(stray))
            log.warning("%s: a fetch's reply was lost; gave back %d job(s)", self.context, count)
        self._fetch_unsure = False

    def _discard(self, bad: list[tuple[str, bytes | None, str]]) -> None:
        """Bad data never stalls the consumer nor fails the rest of the batch (the good
        jobs are already buffered): undecodable messages go to dead, kept as they are
        for inspection; an id without a message has nothing to keep and is dropped."""
        processor = self._processor
        assert processor is not None
        for job_id, message, reason in bad:
            if message is None:
                self._queue.ack(self.id, [job_id])
                log.error("%s: dropped job %s: %s", self.context, job_id, reason)
            else:
                processor.kill(job_id, None)
                log.error(
                    "%s: moved job %s to dead: cannot decode: %s", self.context, job_id, reason
                )

    def heartbeat_step(self) -> bool:
        server_now = self._queue.register(self.id)
        if self._reporter is not None:
            self._reporter.beat(server_now)  # facts and history; never raises
        skew = time.time() - server_now
        if abs(skew) > CLOCK_SKEW_WARNING and not self._skew_warned:
            self._skew_warned = True
            log.warning(
                "%s: this host's clock is %+.1f s off the Redis server's; gq uses "
                "the server's clock, but curlyq consumers on this queue do not",
                self.context,
                skew,
            )
        return False

    def scheduler_step(self) -> bool:
        moved = self._queue.enqueue_due(self.opts.scheduler_max_jobs)
        return moved >= self.opts.scheduler_max_jobs

    def custodian_step(self) -> bool:
        opts = self.opts
        timeout = opts.heartbeat_poll_interval + opts.custodian_consumer_timeout
        expired = self._queue.expired_consumers(timeout, opts.custodian_max_jobs)
        moved = self._queue.recover(
            self.id,
            expired,
            timeout=timeout,
            max_jobs=opts.custodian_max_jobs,
            max_recoveries=opts.job_max_recoveries,
            dead_max_jobs=opts.dead_max_jobs,
            dead_max_age=opts.dead_max_age,
        )
        if moved:
            self.recorder.recovered(moved)
            log.warning(
                "%s: recovered %d job(s) from %d dead consumer(s)",
                self.context,
                moved,
                len(expired),
            )
        return moved >= opts.custodian_max_jobs


def _require_monkey_patching() -> None:
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        raise ConfigurationError(
            "gq's Consumer needs a gevent monkey-patched process: call "
            "`from gevent import monkey; monkey.patch_all()` before any other import, "
            "or run your handler with the gq-worker command, which does it for you"
        )
