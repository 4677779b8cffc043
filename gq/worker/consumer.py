"""The Consumer: five greenlets (poller, processor, heartbeat, scheduler, custodian) around
one Redis connection pool, the run, the stop order and the signals (SPEC section 5). What
to fetch and when is gq/worker/poller.py's; running handlers is gq/worker/processor.py's."""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Callable, Union

import gevent
import redis
from gevent.event import Event

from gq import job as jobs
from gq.errors import ConfigurationError, GQError, ShutdownTimeoutError
from gq.options import ConsumerOptions
from gq.periodic import check_schedule
from gq.store.base import describe
from gq.store.config import check_queue_name, resolve_client
from gq.store.jobs import DEAD_TRIM_BATCH, RedisQueue
from gq.worker import asyncio_loop, watchdog
from gq.worker.facts import Reporter, report_interval
from gq.worker.loops import Loop, ThreadHeartbeat
from gq.worker.periodic_runner import PeriodicRunner
from gq.worker.poller import Poller, Source
from gq.worker.processor import Handler, Processor, Stats
from gq.worker.recorder import Recorder

log = logging.getLogger("gq.consumer")

# A local clock this far from the Redis server's is worth a warning: gq itself only uses
# Redis time for liveness, but curlyq consumers on the same queue use their own clocks.
CLOCK_SKEW_WARNING = 5.0
# Connections of a pool gq builds: the poller's blocking wait, the acker, the three
# maintenance loops, and room for failing jobs' retries; more callers wait their turn.
POOL_CONNECTIONS = 16
# When the grace period ran out (or a second signal came), the acknowledgements of jobs
# that did finish still get this long to go out, so that they do not run again.
FINAL_ACKS_SECONDS = 1.0
# The ticker greenlet's period at most (it proves to the thread heartbeat that the hub
# runs, and notices when it did not).
TICK_SECONDS = 1.0
# How often a consumer holding jobs reads the queues' cancel requests: a running job is
# interrupted within this (SPEC section 9: "within a second"), at one read per queue.
CANCEL_POLL = 0.5


Queues = Union[str, Sequence[str], Mapping[str, int]]


