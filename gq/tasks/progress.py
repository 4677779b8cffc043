"""A running task's progress: ``gq.current_job().progress(0.42, note="3 of 7 files")``.

Rate-limited on the client so that a tight loop costs nothing: the latest report is
kept, and written (gq.store.progress: one SET) at the first call and then at most once
every ``INTERVAL`` seconds, by the next call after it; a report made since the last
write is not flushed at the end, since the job's end makes it moot. A loop of 1,000
calls costs one or two Redis commands.

The worker's app says how to reach Redis (``use``); a run with no Redis to write to
(outside a worker, or ``gq.testing.eager`` with an app that has no url or client) has
its reports checked and kept, and not written.
"""

from __future__ import annotations

import contextvars
import math
import time
from numbers import Real
from typing import Any, Callable

from gq.store.progress import write_progress

#: The least time between two writes of one job's progress, seconds.
INTERVAL = 0.5
#: The longest note, in characters.
NOTE_MAX = 200

# queue -> a Redis client, given by the app whose worker runs the jobs.
_client_of: Callable[[str], Any] | None = None


def use(client_of: Callable[[str], Any] | None) -> None:
    """Write progress through ``client_of(queue)`` (the worker's app calls it)."""
    global _client_of
    _client_of = client_of


def check(fraction: object, note: object) -> tuple[float, str]:
    """The report, or ValueError/TypeError saying what is wrong with it."""
    if isinstance(fraction, bool) or not isinstance(fraction, Real):
        raise TypeError(f"progress: fraction must be a number from 0 to 1, not {fraction!r}")
    value = float(fraction)
    if math.isnan(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"progress: fraction must be from 0 to 1, not {fraction!r}")
    if not isinstance(note, str):
        raise TypeError(f"progress: note must be a str, not {type(note).__name__}")
    if len(note) > NOTE_MAX:
        raise ValueError(f"progress: note is {len(note)} characters, at most {NOTE_MAX}")
    return value, note


class Reporter:
    """The progress of one run of one job: the latest report and when it was written."""

    __slots__ = ("run", "latest", "written_at", "writes")

    def __init__(self, run: tuple[str, str, int]) -> None:
        self.run = run  # (queue, job id, attempt)
        self.latest: tuple[float, str] | None = None
        self.written_at: float | None = None
        self.writes = 0

    def report(self, fraction: float, note: str, now: float) -> None:
        self.latest = (fraction, note)
        due = self.written_at is None or now - self.written_at >= INTERVAL
        client = None if not due or _client_of is None else _client_of(self.run[0])
        if client is not None:
            queue, job_id, attempt = self.run
            write_progress(client, queue, job_id, (fraction, note, attempt))
            self.written_at, self.writes = now, self.writes + 1


# The reporter of the run in this greenlet, thread or task (replaced by the next run's).
_REPORTER: contextvars.ContextVar[Reporter | None] = contextvars.ContextVar(
    "gq_progress", default=None
)


def report(run: tuple[str, str, int], fraction: object, note: object) -> Reporter:
    """Record a report of ``run`` (queue, job id, attempt); returns its reporter."""
    value, text = check(fraction, note)
    reporter = _REPORTER.get()
    if reporter is None or reporter.run != run:
        reporter = Reporter(run)
        _REPORTER.set(reporter)
    reporter.report(value, text, time.monotonic())
    return reporter
