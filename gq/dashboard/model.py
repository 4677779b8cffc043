"""What the dashboard shows, read through the Redis boundary into plain, JSON-ready dicts.

Pages and the JSON API render the same dicts, so they cannot disagree.
"""

from __future__ import annotations

from typing import Any

from gq import job as jobs
from gq.queue import consumer_report, flow_report, snapshot, stats
from gq.sharded import ShardedAdmin, merged_consumers, merged_groups, merged_stats
from gq.store.admin import Entry, QueueAdmin
from gq.tasks import groups as group_view
from gq.tasks.describe import TaskView, describe

# Job data shown in a list is cut here; the job's own page shows up to DETAIL_BYTES.
PREVIEW_CHARS = 2000
DETAIL_BYTES = 64 * 1024
# A task's argument (or option) is cut here in a list, and at DETAIL_VALUE_CHARS on its page.
VALUE_CHARS = 120
DETAIL_VALUE_CHARS = 4000
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
    "jobs_retried": (int,),
    "jobs_dead": (int,),
    "rss_bytes": (int,),
    "cpu_percent": (int, float),
    "updated_at": (int, float),
}

# What a consumer's entry carries over from gq.queue.consumer_report.
CONSUMER_FIELDS = ("id", "state", "alive", "silent", "silent_for", "in_flight", "updated_at",
                   "recover_at", "recover_in")  # fmt: skip


def summary(rq: QueueAdmin, consumer_timeout: float) -> dict[str, Any]:
    """Counts by state, consumers alive and dead, and how long the next job has waited
    (``gq stats``' numbers, gq.queue.snapshot), with the queue's name and the server time.
    A sharded queue's are summed over its shards, and ``shards`` has a row per shard."""
    admins = shard_admins(rq)
    if admins:
        return _sharded_summary(rq, admins, consumer_timeout)
    report, now = snapshot(rq, consumer_timeout)
    return {"name": rq.keys.name, **report, "now": now}


def _sharded_summary(rq: QueueAdmin, admins: list[QueueAdmin],
                     consumer_timeout: float) -> dict[str, Any]:  # fmt: skip
    reports = [stats(admin, consumer_timeout) for admin in admins]
    every = merged_consumers([consumer_report(admin, consumer_timeout) for admin in admins])
    merged = merged_stats(rq.keys.name, reports, every)
    del merged["per_shard"]
    rows = [{**{field: r[field] for field in SHARD_FIELDS}, "name": r["queue"]} for r in reports]
    return {**merged, "name": rq.keys.name, "now": rq.server_time(), "shards": rows}


#: The columns of the queue page's table of a sharded queue's shards.
SHARD_FIELDS = ("ready", "scheduled", "dead", "grouped", "in_flight", "paused")


def shard_admins(rq: QueueAdmin) -> list[QueueAdmin]:
    """A sharded queue's shards (gq/sharded.py); none for a plain queue."""
    return list(rq.by_name.values()) if isinstance(rq, ShardedAdmin) else []


def flow(rq: QueueAdmin) -> dict[str, Any]:
    """Paused, the limits, the jobs held now and the seconds a RateLimited holds the queue
    back: the fields ``gq stats --json`` shows (gq.queue.flow_report). A sharded queue is
    paused when every shard is (``paused_shards`` says how many are), its held summed."""
    admins = shard_admins(rq)
    if not admins:
        return flow_report(rq.flow())
    reports = [flow_report(admin.flow()) for admin in admins]
    paused = sum(1 for report in reports if report["paused"])
    return {**reports[0], "paused": paused == len(reports), "paused_shards": paused,
            "held": sum(report["held"] for report in reports),
            "held_back_seconds": max(r["held_back_seconds"] for r in reports)}  # fmt: skip


def groups(rq: QueueAdmin) -> dict[str, Any]:
    """The busiest groups and every group's limits: what ``gq stats --json`` shows under
    "groups" (gq.tasks.groups.report); over a sharded queue's shards, merged."""
    admins = shard_admins(rq)
    if not admins:
        return group_view.report(rq)
    return merged_groups([group_view.report(admin) for admin in admins], group_view.BUSIEST)


def consumers(rq: QueueAdmin, consumer_timeout: float) -> list[dict[str, Any]]:
    """Every registered consumer, newest first, as gq.queue.consumer_report tells it (its
    state, how long it has been silent, when its jobs in flight may be recovered), with its
    facts cleaned (``reported`` False when it wrote none); a sharded queue's each once."""
    admins = shard_admins(rq)
    entries = (merged_consumers([consumer_report(admin, consumer_timeout) for admin in admins])
               if admins else consumer_report(rq, consumer_timeout))  # fmt: skip
    return [_consumer(entry) for entry in reversed(entries)]


