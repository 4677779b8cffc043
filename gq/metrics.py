"""Prometheus metrics: every name gq exposes, in one place (SPEC section 10).

Two sources, each a custom collector that reads its numbers at scrape time:

* the worker's own (``enable`` + ``serve``, what ``gq-worker --metrics-port`` does): jobs by
  outcome, recoveries, handler duration and wait histograms, handlers running, jobs
  buffered, time the gevent hub was blocked, next to the client's ``process_*``;
* the queue-wide gauges (``QueueCollector``, served by ``gq metrics`` and mountable with
  ``queue_metrics_wsgi_app``): jobs per state, the oldest ready job's age, consumers
  alive and dead, one round trip per queue per scrape.

Counting costs the hot path two clock reads and two list appends per job: the values
are counted into plain bucket lists in bulk and turned into metric families only when
scraped, so no lock, label lookup or client object is touched per job.
``prometheus_client`` (the extra ``gq[metrics]``) is imported only here and only when
metrics are used.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_right
from collections.abc import Iterable, Iterator, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable

from gq import job as jobs
from gq.errors import GQError
from gq.job import Job
from gq.recorder import OUTCOMES, Recorder
from gq.redis_admin import QueueAdmin, registered_queues
from gq.serving import serve_wsgi

if TYPE_CHECKING:
    from gevent.pywsgi import WSGIServer

    from gq.consumer import Consumer

log = logging.getLogger("gq.metrics")

INSTALL_HINT = "metrics need the prometheus_client package: pip install 'gq[metrics]'"

# Worker metrics (labels: queue; gq_jobs_total also outcome).
JOBS = "gq_jobs_total"
RECOVERED = "gq_jobs_recovered_total"
DURATION = "gq_job_duration_seconds"
WAIT = "gq_job_wait_seconds"
RUNNING = "gq_handlers_running"
BUFFERED = "gq_jobs_buffered"
HUB_BLOCKED = "gq_hub_blocked_seconds_total"
# Queue-wide gauges (labels: queue; state for the first and last).
QUEUE_JOBS = "gq_queue_jobs"
QUEUE_OLDEST_READY = "gq_queue_oldest_ready_seconds"
QUEUE_CONSUMERS = "gq_queue_consumers"
SCRAPE_ERRORS = "gq_exporter_scrape_errors_total"

# Handler time: from a few ms to an hour.
DURATION_BUCKETS = (.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600,
                    1800, 3600)  # fmt: skip
# Ready to start: a healthy queue starts jobs in ms, a backed-up one in hours.
WAIT_BUCKETS = (0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 900, 3600, 21600, 86400)

# `gq consumers`' default: heartbeat_poll_interval + custodian_consumer_timeout, 60 + 60 s.
DEFAULT_CONSUMER_TIMEOUT = 120.0


class MetricsUnavailableError(GQError, ImportError):
    """prometheus_client is not installed."""


def prometheus() -> Any:
    """The prometheus_client module, or MetricsUnavailableError saying how to install it."""
    try:
        import prometheus_client
        import prometheus_client.core  # the metric families of custom collectors
    except ImportError as exc:
        raise MetricsUnavailableError(INSTALL_HINT) from exc
    return prometheus_client


# -- the worker's metrics ---------------------------------------------------------------


class Buckets:
    """A histogram's counts per bucket and sum, as plain numbers.

    Values are added in bulk (``add_values``): sorting a batch in C and cutting it at each
    bound costs less per value than a search per value at the moment it is observed.
    """

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = [float(b) for b in bounds]
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf
        self.total = 0.0

    def observe(self, value: float) -> None:
        self.add_values([value])

    def add_values(self, values: list[float]) -> None:
        """Count ``values`` (sorted in place); negative ones count as 0."""
        if not values:
            return
        values.sort()
        if values[0] < 0.0:  # a producer's clock ahead of this host's
            values[:] = [max(0.0, v) for v in values]
        below = 0
        for i, bound in enumerate(self.bounds):
            upto = bisect_right(values, bound, below)  # le is inclusive
            self.counts[i] += upto - below
            below = upto
        self.counts[-1] += len(values) - below
        self.total += sum(values)

    def add(self, other: Buckets) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.total += other.total

    def cumulative(self) -> list[tuple[str, float]]:
        running, out = 0, []
        for bound, count in zip([*map(repr, self.bounds), "+Inf"], self.counts):
            running += count
            out.append((bound, float(running)))
        return out


# Observations held before they are counted into the buckets (a few tens of KiB).
PENDING_MAX = 4096
# Above this many jobs per second, one handler in SAMPLE_EVERY is timed, and its values
# count SAMPLE_EVERY times: two clock reads per job cost a noop drain ~20%, sampled ~2%
# (benchmarks/metrics_cost.py). The histograms' buckets, sum and count are estimates then;
# gq_jobs_total stays exact. Below it, every job is timed.
SAMPLE_ABOVE = 1000.0
SAMPLE_EVERY = 16
RATE_WINDOW = 0.1


class PrometheusRecorder(Recorder):
    """A Recorder that also times each handler and its wait since the job was ready.

    The per-job hooks only append the measured value to a list; the values are counted
    into the buckets in bulk, per acknowledgement batch once ``PENDING_MAX`` are held, and
    at each scrape (``flush``). Everything runs on the worker's one thread (the server is
    a greenlet), so nothing is locked.
    """

    def __init__(self, queue: str, *, histograms: bool = True) -> None:
        super().__init__(queue)
        # Without histograms the processor calls no hook: counters and gauges only, and
        # nothing per job (for workers whose handlers take a few microseconds).
        self.timed = histograms
        if histograms:
            jobs.keep_ready_at()  # the wait needs each message's ReadyAt from now on
        self.duration = Buckets(DURATION_BUCKETS)
        self.wait = Buckets(WAIT_BUCKETS)
        self._durations: list[float] = []
        self._waits: list[float] = []
        self._sync_clock()
        self._window_start, self._window_done = perf_counter(), 0

    def _sync_clock(self) -> None:
        # One clock read per hook: wall time = perf_counter() + this (re-read per ack
        # batch, so an NTP step shows in the wait for one batch at most).
        self._wall = time.time() - perf_counter()

    # The two hooks below run for every job: one clock read and one append each.

    def started(self, job: Job) -> float:
        now = perf_counter()
        ready_at = job.ready_at
        if ready_at is not None:  # None: a curlyq message, which does not say
            self._hold(self._waits, now + self._wall - ready_at)
        return now

    def finished(self, began: float) -> None:
        self._hold(self._durations, perf_counter() - began)

    def _hold(self, values: list[float], value: float) -> None:
        weight = self.sample_mask + 1
        if weight == 1:
            values.append(value)
        else:  # a sampled job stands for the others
            values.extend([value] * weight)

    def done(self, count: int) -> None:
        super().done(count)
        self._sync_clock()
        self._measure_rate(count)
        if len(self._durations) >= PENDING_MAX:
            self.flush()

    def _measure_rate(self, count: int) -> None:
        self._window_done += count
        elapsed = perf_counter() - self._window_start
        if elapsed >= RATE_WINDOW:
            fast = self._window_done / elapsed > SAMPLE_ABOVE
            self.sample_mask = SAMPLE_EVERY - 1 if fast else 0
            self._window_start, self._window_done = perf_counter(), 0

    def failed(self, outcome: str) -> None:
        super().failed(outcome)
        if len(self._durations) >= PENDING_MAX:
            self.flush()

    def flush(self) -> None:
        """Count the values held so far into the histograms."""
        durations, waits = self._durations[:], self._waits[:]
        del self._durations[:], self._waits[:]  # the same lists: the bound appends stay valid
        self.duration.add_values(durations)
        self.wait.add_values(waits)


class WorkerCollector:
    """The worker metrics of every enabled consumer of this process, summed per queue."""

    def __init__(self) -> None:
        self.recorders: list[PrometheusRecorder] = []
        self.hub_blocked = 0.0

    def on_event(self, event: object) -> None:
        """A gevent event subscriber (called from gevent's monitor thread)."""
        from gevent.events import EventLoopBlocked

        if isinstance(event, EventLoopBlocked):
            # Each event is one check of the monitor that found the hub still blocked,
            # so their thresholds add up to the time blocked (to within one threshold).
            self.hub_blocked += float(event.blocking_time)

    def collect(self) -> Iterator[Any]:
        core = prometheus().core
        by_queue = _merge(self.recorders)
        jobs_ = core.CounterMetricFamily(
            JOBS, "Jobs finished, by outcome", labels=["queue", "outcome"]
        )
        recovered = core.CounterMetricFamily(
            RECOVERED, "Jobs recovered from crashed consumers by this worker", labels=["queue"]
        )
        duration = core.HistogramMetricFamily(DURATION, "Handler run time", labels=["queue"])
        wait = core.HistogramMetricFamily(WAIT, "Time from ready to start", labels=["queue"])
        running = core.GaugeMetricFamily(RUNNING, "Handlers running", labels=["queue"])
        buffered = core.GaugeMetricFamily(BUFFERED, "Jobs fetched, not started", labels=["queue"])
        for queue, merged in sorted(by_queue.items()):
            for outcome in OUTCOMES:
                jobs_.add_metric([queue, outcome], merged.totals[outcome])
            recovered.add_metric([queue], merged.recoveries)
            duration.add_metric([queue], merged.duration.cumulative(), merged.duration.total)
            wait.add_metric([queue], merged.wait.cumulative(), merged.wait.total)
            running.add_metric([queue], merged.running)
            buffered.add_metric([queue], merged.buffered)
        yield from (jobs_, recovered, duration, wait, running, buffered)
        yield core.CounterMetricFamily(
            HUB_BLOCKED, "Time the gevent hub was blocked (monitor thread)", self.hub_blocked
        )


class _Merged:
    def __init__(self) -> None:
        self.totals = dict.fromkeys(OUTCOMES, 0)
        self.recoveries = self.running = self.buffered = 0
        self.duration = Buckets(DURATION_BUCKETS)
        self.wait = Buckets(WAIT_BUCKETS)

    def add(self, recorder: PrometheusRecorder) -> None:
        recorder.flush()
        for outcome, count in recorder.totals.items():
            self.totals[outcome] += count
        self.recoveries += recorder.recoveries
        self.running += recorder.running()
        self.buffered += recorder.buffered()
        self.duration.add(recorder.duration)
        self.wait.add(recorder.wait)


def _merge(recorders: Iterable[PrometheusRecorder]) -> dict[str, _Merged]:
    merged: dict[str, _Merged] = {}
    for recorder in recorders:
        merged.setdefault(recorder.queue, _Merged()).add(recorder)
    return merged


_worker: WorkerCollector | None = None


def worker_collector() -> WorkerCollector:
    """This process's collector, registered (with gevent's event hook) on first use."""
    global _worker
    if _worker is None:
        from gevent import events

        client = prometheus()
        collector = WorkerCollector()
        client.REGISTRY.register(collector)
        events.subscribers.append(collector.on_event)
        _worker = collector
    return _worker


def enable(consumer: Consumer, *, histograms: bool = True) -> PrometheusRecorder:
    """Count ``consumer``'s jobs for the worker metrics; call before ``consumer.run``.
    ``histograms=False`` leaves the duration and wait histograms empty and the job path
    untouched (their per-job cost: benchmarks/README.md)."""
    collector = worker_collector()
    recorder = PrometheusRecorder(consumer.queue, histograms=histograms)
    consumer.recorder = recorder
    collector.recorders.append(recorder)
    return recorder


def serve(host: str, port: int, app: Callable[..., Any] | None = None) -> WSGIServer:
    """Serve ``app`` (default: this process's registry, worker metrics and ``process_*``)
    at ``/metrics`` on a gevent WSGI server (``gq.serving``).
    Raises OSError when the address cannot be bound."""
    app = app or prometheus().make_wsgi_app()
    return serve_wsgi(host, port, _only_metrics(app), connections=8)


def _only_metrics(app: Callable[..., Any]) -> Callable[..., Any]:
    def route(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") not in ("/metrics", "/metrics/"):
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"not found: metrics are at /metrics\n"]
        return app(environ, start_response)

    return route


# -- the queue-wide gauges --------------------------------------------------------------


class QueueCollector:
    """Per scrape, the gauges of each queue: ``queues``, or when None those in the registry.

    One atomic script call per queue (``QueueAdmin.gauges``), plus one SMEMBERS for the
    registry. A queue that fails is left out of the scrape and counted in
    ``gq_exporter_scrape_errors_total``, so no stale value is ever shown.
    """

    def __init__(
        self,
        client: Any,
        queues: Sequence[str] | None = None,
        consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
    ) -> None:
        self._client = client
        self._queues = list(queues) if queues else None
        self._consumer_timeout = consumer_timeout
        self._handles: dict[str, QueueAdmin] = {}
        self._lock = threading.Lock()  # one scrape at a time: concurrent ones add load only
        self.errors = 0

    def collect(self) -> Iterator[Any]:
        with self._lock:
            return iter(self._scrape())

    def _scrape(self) -> list[Any]:
        core = prometheus().core
        counts = core.GaugeMetricFamily(QUEUE_JOBS, "Jobs by state", labels=["queue", "state"])
        oldest = core.GaugeMetricFamily(
            QUEUE_OLDEST_READY, "Age of the oldest ready job (0: none ready)", labels=["queue"]
        )
        consumers = core.GaugeMetricFamily(
            QUEUE_CONSUMERS, "Registered consumers, alive or dead", labels=["queue", "state"]
        )
        for name in self._names():
            try:
                gauges = self._handle(name).gauges(self._consumer_timeout)
            except Exception as exc:  # noqa: BLE001 - a bad name, a Redis error: this queue only
                self.errors += 1
                log.warning("metrics scrape of queue %s failed: %r", name, exc)
                continue
            for state in ("ready", "scheduled", "inflight", "dead"):
                counts.add_metric([name, state], getattr(gauges, state))
            age = _oldest_age(gauges.head, gauges.now)
            if age is not None:
                oldest.add_metric([name], age)
            consumers.add_metric([name, "alive"], gauges.consumers_alive)
            consumers.add_metric([name, "dead"], gauges.consumers_dead)
        errors = core.CounterMetricFamily(SCRAPE_ERRORS, "Queues whose scrape failed", self.errors)
        return [counts, oldest, consumers, errors]

    def _names(self) -> list[str]:
        if self._queues is not None:
            return self._queues
        try:
            return registered_queues(self._client)
        except Exception as exc:  # noqa: BLE001 - a scrape reports the error, never raises
            self.errors += 1
            log.warning("metrics scrape could not read the queue registry: %r", exc)
            return []

    def _handle(self, name: str) -> QueueAdmin:
        handle = self._handles.get(name)
        if handle is None:
            handle = self._handles[name] = QueueAdmin(self._client, name)
        return handle


def _oldest_age(head: bytes | None, now: float) -> float | None:
    """Seconds the oldest ready job has been ready: 0 when none is, None when its
    message does not say when it became ready (curlyq's)."""
    if head is None:
        return 0.0
    try:
        ready_at = jobs.decode_ready_at(head)
    except jobs.MessageDecodeError:
        return None
    return None if ready_at is None else max(0.0, now - ready_at)


def queue_metrics_registry(
    client_or_url: Any,
    queues: Sequence[str] | None = None,
    consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
) -> Any:
    """A CollectorRegistry holding only the queue gauges (``client_or_url``: a redis
    client or a URL; ``queues`` None: the queues in the registry, at each scrape)."""
    client = client_or_url
    if isinstance(client_or_url, str):
        from gq.connection import client_from_url

        client = client_from_url(client_or_url, socket_timeout=5.0, socket_connect_timeout=5.0)
    registry = prometheus().CollectorRegistry(auto_describe=False)
    registry.register(QueueCollector(client, queues, consumer_timeout))
    return registry


def queue_metrics_wsgi_app(
    client_or_url: Any,
    queues: Sequence[str] | None = None,
    consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
) -> Callable[..., Any]:
    """A WSGI app serving the queue gauges (for the dashboard's ``/metrics``)."""
    registry = queue_metrics_registry(client_or_url, queues, consumer_timeout)
    return prometheus().make_wsgi_app(registry)  # type: ignore[no-any-return]
