"""What a consumer counts about its jobs, for its facts, its history and its metrics.

The processor calls the ``Recorder`` of the job's queue at each outcome (a consumer has one
per queue). This base class is what every consumer has: plain integer counters and
per-minute counts for the throughput history (SPEC section 10), bumped once per
acknowledgement batch or per failure, never written to Redis per job (``gq.worker.facts``
flushes them with the heartbeat). Its timing hooks do nothing;
``gq.metrics.PrometheusRecorder`` overrides them when metrics are on. The processor calls
them only for the jobs the consumer's sampler picked for the histograms
(``gq.worker.sampling``), none while nothing samples.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from gq.worker.sampling import Sample

#: The outcomes of a job, as ``gq_jobs_total{outcome}`` names them.
OUTCOMES = ("done", "retried", "killed", "cancelled", "rate_limited")

# The history keeps counts for 24 h; counts that could not be written for longer than
# that would land in keys already expired, so they are dropped.
HISTORY_SECONDS = 24 * 3600

# (start of the minute in unix seconds, "done", "failed" or "retried") -> jobs
MinuteCounts = dict[tuple[int, str], int]


class History:
    """Jobs done and failed per minute, held in the process until the next flush."""

    def __init__(self) -> None:
        self.pending: MinuteCounts = {}
        # Redis time minus this host's, learned at each heartbeat: the minutes are the
        # server's, so a worker with a skewed clock does not smear the chart.
        self.offset = 0.0

    def add(self, kind: str, count: int) -> None:
        minute = int(time.time() + self.offset) // 60 * 60
        key = (minute, kind)
        self.pending[key] = self.pending.get(key, 0) + count

    def take(self) -> MinuteCounts:
        """The counts so far, leaving none: give them back with ``restore`` if unwritten."""
        taken, self.pending = self.pending, {}
        return taken

    def restore(self, counts: MinuteCounts) -> None:
        """Merge counts that could not be written back in, dropping those too old to keep."""
        oldest = time.time() + self.offset - HISTORY_SECONDS
        for key, count in counts.items():
            if key[0] >= oldest:
                self.pending[key] = self.pending.get(key, 0) + count


class Recorder:
    """Counts outcomes; timing hooks are no-ops (metrics off). One per queue of a consumer.
    The gauges (handlers running, jobs buffered) are the consumer's, read from it."""

    def __init__(self, queue: str) -> None:
        self.queue = queue
        self.totals = dict.fromkeys(OUTCOMES, 0)
        self.recoveries = 0
        self.history = History()

    #: Whether this recorder times jobs (its consumer then samples them).
    times_jobs = False

    # -- per sampled job (gq.worker.sampling) ----------------------------------------------

    def started(self, sample: Sample) -> float:
        """A handler is about to run ``sample.job``; returns what ``finished`` gets back."""
        return 0.0

    def finished(self, sample: Sample, began: float) -> None:
        """The handler of ``sample.job``, for which ``started`` returned ``began``, has returned
        or raised."""

    # -- per batch or per failure ---------------------------------------------------------

    def done(self, count: int) -> None:
        """``count`` jobs were acknowledged (one batch)."""
        self.totals["done"] += count
        self.history.add("done", count)

    def failed(self, outcome: str) -> None:
        """A job's other outcome was written: "retried", "killed", "cancelled" or
        "rate_limited"."""
        self.totals[outcome] += 1
        if outcome in ("retried", "killed"):  # cancelled and rate-limited jobs did not fail
            # "failed" keeps its meaning for older readers (failed attempts, retries
            # included); "retried" lets a reader tell retries from jobs that went to dead.
            self.history.add("failed", 1)
        if outcome == "retried":
            self.history.add("retried", 1)

    def recovered(self, count: int) -> None:
        """This consumer's custodian recovered ``count`` jobs of crashed consumers."""
        self.recoveries += count

    @property
    def failures(self) -> int:
        return self.totals["retried"] + self.totals["killed"]


class Stats:
    """A consumer's outcome counts over all its queues, read from its recorders when asked
    (``Consumer.stats``; the CLI's periodic report): a view, not a second counter. A job
    counts as done once its acknowledgement landed."""

    def __init__(self, recorders: Mapping[str, Recorder]) -> None:
        self._recorders = recorders

    def _sum(self, outcome: str) -> int:
        return sum(recorder.totals[outcome] for recorder in self._recorders.values())

    @property
    def done(self) -> int:
        return self._sum("done")

    @property
    def failed(self) -> int:
        """Failed attempts: retried or killed."""
        return self.retried + self.killed

    @property
    def retried(self) -> int:
        return self._sum("retried")

    @property
    def killed(self) -> int:
        return self._sum("killed")

    @property
    def cancelled(self) -> int:
        return self._sum("cancelled")

    @property
    def rate_limited(self) -> int:
        return self._sum("rate_limited")
