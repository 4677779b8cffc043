"""Prometheus metrics: every name gq exposes, in one place (SPEC section 10).

Two sources, each a custom collector that reads its numbers at scrape time:

* the worker's own (``enable`` + ``serve``, what ``gq-worker --metrics-port`` does): jobs by
  outcome, recoveries, handler duration and wait histograms, handlers running, jobs
  buffered, time the gevent hub was blocked, next to the client's ``process_*``;
* the queue-wide gauges (``QueueCollector``, served by ``gq metrics`` and mountable with
  ``queue_metrics_wsgi_app``): jobs per state, the oldest ready job's age, consumers
  alive and dead, one round trip per queue per scrape.

Counting costs a job one decrement in the poller and one dict lookup in the processor:
the histograms time a sample of the jobs (at most about ``SAMPLE_ABOVE`` a second, see
gq.worker.sampling), counted into plain bucket lists and turned into metric families
only when scraped, so no lock, label lookup or client object is touched per job.
``prometheus_client`` (the extra ``gq[metrics]``) is imported only here and only when
metrics are used.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from time import perf_counter
from typing import TYPE_CHECKING, Any, Callable, cast

from gq.errors import GQError
from gq.metrics_gauges import SHARD_JOBS, STATES, GaugeReader, oldest_age
from gq.options import DEFAULT_CONSUMER_TIMEOUT
from gq.serving import serve_wsgi
from gq.store.admin import registered_queues
from gq.store.base import describe
from gq.worker import sampling
from gq.worker.recorder import OUTCOMES, Recorder
from gq.worker.sampling import Sample

if TYPE_CHECKING:
    from gevent.pywsgi import WSGIServer

    from gq.worker.consumer import Consumer

log = logging.getLogger("gq.metrics")

INSTALL_HINT = "metrics need the prometheus_client package: pip install 'gq[metrics]'"

# Worker metrics (labels: queue; gq_jobs_total also outcome).
# gq_jobs_total's outcomes (gq.worker.recorder.OUTCOMES) count each ended attempt once:
# "retried" (it runs again: gq.Retry, or an error with attempts left) apart from
# "killed" (dead), so a queue of requested retries does not read as failing (issue 32).
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
    """A histogram's counts per bucket and sum, as plain numbers."""

    __slots__ = ("bounds", "counts", "total")

    def __init__(self, bounds: Sequence[float]) -> None:
        self.bounds = [float(b) for b in bounds]
        self.counts = [0] * (len(self.bounds) + 1)  # the last is +Inf
        self.total = 0.0

    def observe(self, value: float, weight: int = 1) -> None:
        """Count ``value`` ``weight`` times; a negative one counts as 0 (a producer's
        clock ahead of this host's)."""
        value = max(0.0, value)
        self.counts[bisect_left(self.bounds, value)] += weight  # le is inclusive
        self.total += value * weight

    def add(self, other: Buckets) -> None:
        self.counts = [a + b for a, b in zip(self.counts, other.counts)]
        self.total += other.total

    def cumulative(self) -> list[tuple[str, float]]:
        running, out = 0, []
        for bound, count in zip([*map(repr, self.bounds), "+Inf"], self.counts):
            running += count
            out.append((bound, float(running)))
        return out


# The sampling's figures (gq.worker.sampling), here too for readers of the metrics.
SAMPLE_ABOVE = sampling.SAMPLE_ABOVE
RATE_WINDOW = sampling.RATE_WINDOW
RATE_JOBS = sampling.RATE_JOBS


class PrometheusRecorder(Recorder):
    """A Recorder that also times the sampled jobs' handlers and their wait since ready.

    The processor calls the hooks only for the jobs the consumer's sampler picked (about
    ``SAMPLE_ABOVE`` a second at most, gq.worker.sampling), so each counts its value into
    the buckets at once. Everything runs on the worker's one thread (the server is a greenlet), so
    nothing is locked.
    """

    def __init__(self, queue: str, *, histograms: bool = True) -> None:
        super().__init__(queue)
        # Without histograms: counters and gauges, nothing per job. The hooks still run
        # for jobs picked for another consumer of the process, and count nothing.
        self.histograms = histograms
        self.times_jobs = histograms
        self.duration = Buckets(DURATION_BUCKETS)
        self.wait = Buckets(WAIT_BUCKETS)
        self._sync_clock()

    def _sync_clock(self) -> None:
        # One clock read per hook: wall time = perf_counter() + this (re-read per ack
        # batch, so an NTP step shows in the wait for one batch at most).
        self._wall = time.time() - perf_counter()

    def started(self, sample: Sample) -> float:
        now = perf_counter()
        ready_at = sample.ready_at
        if ready_at is not None and self.histograms:  # None: a curlyq message
            self.wait.observe(now + self._wall - ready_at, sample.weight)
        return now

    def finished(self, sample: Sample, began: float) -> None:
        if self.histograms:
            self.duration.observe(perf_counter() - began, sample.weight)

    def done(self, count: int) -> None:
        super().done(count)
        if self.histograms:
            self._sync_clock()


