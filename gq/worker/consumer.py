"""The Consumer's lifecycle (SPEC section 5): build one run, start its greenlets (the
ticker, the poller, the acker, and the heartbeat, scheduler, custodian, canceller,
reporter and periodic loops), wait for a stop, and stop in order.

Where the rest lives: what the consumer is given, resolved, in gq/worker/arguments.py;
one run's rooms and loops in gq/worker/run.py; the heartbeats in gq/worker/liveness.py;
the scheduler and the custodian in gq/worker/maintenance.py.
"""

from __future__ import annotations

import logging
import signal
import time
import uuid
from collections.abc import Iterable, Mapping
from functools import partial
from typing import Any, Callable

import gevent
import redis
from gevent.event import Event

from gq.errors import ConfigurationError, GQError, ShutdownTimeoutError
from gq.options import ConsumerOptions
from gq.periodic import check_schedule
from gq.store.base import describe
from gq.store.jobs import RedisQueue
from gq.store.reshard import Serving
from gq.worker import asyncio_loop, watchdog
from gq.worker.arguments import (
    Queues,
    consumer_client,
    consumer_options,
    expand_shards,
    periodic_on_shards,
    queue_weights,
    require_monkey_patching,
)
from gq.worker.identity import Claim, Name, check_name
from gq.worker.liveness import Liveness
from gq.worker.loops import Loop
from gq.worker.maintenance import Maintenance, check_eviction_policy
from gq.worker.periodic_runner import PeriodicRunner
from gq.worker.poller import Poller, Source
from gq.worker.processor import Handler, Processor
from gq.worker.recorder import Recorder, Stats
from gq.worker.run import Run, run_loops
from gq.worker.shard_limits import balancer_for, served_by, served_now

log = logging.getLogger("gq.consumer")

# When the grace period ran out (or a second signal came), the acknowledgements of jobs
# that did finish still get this long to go out, so that they do not run again.
FINAL_ACKS_SECONDS = 1.0

Greenlets = dict[str, gevent.Greenlet]


