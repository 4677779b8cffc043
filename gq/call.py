"""How the processor runs one job of a dispatcher (``gq.App``): the ``Plan``.

A handler given to a consumer is a plain byte handler (``Callable[[gq.Job], object]``,
the fast path: no Plan per job) or a dispatcher, an object with ``plan(job) -> Plan``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable


@dataclass(frozen=True)
class Plan:
    """One job's run: ``run()`` returns its result; the None fields fall back to the
    consumer's ``job_timeout``, ``job_max_attempts`` and ``job_max_backoff``."""

    run: Callable[[], object]
    timeout: float | None = None
    max_attempts: int | None = None
    max_backoff: float | None = None
    task: str = ""
