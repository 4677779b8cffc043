"""The dashboard's running list (issue 34): the jobs in flight, each with its task, the
consumer holding it and the progress its task last reported (the job page's bar),
refreshed live like the queue page."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gq.dashboard import model
from gq.dashboard.http import Request, Response
from gq.jobsearch import FoundJob, running
from gq.store.admin import QueueAdmin
from gq.tasks.jobview import progress_of

if TYPE_CHECKING:
    from gq.dashboard.site import Site

#: Jobs in flight the page lists (each costs a GET of its progress).
MAX_RUNNING = 200


def running_list(d: Site, request: Request, name: str) -> Response:
    rq = d.queue(name).store
    summary = model.summary(rq, d.consumer_timeout)
    rows: list[dict[str, Any]] = []
    for shard in model.shard_admins(rq) or [rq]:  # a sharded queue: shard after shard
        if len(rows) < MAX_RUNNING:
            found = running(shard, MAX_RUNNING - len(rows))
            rows += [_row(shard, job, holder) for job, holder in found]
    return d.render(request, "running.html", queue=summary, running=rows,
                    more=summary["in_flight"] > len(rows))  # fmt: skip


def _row(rq: QueueAdmin, job: FoundJob, holder: str | None) -> dict[str, Any]:
    found = progress_of(rq, job.id, "running", job.attempt or 0)
    progress = None if found is None else {"fraction": found[0], "note": found[1]}
    return {**job.as_dict(), "consumer": holder, "progress": progress}