class Consumer:
    """Runs a handler for every job of ``queue``: one name, several in priority order
    (``["critical", "default"]``), or several with weights (``{"critical": 6,
    "default": 3}``: each fetch draws a queue by weight). ``options`` (a
    ``gq.ConsumerOptions``) and the keyword options (SPEC section 2) may be combined:
    the keywords win. ``shards`` names sharded queues and their counts (``{"emails": 8}``):
    the consumer serves every shard of each, drawn evenly in its turn."""

    def __init__(
        self,
        queue: Queues,
        *,
        url: str | None = None,
        client: redis.Redis | Any | None = None,
        periodic: Any = (),
        options: ConsumerOptions | None = None,
        name: str | Name | None = None,
        shards: Mapping[str, int] | None = None,
        **overrides: Any,
    ) -> None:
        self._given = (queue, dict(shards or {}), periodic)
        self.opts = consumer_options(options, overrides)
        self.id = str(uuid.uuid4())
        # Who it is across restarts (gq/worker/identity.py); None: nobody in particular.
        self._name = Name(check_name(name)) if isinstance(name, str) else name
        self.name: str | None = None  # the name it holds once running
        self._client = consumer_client(url, client, self.opts)
        self._lay_out({})
        self._between_runs()
        self._running = False
        self._processor: Processor | None = None
        self._poller: Poller | None = None

    def _lay_out(self, found: Mapping[str, Serving]) -> None:
        """The queues served (a sharded queue's shards: those Redis lists in ``found``,
        the old ones too while a reshard drains, else its count's) and the parts that
        depend on them."""
        queue, shards, periodic = self._given
        served = {name: serving.queues for name, serving in found.items()}
        weights, self.families = expand_shards(queue_weights(queue), shards, served)
        self._current = {name: serving.current for name, serving in found.items()}
        self.queues = list(weights)
        self.queue = self.queues[0]
        self._weights = weights if isinstance(queue, Mapping) or self.families else None
        self._queues = {name: RedisQueue(self._client, name) for name in self.queues}
        self._queue = self._queues[self.queue]
        self.inflight_key = self._queue.keys.inflight(self.id)
        self.context = f"queue={','.join(self.queues)} consumer={self.id}"
        self._periodic = self._periodic_runner(periodic)
        self._parts()

    def _periodic_runner(self, periodic: Any) -> PeriodicRunner:
        # A list of gq.Periodic (gq/periodic.py); a sharded queue's on its name's shard.
        entries = periodic_on_shards(check_schedule(periodic), self.families, self._current)
        # Always a runner: schedules added at runtime (gq/schedules.py) are read with the
        # heartbeat's interval, whether or not the code gave any.
        return PeriodicRunner(self._queues, entries, self.context,
                              reload_every=self.opts.heartbeat_poll_interval)  # fmt: skip

    def _between_runs(self) -> None:
        """No stop asked for, nothing fatal: ready for a run."""
        self._relayout_asked = self._stop_wanted = False
        self._stop_requested = Event()
        self._force = Event()
        self._fatal: BaseException | None = None

    def _parts(self) -> None:
        """What outlives a run: the counters, the heartbeats, the maintenance steps."""
        # One per queue: the outcome counts for the facts, the history, the metrics
        # (gq.metrics.enable replaces them before a run) and ``stats``.
        self.recorders: dict[str, Recorder] = {name: Recorder(name) for name in self.queues}
        self.stats = Stats(self.recorders)
        self._liveness = Liveness(self._queues, self.id, self.opts, self.context)
        maintenance = Maintenance(self._queues, self.id, self.opts, self.recorders, self.context)
        self._maintenance = maintenance
        self._balancer = balancer_for(self._client, self.families, self.id, self.context,
                                      self._relayout)  # fmt: skip
        # The steps, callable alone (tests, tools) whether the consumer runs or not.
        self.heartbeat_step = self._liveness.heartbeat_step
        self.scheduler_step = maintenance.scheduler_step
        self.custodian_step = maintenance.custodian_step

    # -- public API ---------------------------------------------------------------------

    @property
    def recorder(self) -> Recorder:
        """The first queue's recorder (``recorders`` holds one per queue)."""
        return self.recorders[self.queue]

    def gauges(self) -> tuple[int, int]:
        """Handlers running and jobs buffered now (0, 0 between runs)."""
        processor = self._processor
        return (processor.running, processor.buffered()) if processor else (0, 0)

    def run(self, handler: Handler) -> None:
        """Process jobs until ``stop()``; return after a clean stop, raise on a fatal error."""
        require_monkey_patching()
        if not callable(handler):
            raise ConfigurationError(f"handler must be callable, not {handler!r}")
        if self._running:
            raise GQError("this consumer is already running")
        self._running = True
        try:
            self._follow_layout()
            self._run(handler)
            while self._relayout_asked and self._fatal is None and not self._stop_wanted:
                self._between_runs()
                self._follow_layout()
                self._run(handler)
        finally:
            self._running = False
            self._between_runs()

    def consume(
        self, handler: Handler, signals: Iterable[int] = (signal.SIGINT, signal.SIGTERM)
    ) -> None:
        """``run`` with signal handling: the first signal stops gracefully, a second at once."""
        sigs = list(signals)
        previous = {sig: signal.getsignal(sig) for sig in sigs}
        on_signal = self._signal_handler()
        watchers = [gevent.signal_handler(sig, on_signal) for sig in sigs]
        try:
            self.run(handler)
        finally:
            for watcher in watchers:
                watcher.cancel()
            for sig, old in previous.items():
                if old is not None:
                    signal.signal(sig, old)

    def _relayout(self) -> None:
        """A sharded queue was resharded, or its old layout retired: stop as gracefully as
        for any stop, then run again over the shards Redis now lists."""
        log.info("%s: a sharded queue's layout changed: restarting over it", self.context)
        self._relayout_asked = True
        self._stop_requested.set()

    def _follow_layout(self) -> None:
        """Serve what Redis says each sharded queue is made of (gq/store/reshard.py)."""
        found = served_now(self._client, self.families)
        if {name: s.queues for name, s in found.items()} != served_by(self.families):
            self._lay_out(found)

    def stop(self) -> None:
        """Ask for a graceful stop and return at once; never blocks, never raises."""
        self._stop_wanted = True  # not a restart over a new layout (_relayout)
        self._stop_requested.set()

    def stop_now(self) -> None:
        """Stop without waiting for running handlers (``run`` then raises
        ``ShutdownTimeoutError``; their jobs stay in flight for recovery); never blocks."""
        self._stop_now()

    # -- the run --------------------------------------------------------------------------

    def _signal_handler(self) -> Callable[..., None]:
        received = 0

        def on_signal(signum: int = 0) -> None:
            nonlocal received
            received += 1
            if received == 1:
                log.info("%s: signal received, stopping gracefully (again to stop now)",
                         self.context)  # fmt: skip
                self.stop()
            else:
                log.warning("%s: second signal, stopping now", self.context)
                self._stop_now()

        return on_signal

    def _run(self, handler: Handler) -> None:
        opts, liveness = self.opts, self._liveness
        liveness.register()  # before anything else; a failure raises at once
        check_eviction_policy(self._queue, self.context)
        run = self._build(handler)
        self._claim_name(run)
        log.info("%s: started (concurrency=%d, buffer=%s)", self.context,
                 opts.processor_concurrency, opts.poller_buffer_size)  # fmt: skip
        watching = watchdog.enable(opts.hub_block_warning)
        liveness.start_thread_heartbeat()
        loops = run_loops(run, self._maintenance, liveness, self._periodic, opts, self.context,
                          self._balancer)  # fmt: skip
        greenlets = self._start(loops, run)
        self._stop_requested.wait()
        try:
            self._stop(run, loops, greenlets)
        finally:
            self._end(run, greenlets, watching)
        if self._fatal is not None:
            raise self._fatal
        log.info("%s: stopped (done=%d failed=%d)", self.context, self.stats.done,
                 self.stats.failed)  # fmt: skip

    def _claim_name(self, run: Run) -> None:
        """Hold this consumer's name, taking a crashed predecessor's jobs back now; a live
        namesake's refusal stops the run before any job is fetched. Either way the facts,
        and the lease they state, are written before the first fetch: a consumer that dies
        on its first job is judged by its own lease, not by an unstated one's."""
        if self._name is None:
            run.reporter.beat()  # never raises
            return

        def announce(name: str) -> None:
            run.reporter.identity = {"name": name, **claim.process}
            run.reporter.beat()

        claim = Claim(self._queues, self.id, announce, self._maintenance.recover_now,
                      self.context)  # fmt: skip
        try:
            self.name = claim.claim(self._name)
        except BaseException:
            run.reporter.final()
            self._deregister()
            raise
        log.info("%s: named %r", self.context, self.name)

    def _end(self, run: Run, greenlets: Greenlets, watching: bool) -> None:
        if watching:
            watchdog.disable()
        self._liveness.stop_thread_heartbeat()
        self._liveness.reporter = None
        self._maintenance.listener.close()
        run.poller.close()
        # Whatever is still alive here is abandoned: no more Redis calls. Jobs of
        # killed handlers stay in flight for another consumer's custodian.
        gevent.killall([*greenlets.values(), *run.processor.abandon()], timeout=5)

    def _build(self, handler: Handler) -> Run:
        asyncio_loop.install()  # before a sync handler calls asyncio.run()
        weights = self._weights or {}
        sources = [Source(queue, weights.get(name, 1), family=self.families.get(name))
                   for name, queue in self._queues.items()]  # fmt: skip
        run = Run(self._queues, sources, self.id, self.opts, self.recorders, handler,
                  self._abort, self.context)  # fmt: skip
        self._processor, self._poller = run.processor, run.poller
        self._liveness.reporter = run.reporter
        run.endings.on_due = self._maintenance.due.note
        return run

    def _start(self, loops: dict[str, Loop], run: Run) -> Greenlets:
        # The ticker first: greenlets run in the order spawned, and its clock must start
        # before the poller's first fetch puts jobs in flight (see Liveness.tick).
        tick = partial(self._liveness.tick, run.processor.drop_buffered,
                       run.processor.buffered_jobs)
        greenlets = {"Ticker": self._spawn("Ticker", tick)}
        greenlets.update((name, self._spawn(name, loop.run)) for name, loop in loops.items())
        greenlets["Acker"] = self._spawn("Acker", run.acker.run)
        return greenlets

    def _stop(self, run: Run, loops: dict[str, Loop], greenlets: Greenlets) -> None:
        if self._fatal is None:
            self._shutdown(run, loops, greenlets)
        if self._fatal is not None:  # finished jobs' acks still go out, so as not to rerun them
            run.acker.flush(FINAL_ACKS_SECONDS)  # (bounded; unfinished jobs stay in flight)

    def _shutdown(self, run: Run, loops: dict[str, Loop], greenlets: Greenlets) -> None:
        """The stop order: stop fetching, give back the buffer, let handlers finish while
        the heartbeat keeps running, acknowledge, then stop the maintenance loops."""
        loops["Poller"].stopping.set()
        if run.poller.waiting:
            greenlets["Poller"].kill()  # only ever interrupted while it waits
        self._wait_for(greenlets["Poller"])
        run.give_back()
        if self._fatal is not None or not self._drain(run):
            return
        self._liveness.stop_thread_heartbeat()  # before the deregister it could undo
        maintenance = [name for name in loops if name != "Poller"]  # Periodic too, if any
        for name in maintenance:
            loops[name].stopping.set()
        for name in maintenance:
            self._wait_for(greenlets[name])
        run.reporter.final()  # the last minutes' counts; never raises
        if self._balancer is not None:
            self._balancer.close()  # never raises
        self._deregister()

    def _drain(self, run: Run) -> bool:
        """Let the handlers finish and their acknowledgements go out, both within the
        grace period; whether they did."""
        grace = self.opts.shutdown_grace_period or None  # 0 set on a live opts: wait forever
        deadline = None if grace is None else time.monotonic() + grace
        if not self._within_grace(gevent.spawn(run.processor.wait_quiet), deadline, grace):
            return False
        return self._within_grace(gevent.spawn(run.acker.flush), deadline, grace)

    def _deregister(self) -> None:
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
        self._fatal = ShutdownTimeoutError(self.gauges()[0], grace)
        log.error("%s: %s", self.context, self._fatal)
        return False

    def _wait_for(self, greenlet: gevent.Greenlet, timeout: float | None = None) -> None:
        """Wait for ``greenlet``, but no longer than a fatal error or a forced stop."""
        gevent.wait([greenlet, self._force], count=1, timeout=timeout)
        if self._force.is_set() and self._fatal is None and not greenlet.dead:
            self._fatal = ShutdownTimeoutError(self.gauges()[0], None)

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
