"""The dashboard's views of results (SPEC section 16): the job page, which shows a job's
status, task, arguments, attempts, times and result or error whether it still waits or
has finished and kept a result; and the queue page's list of recent results."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gq.dashboard import model
from gq.dashboard.http import HTTPError, Request, Response
from gq.sharded import ShardedQueue
from gq.store.admin import QueueAdmin
from gq.tasks.describe import _Texts
from gq.tasks.jobview import job_view, recent_results

if TYPE_CHECKING:
    from gq.dashboard.site import Site

#: Finished jobs the queue page lists.
RECENT = 20
# The fields of a job's outcome the page may show (None where the job has none).
_SHOWN = ("group", "due", "since", "finished", "error", "attempt", "task", "value", "enqueued_at",
          "started_at", "last_started_at", "finished_at", "traceback")  # fmt: skip


def job(d: Site, request: Request, name: str) -> Response:
    queue = d.queue(name)
    job_id = request.arg("id") or ""
    rq = queue.shard_of(job_id).store if isinstance(queue, ShardedQueue) and job_id else queue.store
    outcome = job_view(rq, job_id) if job_id else {"status": "missing"}
    if outcome["status"] == "missing":
        raise HTTPError(404, "No such job (it may have run without keeping a result, or "
                             "been deleted).")  # fmt: skip
    [message] = rq.messages([job_id])
    row = model.job_detail(job_id, message) if message is not None else None
    return d.render(request, "job.html", queue=model.summary(queue.store, d.consumer_timeout),
                    job=row, outcome=shown(outcome, job_id))  # fmt: skip


def shown(view: dict[str, Any], job_id: str) -> dict[str, Any]:
    """A job_view with its values as text (cut as the job page cuts arguments)."""
    texts = _Texts(model.DETAIL_VALUE_CHARS)
    result = {**dict.fromkeys(_SHOWN), **view, "id": job_id}
    kept = "value" in view and view.get("status") == "done" and view.get("error") is None
    result["value"] = texts.shown(view["value"]) if kept else None
    result["positional"] = [(str(i), texts.shown(v)) for i, v in enumerate(view.get("args") or [])]
    result["named"] = list(texts.mapping(view.get("kwargs") or {}).items())
    return result


def recent(rq: QueueAdmin) -> list[dict[str, Any]]:
    """The queue page's most recent finished jobs that kept a result."""
    texts = _Texts(model.VALUE_CHARS)
    rows = []
    for entry in _recent(rq):
        error = entry.get("error")
        value = error if error is not None else texts.shown(entry.get("value"))
        rows.append({"id": entry["id"], "task": entry.get("task") or "", "status": entry["status"],
                     "at": entry.get("at"), "outcome": texts.cut(str(value))})  # fmt: skip
    return rows


def _recent(rq: QueueAdmin) -> list[dict[str, Any]]:
    """The most recent results, newest first; a sharded queue's of all its shards."""
    admins = model.shard_admins(rq) or [rq]
    every = [entry for admin in admins for entry in recent_results(admin, RECENT)]
    return sorted(every, key=lambda entry: -(entry.get("at") or 0.0))[:RECENT]