def _consumer(entry: dict[str, Any]) -> dict[str, Any]:
    shown = {name: entry[name] for name in CONSUMER_FIELDS}
    facts = entry["facts"]
    return {
        **shown,
        "last_heartbeat": entry["heartbeat_at"],
        "reported": facts is not None,
        "facts": clean_facts(facts or {}),
    }


def clean_facts(raw: dict[str, Any]) -> dict[str, Any]:
    """Each field of the contract: its value in ``raw`` when it has the contract's type,
    else None (shown as "-")."""
    return {name: _typed(raw.get(name), types) for name, types in FACT_TYPES.items()}


def _typed(value: Any, types: tuple[type, ...]) -> Any:
    return value if isinstance(value, types) and not isinstance(value, bool) else None


def history(rq: QueueAdmin, minutes: int) -> list[dict[str, int]]:
    """Per minute: jobs done, retried, and dead (failed for good); "failed" is every
    failed attempt, retries included, as the history has always counted it."""
    now = rq.server_time()
    every = [admin.history(now, minutes) for admin in shard_admins(rq) or [rq]]
    points = [(rows[0][0], *(sum(row[i] for row in rows) for i in (1, 2, 3)))
              for rows in zip(*every)]  # fmt: skip
    return [
        {"minute": m, "done": done, "failed": failed, "retried": retried,
         "dead": max(0, failed - retried)}
        for m, done, failed, retried in points
    ]  # fmt: skip


def job_rows(entries: list[Entry], limit: int = PREVIEW_CHARS) -> list[dict[str, Any]]:
    return [job_row(job_id, when, message, limit) for job_id, when, message in entries]


def job_detail(job_id: str, message: bytes | None) -> dict[str, Any]:
    """One job for its own page: longer data and longer task arguments than a list's."""
    return job_row(job_id, 0.0, message, DETAIL_BYTES * 3, DETAIL_VALUE_CHARS)


def job_row(
    job_id: str, when: float, message: bytes | None, limit: int, value_chars: int = VALUE_CHARS
) -> dict[str, Any]:
    """One job as shown: a task's name and arguments, or its data as text (hex when it is
    not UTF-8), attempt, error."""
    row: dict[str, Any] = {"id": job_id, "when": when, "attempt": None, "error": None}
    if message is None:
        return {**row, "problem": "no message stored", **shown_data(None, limit)}
    try:
        job = jobs.decode(message)
    except jobs.MessageDecodeError as exc:
        return {**row, "problem": f"undecodable message: {exc}", **shown_data(None, limit)}
    row.update(attempt=job.attempt, error=jobs.decode_error(message), problem=None)
    return {**row, **shown_data(job.data, limit, value_chars)}


def shown_data(data: bytes | None, limit: int, value_chars: int = VALUE_CHARS) -> dict[str, Any]:
    """A task as ``task`` (name, arguments, options: text cut at ``value_chars``); other
    data as ``text`` when it is UTF-8, else as ``hex``, cut at ``limit`` characters, with
    ``data_problem`` saying why an envelope that does not decode is shown raw."""
    fields: dict[str, Any] = {"task": None, "data_problem": None}
    if data is None:
        return {**fields, "text": None, "hex": None, "size": 0, "truncated": False}
    view = describe(data, value_chars)
    if view.task is not None:
        return {
            **fields,
            "task": _task_fields(view.task),
            "text": None,
            "hex": None,
            "size": len(data),
            "truncated": view.task.shortened,
        }
    return {**fields, "data_problem": view.problem, **_raw(data, limit, view.problem is None)}


def _task_fields(task: TaskView) -> dict[str, Any]:
    """The task's text fields, with the arguments in one line and numbered one a row."""
    numbered = [(str(i), value) for i, value in enumerate(task.args)]
    return {**task.as_dict(), "arguments": task.arguments(), "positional": numbered}


def _raw(data: bytes, limit: int, as_text: bool) -> dict[str, Any]:
    text = _utf8(data) if as_text else None
    shown = data.hex(" ") if text is None else text
    fields: dict[str, Any] = {"text": None, "hex": None, "size": len(data)}
    fields["truncated"] = len(shown) > limit
    fields["hex" if text is None else "text"] = shown[:limit]
    return fields


def _utf8(data: bytes) -> str | None:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return None
