"""The dashboard's history page (issue 34): the jobs that ended on a queue, newest first,
with the filters of ``gq history`` (state, task, error, id prefix, age), their durations,
and a link to the result of each job that kept one. One implementation with the library
and the CLI: ``gq.Queue.history`` (gq/history.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from gq.dashboard import model
from gq.dashboard.http import HTTPError, Request, Response
from gq.errors import ConfigurationError
from gq.history import HistoryEntry
from gq.jobfilter import JobFilter

if TYPE_CHECKING:
    from gq.dashboard.site import Site

#: Entries per page.
PAGE = 50
#: The form's fields, read from the query string.
FIELDS = ("state", "task", "error", "id_prefix", "newer_than", "older_than")
STATES = ("finished", "done", "dead", "cancelled")


def history(d: Site, request: Request, name: str) -> Response:
    q = d.queue(name)
    form = {field: (request.arg(field) or "").strip() for field in FIELDS}
    try:
        page = q.history(filter_of(form), limit=PAGE, cursor=request.arg("cursor") or None)
    except ConfigurationError as exc:
        raise HTTPError(400, str(exc)) from None
    return d.render(request, "history.html", queue=model.summary(q.store, d.consumer_timeout),
                    tab="history", form=form, states=STATES, entries=[row(e) for e in page.entries],
                    cursor=page.cursor)  # fmt: skip


def filter_of(form: dict[str, str]) -> JobFilter:
    """The filter of the form's non-empty fields (a bad one: ConfigurationError)."""
    given = {k: form[k] for k in ("task", "error", "id_prefix") if form[k]}
    return JobFilter.parse(
        state=[form["state"]] if form["state"] else [],
        newer_than=form["newer_than"] or None, older_than=form["older_than"] or None, **given,
    )  # fmt: skip


def row(entry: HistoryEntry) -> dict[str, Any]:
    return {**entry.as_dict(), "duration_text": seconds(entry.duration),
            "total_text": seconds(entry.total)}  # fmt: skip


def seconds(value: float | None) -> str:
    """A duration as people read it: 820 ms, 1.03 s, 2 min 5 s."""
    if value is None:
        return "-"
    if value < 1:
        return f"{value * 1000:.0f} ms"
    if value < 120:
        return f"{value:.2f} s"
    return f"{int(value // 60)} min {int(value % 60)} s"
