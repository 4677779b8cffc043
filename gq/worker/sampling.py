"""Which jobs the metrics' histograms time (SPEC section 10), kept out of the Job type.

Below ``SAMPLE_ABOVE`` jobs per second (a consumer's, measured over ``RATE_WINDOW`` s or
``RATE_JOBS`` jobs from its acknowledgement batches) every job is timed and the histograms
are exact. Above it about ``SAMPLE_ABOVE`` jobs a second are: the poller picks each job it
hands over with probability 1 / every (every = the rate over SAMPLE_ABOVE, rounded up),
and a picked job's duration and wait count ``every`` times. The histograms are then
unbiased estimates (every job has the same chance, whatever its queue or its place in the
stream); ``gq_jobs_total`` stays exact.

The picks are a countdown to the next one, redrawn at each pick from a geometric law, so
the picks are independent of the order of the
jobs (several queues interleaved, a periodic workload); a batch costs the poller one
list of messages and a step per pick. With the histograms off the sampler is off: the
poller reads one attribute per fetch, the processor looks at one empty dict per job.
"""

from __future__ import annotations

import math
import random
from time import perf_counter

from gq.job import Job, decode_ready_at

SAMPLE_ABOVE = 1000.0
# At 100k jobs/s a worker's first 0.1 s would be 10,000 jobs all timed: the rate is known
# after RATE_WINDOW s or RATE_JOBS jobs, whichever comes first.
RATE_WINDOW = 0.1
RATE_JOBS = 1000


class Sample:
    """A picked job: how many jobs it stands for, and when it became ready to run (its
    message's ReadyAt, unix seconds; None for curlyq's messages)."""

    __slots__ = ("job", "weight", "ready_at")

    def __init__(self, job: Job, weight: int, ready_at: float | None) -> None:
        self.job = job  # (held, so that no other Job takes its id() while it waits)
        self.weight = weight
        self.ready_at = ready_at


class Sampler:
    """One consumer's picks: ``every`` (0: off), and the picked jobs waiting to run."""

    def __init__(self) -> None:
        self.every = 0
        self._countdown = 0
        self._random = random.Random()
        self.picked: dict[int, Sample] = {}  # id(job) -> its sample, until it runs
        self._start, self._done = perf_counter(), 0

    def start(self) -> None:
        """Time every job until the rate is measured (histograms on)."""
        self._set(1)
        self._start, self._done = perf_counter(), 0

    def count(self, done: int) -> None:
        """``done`` more jobs were acknowledged: re-measure the rate once a window is full."""
        self._done += done
        elapsed = perf_counter() - self._start
        if elapsed >= RATE_WINDOW or self._done >= RATE_JOBS:
            rate = self._done / max(elapsed, 0.001)  # one huge batch at once: not / 0
            self._set(max(1, math.ceil(rate / SAMPLE_ABOVE)))
            self._start, self._done = perf_counter(), 0

    def _set(self, every: int) -> None:
        if every != self.every:
            self.every = every
            self._countdown = self._gap() if every else 0

    def _gap(self) -> int:
        """Jobs until the next pick, the pick included (geometric with p = 1 / every)."""
        if self.every <= 1:
            return 1
        return int(math.log(1.0 - self._random.random()) / math.log(1.0 - 1.0 / self.every)) + 1

    def offer(self, jobs: list[Job], messages: list[bytes]) -> None:
        """Jobs handed to the processor (only while ``every``), with their messages: the
        picks among them, found by skipping from one to the next (no work per job)."""
        at, count = self._countdown - 1, len(jobs)
        while at < count:
            job = jobs[at]
            self.picked[id(job)] = Sample(job, self.every, decode_ready_at(messages[at]))
            at += self._gap()
        self._countdown = at - count + 1

    def forget(self, jobs: list[Job]) -> None:
        """Jobs that will not run here (given back, dropped, cancelled before they ran)."""
        for job in jobs:
            self.picked.pop(id(job), None)