class Consumer:
    """Runs a handler for every job of ``queue``: one name, several in priority order
    (``["critical", "default"]``), or several with weights (``{"critical": 6,
    "default": 3}``: each fetch draws a queue by weight). See SPEC section 2 for
    ``options``."""

    def __init__(
        self,
        queue: Queues,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        periodic: Any = (),
        **options: Any,
    ) -> None:
        weights = _queue_weights(queue)
        self.queues = list(weights)
        self.queue = self.queues[0]
        self._weights = weights if isinstance(queue, Mapping) else None
        self.opts = _options(options)
        self.id = str(uuid.uuid4())
        client = _client(url, client, self.opts)
        self._queues = {name: RedisQueue(client, name) for name in self.queues}
        self._queue = self._queues[self.queue]
        self.inflight_key = self._queue.keys.inflight(self.id)
        self.context = f"queue={','.join(self.queues)} consumer={self.id}"
        entries = check_schedule(periodic)  # a list of gq.Periodic (gq/periodic.py)
        self._periodic = PeriodicRunner(self._queues, entries, self.context) if entries else None
        self.stats = Stats()
        # Count outcomes for the facts, the history and (gq.metrics.enable) the metrics,
        # one per queue.
        self.recorders = {name: Recorder(name) for name in self.queues}
        self._reporter: Reporter | None = None
        self._stop_requested = Event()
        self._force = Event()
        self._fatal: BaseException | None = None
        self._running = False
        self._processor: Processor | None = None
        self._poller: Poller | None = None
        self._skew_warned = False
        self._thread_heartbeat: ThreadHeartbeat | None = None
        self._tidy_cursors: dict[str, str] = {}  # where each queue's walk of recovered is

    # -- public API ---------------------------------------------------------------------

    @property
    def recorder(self) -> Recorder:
        """The first queue's recorder (``recorders`` holds one per queue)."""
        return self.recorders[self.queue]

    @recorder.setter
    def recorder(self, recorder: Recorder) -> None:
        self.recorders[self.queue] = recorder

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

    def stop_now(self) -> None:
        """Stop without waiting for running handlers (``run`` then raises
        ``ShutdownTimeoutError``; their jobs stay in flight for recovery); never blocks."""
        self._stop_now()

    # -- the run --------------------------------------------------------------------------

    def _run(self, handler: Handler) -> None:
        opts = self.opts
        self._register()  # before anything else; a failure raises at once
        log.info("%s: started (concurrency=%d, buffer=%s)", self.context,
                 opts.processor_concurrency, opts.poller_buffer_size)  # fmt: skip
        self._check_eviction_policy()
        watching = watchdog.enable(opts.hub_block_warning)
        self._start_thread_heartbeat()
        processor = self._build(handler)
        loops = self._loops()
        greenlets = self._start(loops, processor)
        self._stop_requested.wait()
        try:
            if self._fatal is None:
                self._shutdown(processor, loops, greenlets)
            if self._fatal is not None:
                # Jobs that finished are acknowledged even now (bounded), so that they
                # do not run again; the unfinished ones stay in flight for recovery.
                processor.flush_acks(FINAL_ACKS_SECONDS)
        finally:
            if watching:
                watchdog.disable()
            if self._thread_heartbeat is not None:
                self._thread_heartbeat.stop()
            # Whatever is still alive here is abandoned: no more Redis calls. Jobs of
            # killed handlers stay in flight for another consumer's custodian.
            gevent.killall([*greenlets.values(), *processor.abandon()], timeout=5)
        if self._fatal is not None:
            raise self._fatal
        log.info(
            "%s: stopped (done=%d failed=%d)", self.context, self.stats.done, self.stats.failed
        )

    def _build(self, handler: Handler) -> Processor:
        """The processor, the poller and the reporter of this run."""
        opts = self.opts
        asyncio_loop.install()  # before a sync handler calls asyncio.run()
        processor = self._processor = Processor(
            self._queues, self.id, opts, handler, self._abort, self.context, self.recorders
        )
        self._poller = Poller(self._sources(), self.id, opts, processor, self.context)
        self._reporter = Reporter(self._queues, self.id, opts, self.recorders, self.context)
        self.stats = processor.stats
        return processor

    def _start(self, loops: dict[str, Loop], processor: Processor) -> dict[str, gevent.Greenlet]:
        # The ticker first: greenlets run in the order spawned, and its clock must start
        # before the poller's first fetch puts jobs in flight (see _tick).
        greenlets = {"Ticker": self._spawn("Ticker", self._tick)}
        greenlets.update((name, self._spawn(name, loop.run)) for name, loop in loops.items())
        greenlets["Acker"] = self._spawn("Acker", processor.run_acker)
        return greenlets

    def _loops(self) -> dict[str, Loop]:
        """The poller, the maintenance loops and their intervals (read at every turn)."""
        opts = self.opts
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
            "Canceller": self._loop("Canceller", self.cancel_step, lambda: CANCEL_POLL, "poller"),
            "Reporter": self._loop(
                "Reporter", self.report_step, lambda: report_interval(opts), "heartbeat"
            ),
        }
        periodic = self._periodic
        if periodic is not None:  # sleeps until its next occurrence, at most the scheduler's
            loops["Periodic"] = self._loop(
                "Periodic",
                periodic.step,
                lambda: periodic.delay(opts.scheduler_poll_interval),
                "scheduler",
            )
        return loops

    def _shutdown(
        self, processor: Processor, loops: dict[str, Loop], greenlets: dict[str, gevent.Greenlet]
    ) -> None:
        """The stop order: stop fetching, give back the buffer, let handlers finish while
        the heartbeat keeps running, acknowledge, then stop the maintenance loops."""
        loops["Poller"].stopping.set()
        if self._poller is not None and self._poller.waiting:
            greenlets["Poller"].kill()  # only ever interrupted while it waits
        self._wait_for(greenlets["Poller"])
        self._reconcile_fetches()
        self._give_back(processor.take_buffered())
        if self._fatal is not None:
            return
        grace = self.opts.shutdown_grace_period or None  # 0 set on a live opts: wait forever
        deadline = None if grace is None else time.monotonic() + grace
        if not self._within_grace(gevent.spawn(processor.wait_quiet), deadline, grace):
            return
        # The acknowledgements too must go out within the grace period.
        if not self._within_grace(gevent.spawn(processor.flush_acks), deadline, grace):
            return
        if self._thread_heartbeat is not None:
            self._thread_heartbeat.stop()  # before the deregister it could undo
        maintenance = [name for name in loops if name != "Poller"]  # Periodic too, if any
        for name in maintenance:
            loops[name].stopping.set()
        for name in maintenance:
            self._wait_for(greenlets[name])
        if self._reporter is not None:
            self._reporter.final()  # the last minutes' counts; never raises
        try:
            for queue in self._queues.values():
                queue.deregister(self.id)
        except redis.RedisError as exc:
            log.warning("%s: could not deregister: %s", self.context, describe(exc))

    def _within_grace(
        self, greenlet: gevent.Greenlet, deadline: float | None, grace: float | None
    ) -> bool:
        """Wait for ``greenlet`` until ``deadline``; whether the stop may go on."""
        left = None if deadline is None else max(0.0, deadline - time.monotonic())
        self._wait_for(greenlet, timeout=left)
        if self._fatal is not None:
            return False
        if greenlet.dead:
            return True
        greenlet.kill()
        running = self._processor.running if self._processor else 0
        self._fatal = ShutdownTimeoutError(running, grace)
        log.error("%s: %s", self.context, self._fatal)
        return False

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
            log.debug("%s: could not read maxmemory-policy: %s", self.context, describe(exc))
            return
        if policy is not None and policy != "noeviction":
            log.warning(
                "%s: Redis evicts keys at maxmemory (maxmemory-policy %s): it can drop "
                "jobs; set maxmemory-policy noeviction",
                self.context,
                policy,
            )

    def _start_thread_heartbeat(self) -> None:
        self._thread_heartbeat = None
        twins = [queue.for_thread() for queue in self._queues.values()]
        if None in twins:  # cluster, Sentinel, fakeredis: the greenlet heartbeat only
            return
        opts = self.opts
        beat = ThreadHeartbeat(
            lambda: [twin.register(self.id) for twin in twins if twin is not None],
            opts.heartbeat_poll_interval,
            self.context,
            give_up_after=opts.custodian_consumer_timeout,
        )
        self._thread_heartbeat = beat
        beat.start()

    def _tick(self) -> None:
        """Prove to the thread heartbeat that the hub runs, and notice when it did not run
        for half the consumer timeout or more (C code that held it, a SIGSTOP): the lease
        ends between the consumer timeout and the timeout plus the heartbeat interval
        after the last beat, and the last beat may be an interval old already."""
        beat = self._thread_heartbeat
        # A stop between the poller's first fetch and this greenlet's first run (seen: a
        # SIGSTOP as soon as the jobs were in flight) would go unnoticed if the clock
        # started late: the ticker is spawned first, and starts with the thread
        # heartbeat's clock where there is one, taken before any greenlet ran.
        last = beat.last if beat is not None else time.monotonic()
        while True:
            gevent.sleep(min(TICK_SECONDS, self.opts.heartbeat_poll_interval / 4))
            now = time.monotonic()
            if self._thread_heartbeat is not None:
                self._thread_heartbeat.last = now
            if now - last > self.opts.custodian_consumer_timeout / 2:
                self._after_freeze(now - last)
            last = now

    def _after_freeze(self, seconds: float) -> None:
        """After the hub stood still that long, other consumers may have recovered this
        one's jobs: register again, and drop the buffered jobs that are no
        longer in this consumer's in-flight set (they run elsewhere now). Running jobs that
        were recovered finish here too, but every write for them (ack, retry, kill) finds
        them gone from the in-flight set and changes nothing."""
        processor = self._processor
        try:
            self._register()
            owned = {(n, i) for n, q in self._queues.items() for i in q.inflight_ids(self.id)}
        except (redis.RedisError, GQError) as exc:
            log.warning("%s: the hub stood still for %.1f s; could not check which jobs "
                        "this consumer still owns: %s", self.context, seconds,
                        describe(exc))  # fmt: skip
            return
        keep = lambda job: (job.queue, job.id) in owned  # noqa: E731
        dropped = processor.drop_buffered(keep) if processor else []
        log.warning(
            "%s: the hub stood still for %.1f s (blocked, or the process was stopped), so "
            "the lease may have ended and other consumers recovered its jobs: dropped %d "
            "buffered job(s) no longer its own; running jobs no longer its own will not be "
            "acknowledged",
            self.context,
            seconds,
            len(dropped),
        )

    def _reconcile_fetches(self) -> None:
        """Give back what a fetch cut short by the stop took (``reconcile_unsure``)."""
        try:
            if self._poller is not None:
                self._poller.reconcile_unsure()
        except redis.RedisError as exc:  # left in flight: the custodians recover them
            log.warning("%s: could not reconcile a cut fetch: %s", self.context, describe(exc))

    def _give_back(self, buffered: list[jobs.Job]) -> None:
        if not buffered:
            return
        try:
            by_queue: dict[str, list[str]] = {}
            for job in buffered:
                by_queue.setdefault(job.queue, []).append(job.id)
            count = sum(self._queues[name].requeue(self.id, ids) for name, ids in by_queue.items())
        except redis.RedisError as exc:
            # Left in flight: the custodians recover them once this consumer is gone.
            log.warning(
                "%s: could not give back %d buffered job(s): %s",
                self.context,
                len(buffered),
                describe(exc),
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
                log.error("%s: %s stopped: %s", self.context, name, describe(dead.exception))
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
            max_backoff=lambda: self._max_backoff(prefix),
            context=self.context,
        )

    def _max_backoff(self, prefix: str) -> float:
        cap: float = getattr(self.opts, f"{prefix}_max_backoff")
        if prefix == "heartbeat":
            # A failed heartbeat is tried again well within the lease, whatever the cap
            # says: waiting longer would let a custodian take this consumer for dead
            # after one lost reply, and its jobs would run twice.
            cap = min(cap, self.opts.custodian_consumer_timeout / 4)
        return cap

    # -- loop steps (one iteration each; True means "a full batch, go again at once") -------

    def poll_step(self) -> bool:
        assert self._poller is not None, "poll_step needs a running consumer"
        return self._poller.step()

    def _sources(self) -> list[Source]:
        weights = self._weights or {}
        return [Source(queue, weights.get(name, 1)) for name, queue in self._queues.items()]

    def _register(self) -> float:
        """Heartbeat on every queue; the server's time."""
        return min(queue.register(self.id) for queue in self._queues.values())

    def cancel_step(self) -> bool:
        """Act on the cancel requests (gq.Queue.cancel) for jobs this consumer holds: the
        held ids of each queue looked up in its cancel set every CANCEL_POLL seconds (one
        round trip per queue holding any), however many other requests stand there."""
        processor = self._processor
        if processor is None:
            return False
        for name, queue in self._queues.items():
            held = processor.held[name]
            wanted = queue.cancel_requested(list(held)) if held else set()
            if wanted:
                processor.cancel(name, wanted)
        return False

    def report_step(self) -> bool:
        """Write the facts and history (every report interval: never one write per job)."""
        if self._reporter is not None:
            self._reporter.beat()  # never raises
        return False

    def heartbeat_step(self) -> bool:
        server_now = self._register()
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
        limit = self.opts.scheduler_max_jobs
        moved = [queue.enqueue_due(limit) for queue in self._queues.values()]
        return max(moved) >= limit

    def custodian_step(self) -> bool:
        full = [self._custodian_pass(queue) for queue in self._queues.values()]
        return any(full)

    def _custodian_pass(self, queue: RedisQueue) -> bool:
        opts = self.opts
        timeout = opts.heartbeat_poll_interval + opts.custodian_consumer_timeout
        expired = queue.expired_consumers(timeout, opts.custodian_max_jobs)
        moved = queue.recover(
            self.id,
            expired,
            timeout=timeout,
            max_jobs=opts.custodian_max_jobs,
            max_recoveries=opts.job_max_recoveries,
            dead_max_jobs=opts.dead_max_jobs,
            dead_max_age=opts.dead_max_age,
        )
        if moved:
            self.recorders[queue.keys.name].recovered(moved)
            log.warning(
                "%s: recovered %d job(s) from %d dead consumer(s)",
                self.context,
                moved,
                len(expired),
            )
        return moved >= opts.custodian_max_jobs or self._tidy(queue) >= DEAD_TRIM_BATCH

    def _tidy(self, queue: RedisQueue) -> int:
        """Trim the dead set by age and size on the custodian's timer (not only when a job
        dies), and walk the recovered hash a step for counts whose job is gone; the number
        of dead jobs trimmed."""
        opts = self.opts
        cursor = self._tidy_cursors.get(queue.keys.name, "0")
        cursor, trimmed, dropped = queue.tidy(
            cursor, dead_max_jobs=opts.dead_max_jobs, dead_max_age=opts.dead_max_age
        )
        self._tidy_cursors[queue.keys.name] = cursor
        if trimmed or dropped:
            log.info("%s: trimmed %d dead job(s), dropped %d stale recovery count(s)",
                     self.context, trimmed, dropped)  # fmt: skip
        return trimmed


