"""The Redis side of a running job's progress (``CurrentJob.progress``, issue 34): one
SET with an expiry per write under ``QueueKeys.progress``, one GET per read. Not
written by any script: the job's end does not delete it (docs/decisions.md); it
expires ``PROGRESS_TTL`` after the last write and readers show it only while the job
runs, in the attempt that wrote it."""

from __future__ import annotations

import json
from typing import Any

from gq.store.keys import QueueKeys

#: How long a progress report outlives its last write, seconds.
PROGRESS_TTL = 3600.0


def write_progress(client: Any, queue: str, job_id: str, report: tuple[float, str, int]) -> None:
    """Keep ``(fraction, note, attempt)`` as ``job_id``'s progress (one SET ... PX)."""
    fraction, note, attempt = report
    value = json.dumps({"f": fraction, "n": note, "a": attempt}, ensure_ascii=False)
    client.set(QueueKeys(queue).progress(job_id), value, px=int(PROGRESS_TTL * 1000))


def read_progress(client: Any, queue: str, job_id: str) -> tuple[float, str, int] | None:
    """``(fraction, note, attempt)`` last written for ``job_id``, None if none is kept."""
    raw = client.get(QueueKeys(queue).progress(job_id))
    if raw is None:
        return None
    try:
        found = json.loads(raw)
        return float(found["f"]), str(found["n"]), int(found["a"])
    except (ValueError, KeyError, TypeError):
        return None