class WorkerCollector:
    """The worker metrics of every enabled consumer of this process, summed per queue."""

    def __init__(self) -> None:
        self.recorders: list[PrometheusRecorder] = []
        # (first queue, the consumer's handlers running and jobs buffered): the gauges
        # are a consumer's, shown whole under its first queue so that a sum counts each once.
        self.gauges: list[tuple[str, Callable[[], tuple[int, int]]]] = []
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
        by_queue = _merge(self.recorders, self.gauges)
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
        for outcome, count in recorder.totals.items():
            self.totals[outcome] += count
        self.recoveries += recorder.recoveries
        self.duration.add(recorder.duration)
        self.wait.add(recorder.wait)


def _merge(
    recorders: Iterable[PrometheusRecorder],
    gauges: Iterable[tuple[str, Callable[[], tuple[int, int]]]],
) -> dict[str, _Merged]:
    merged: dict[str, _Merged] = {}
    for recorder in recorders:
        merged.setdefault(recorder.queue, _Merged()).add(recorder)
    for queue, read in gauges:
        running, buffered = read()
        into = merged.setdefault(queue, _Merged())
        into.running += running
        into.buffered += buffered
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
    """Count ``consumer``'s jobs for the worker metrics, one recorder per queue (each
    labelled with its queue); call before ``consumer.run``. Returns the first queue's.
    ``histograms=False`` leaves the duration and wait histograms empty and the job path
    untouched (their per-job cost: benchmarks/README.md)."""
    collector = worker_collector()
    for name in consumer.queues:
        recorder = PrometheusRecorder(name, histograms=histograms)
        consumer.recorders[name] = recorder
        collector.recorders.append(recorder)
    collector.gauges.append((consumer.queue, consumer.gauges))
    return cast(PrometheusRecorder, consumer.recorder)


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
        self._reader = GaugeReader(client)
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
        shard_jobs = core.GaugeMetricFamily(
            SHARD_JOBS, "Jobs by state on each shard of a sharded queue",
            labels=["queue", "shard", "state"],
        )  # fmt: skip
        for name in self._names():
            try:
                gauges, shards = self._reader.read(name, self._consumer_timeout)
            except Exception as exc:  # noqa: BLE001 - a bad name, a Redis error: this queue only
                self.errors += 1
                log.warning("metrics scrape of queue %s failed: %s", name, describe(exc))
                continue
            for state in STATES:
                counts.add_metric([name, state], getattr(gauges, state))
                for shard, each in shards:
                    shard_jobs.add_metric([name, shard, state], getattr(each, state))
            age = oldest_age(gauges.head, gauges.now)
            if age is not None:
                oldest.add_metric([name], age)
            consumers.add_metric([name, "alive"], gauges.consumers_alive)
            consumers.add_metric([name, "dead"], gauges.consumers_dead)
        errors = core.CounterMetricFamily(SCRAPE_ERRORS, "Queues whose scrape failed", self.errors)
        return [counts, oldest, consumers, shard_jobs, errors]

    def _names(self) -> list[str]:
        try:
            names = registered_queues(self._client) if self._queues is None else self._queues
            return self._reader.names(names)
        except Exception as exc:  # noqa: BLE001 - a scrape reports the error, never raises
            self.errors += 1
            log.warning("metrics scrape could not read the queue registry: %s", describe(exc))
            return []


def queue_metrics_registry(
    client_or_url: Any,
    queues: Sequence[str] | None = None,
    consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT,
) -> Any:
    """A CollectorRegistry holding only the queue gauges (``client_or_url``: a redis
    client or a URL; ``queues`` None: the queues in the registry, at each scrape)."""
    client = client_or_url
    if isinstance(client_or_url, str):
        from gq.store.connection import client_from_url

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