def _options(options: dict[str, Any]) -> ConsumerOptions:
    ConsumerOptions.check_names(options)
    return ConsumerOptions(**options)


def _client(url: str | None, client: Any, opts: ConsumerOptions) -> Any:
    # The blocking wait for the signal lasts poller_poll_duration: reads may take that
    # long, and only a silence well beyond it means the connection is gone.
    return resolve_client(
        url,
        client,
        max_connections=POOL_CONNECTIONS,
        socket_timeout=opts.poller_poll_duration + 10.0,
        socket_connect_timeout=10.0,
    )


def _queue_weights(queue: Queues) -> dict[str, int]:
    """Queue name -> weight, in the order given; a name alone weighs 1."""
    if isinstance(queue, str) or not isinstance(queue, (Mapping, Sequence)):
        return {check_queue_name(queue): 1}
    given = queue
    if isinstance(given, Mapping):
        weights = dict(given)
    else:
        weights = dict.fromkeys(given, 1)
        if len(weights) != len(list(given)):
            raise ConfigurationError(f"a queue is named twice in {list(given)!r}")
    if not weights:
        raise ConfigurationError("no queue: name at least one")
    for name, weight in weights.items():
        check_queue_name(name)
        if isinstance(weight, bool) or not isinstance(weight, int) or weight < 1:
            raise ConfigurationError(f"the weight of queue {name!r} must be an int >= 1")
    return weights


def _require_monkey_patching() -> None:
    from gevent import monkey

    if not monkey.is_module_patched("socket"):
        raise ConfigurationError(
            "gq's Consumer needs a gevent monkey-patched process: call "
            "`from gevent import monkey; monkey.patch_all()` before any other import, "
            "or run your handler with the gq-worker command, which does it for you"
        )
