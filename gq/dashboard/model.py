"""What the dashboard shows, read through the Redis boundary into plain, JSON-ready dicts.

Pages and the JSON API render the same dicts, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any, Optional

from gq import job as jobs
from gq.queue import flow_report, snapshot
from gq.store.admin import QueueAdmin

Entry = tuple[str, float, Optional[bytes]]

# Job data shown in a list is cut here; the job's own page shows up to DETAIL_BYTES.
PREVIEW_CHARS = 2000
DETAIL_BYTES = 64 * 1024
# Facts a consumer writes with its heartbeat (the cross-branch contract), with their types;
# anything else, or of another type, is left out rather than shown.
FACT_TYPES: dict[str, tuple[type, ...]] = {
    "host": (str,),
    "pid": (int,),
    "started_at": (int, float),
    "version": (str,),
    "queues": (list,),
    "concurrency": (int,),
    "running": (int,),
    "jobs_done": (int,),
    "jobs_failed": (int,),
    "rss_bytes": (int,),
    "cpu_percent": (int, float),
    "updated_at": (int, float),
}


def summary(rq: QueueAdmin, consumer_timeout: float) -> dict[str, Any]:
    """Counts by state, consumers alive and dead, and how long the next job has waited
    (``gq stats``' numbers, gq.queue.snapshot), with the queue's name and the server time."""
    report, now = snapshot(rq, consumer_timeout)
    return {"name": rq.keys.name, **report, "now": now}


def flow(rq: QueueAdmin) -> dict[str, Any]:
    """Paused, the limits, the jobs held now and the seconds a RateLimited holds the queue
    back: the fields ``gq stats --json`` shows (gq.queue.flow_report)."""
    return flow_report(rq.flow())


def consumers(rq: QueueAdmin, consumer_timeout: float) -> list[dict[str, Any]]:
    """Every registered consumer with its facts (``reported`` False when it wrote none),
    newest first."""
    found = list(reversed(rq.consumers()))
    now = rq.server_time()
    facts = rq.consumer_facts([consumer_id for consumer_id, _, _ in found])
    return [
        {
            "id": consumer_id,
            "last_heartbeat": seen,
            "seconds_since_heartbeat": round(max(0.0, now - seen), 3),
            "in_flight": inflight,
            "alive": now - seen <= consumer_timeout,
            "reported": fact is not None,
            "facts": clean_facts(fact or {}),
        }
        for (consumer_id, seen, inflight), fact in zip(found, facts)
    ]


def clean_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """Each field of the contract: its value in ``raw`` when it has the contract's type,
    else None (shown as "-")."""
    return {name: _typed(raw.get(name), types) for name, types in FACT_TYPES.items()}


def _typed(value: Any, types: tuple[type, ...]) -> Any:
    return value if isinstance(value, types) and not isinstance(value, bool) else None


def history(rq: QueueAdmin, minutes: int) -> list[dict[str, int]]:
    points = rq.history(rq.server_time(), minutes)
    return [{"minute": m, "done": done, "failed": failed} for m, done, failed in points]


def job_rows(entries: list[Entry], limit: int = PREVIEW_CHARS) -> list[dict[str, Any]]:
    return [job_row(job_id, when, message, limit) for job_id, when, message in entries]


def job_row(job_id: str, when: float, message: bytes | None, limit: int) -> dict[str, Any]:
    """One job as shown: its data as text (or hex when it is not UTF-8), attempt, error."""
    row: dict[str, Any] = {"id": job_id, "when": when, "attempt": None, "error": None}
    if message is None:
        return {**row, "problem": "no message stored", **shown_data(None, limit)}
    try:
        job = jobs.decode(message)
    except jobs.MessageDecodeError as exc:
        return {**row, "problem": f"undecodable message: {exc}", **shown_data(None, limit)}
    row.update(attempt=job.attempt, error=jobs.decode_error(message), problem=None)
    return {**row, **shown_data(job.data, limit)}


def shown_data(data: bytes | None, limit: int) -> dict[str, Any]:
    """``data`` as ``text`` when it is UTF-8, else as ``hex``; cut at ``limit`` characters."""
    if data is None:
        return {"text": None, "hex": None, "size": 0, "truncated": False}
    try:
        text: str | None = data.decode("utf-8")
    except UnicodeDecodeError:
        text = None
    shown = data.hex(" ") if text is None else text
    fields: dict[str, Any] = {"text": None, "hex": None, "size": len(data)}
    fields["truncated"] = len(shown) > limit
    fields["hex" if text is None else "text"] = shown[:limit]
    return fields
