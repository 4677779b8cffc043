"""The Redis side of a running job's progress (``CurrentJob.progress``, issue 34): one
SET with an expiry per write under ``QueueKeys.progress`` (progress.lua, which also
announces it when the queue's events are on), one GET per read. The job's end does not
delete it (docs/decisions.md); it
expires ``PROGRESS_TTL`` after the last write and readers show it only while the job
runs, in the attempt that wrote it."""

from __future__ import annotations

import json
from typing import Any

from gq.store.base import registered, wire
from gq.store.keys import QueueKeys

#: How long a progress report outlives its last write, seconds.
PROGRESS_TTL = 3600.0


def write_progress(client: Any, queue: str, job_id: str, report: tuple[float, str, int]) -> None:
    """Keep ``(fraction, note, attempt)`` as ``job_id``'s progress (one script call: a
    SET ... PX, and its event when the queue's events are on)."""
    fraction, note, attempt = report
    value = json.dumps({"f": fraction, "n": note, "a": attempt}, ensure_ascii=False)
    keys = QueueKeys(queue)
    script = registered(client, ("progress",))["progress"]
    args = [job_id, value, int(PROGRESS_TTL * 1000), repr(fraction), note, attempt]
    script(keys=[keys.progress(job_id), *keys.event_keys], args=wire(args))


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
