"""What one consumer holds and what became of its jobs: the ids it holds per queue (fetched,
running, or waiting for their outcome's write) and the outcome counts, one ``Recorder`` per
queue, which are the only outcome counters a consumer keeps (``Stats`` reads them).

The poller adds what it fetched, the processor and the acker take out what they wrote;
the canceller and the poller's reconciliation read what is held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from gq.job import Job
from gq.worker.recorder import Recorder
from gq.worker.sampling import Sampler


def _sampler(recorders: Mapping[str, Recorder]) -> Sampler:
    """A sampler, on when a recorder times jobs (gq.metrics' histograms)."""
    sampler = Sampler()
    if any(recorder.times_jobs for recorder in recorders.values()):
        sampler.start()
    return sampler


class Ledger:
    """The held ids and the recorders of one consumer run (see the module's docstring)."""

    def __init__(self, recorders: Mapping[str, Recorder]) -> None:
        self.recorders = recorders
        # Per queue (two may hold one id): for Poller._reconcile after a lost reply, and
        # for cancels.
        self.held: dict[str, set[str]] = {name: set() for name in recorders}
        self.sampler = _sampler(recorders)  # which jobs the histograms time
        # Jobs acknowledged without succeeding (cancelled before they started): counted by
        # their own outcome already, so their ack must not count them as done too.
        self.not_done: set[tuple[str, str]] = set()

    def hold(self, queue: str, ids: Iterable[str]) -> None:
        self.held[queue].update(ids)

    def release(self, job: Job) -> None:
        """``job``'s outcome is written (or it will not run here): no longer held."""
        self.held[job.queue].discard(job.id)

    def acked(self, done: list[Job]) -> None:
        """A batch of acknowledgements landed (of one queue: the acker groups by queue, a
        fetch carries one queue's)."""
        queue = done[0].queue
        held = self.held[queue]
        for job in done:
            held.discard(job.id)
        counted = len(done) - self._not_done_among(done) if self.not_done else len(done)
        self.recorders[queue].done(counted)
        if self.sampler.every:
            self.sampler.count(len(done))  # the rate that sets how many are timed

    def _not_done_among(self, done: list[Job]) -> int:
        before = len(self.not_done)
        self.not_done.difference_update((job.queue, job.id) for job in done)
        return before - len(self.not_done)

    def stray(self, queue: str, owned: set[str]) -> set[str]:
        """Of ``owned`` (``queue``'s in-flight set), the ids this process does not hold."""
        return owned - self.held[queue]

    def finished(self) -> int:
        """Jobs finished so far, done or failed, over every queue (for the fetch rate)."""
        return sum(r.totals["done"] + r.failures for r in self.recorders.values())
