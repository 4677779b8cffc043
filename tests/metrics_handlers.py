"""Handlers for the metrics tests, run by ``gq-worker tests.metrics_handlers:NAME``."""

from __future__ import annotations

from gevent import monkey

import gq

# The unpatched sleep: it holds the whole process, as a CPU-bound handler would.
_blocking_sleep = monkey.get_original("time", "sleep")


def outcome(job: gq.Job) -> None:
    """Succeed, except for data ``fail`` (raise) and ``block`` (hold the gevent hub 0.3 s)."""
    if job.data == b"fail":
        raise RuntimeError("failed on purpose")
    if job.data == b"block":
        _blocking_sleep(0.3)
