"""The dashboard's search box and the bulk actions on what it found (issue 34): the same
filters as ``gq jobs`` (gq.JobFilter), the same ``gq.Queue`` methods as ``gq purge``,
``gq move``, ``gq dead retry|delete`` and ``gq scheduled run|reschedule|delete``; this
module only turns a form into a filter and a method call, and the outcome into a page.

A selection (the checkboxes) is the filter narrowed to exactly those ids
(``JobFilter.ids``); "all matching" is the filter itself, asked about in the page first.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any, Callable
from urllib.parse import urlencode

from gq.bulk import BulkResult
from gq.dashboard import model
from gq.dashboard.http import HTTPError, Request, Response, redirect
from gq.dashboard.pages import queue_url
from gq.errors import ConfigurationError
from gq.jobfilter import STATES, JobFilter, Named, parse_duration
from gq.queue import Queue

if TYPE_CHECKING:
    from gq.dashboard.site import Site

Form = Mapping[str, Sequence[str]]

#: The text fields of the search form, as JobFilter.parse names them.
TEXT_FIELDS = ("task", "group", "args_contains", "error", "id_prefix", "older_than", "newer_than")
#: Every field of the search form that a link or a bulk form carries on.
FILTER_FIELDS = ("state", "args", *TEXT_FIELDS)
PER_PAGE, MAX_PER_PAGE = 25, 100
#: Seconds a page's search may take; past it, the page shows what it found and goes on
#: from there with its "next page" link (the cursor).
BUDGET = 2.0
#: A selection posts at most this many ids.
MAX_SELECTED = 1000

#: The actions on the jobs of each state, in the order the page shows them.
ACTIONS: dict[str, tuple[str, ...]] = {
    "dead": ("retry", "delete"),
    "ready": ("purge", "move"),
    "scheduled": ("run", "reschedule", "delete"),
}
#: What an action reports, by its fixed code: the page never echoes what it was sent.
MESSAGES = {
    "retry": "{n} job(s) queued again.",
    "delete": "{n} job(s) deleted.",
    "purge": "{n} job(s) purged.",
    "move": "{n} job(s) moved.",
    "run": "{n} job(s) moved to the queue to run now.",
    "reschedule": "{n} job(s) rescheduled.",
    "none": "No job was selected.",
}


# -- the search ----------------------------------------------------------------------------


def filter_of(form: Form, tasks: Mapping[str, Named]) -> JobFilter:
    """The filter a search form (or a bulk form's copy of it) describes, knowing the
    ``tasks`` the dashboard was given; ConfigurationError saying what is wrong (an unknown
    state, an args without "=", a bad age)."""
    texts = {name: _text(form, name) for name in TEXT_FIELDS}
    found = JobFilter.parse(state=_all(form, "state"), args=_all(form, "args"), **texts)
    return found.naming(tasks) if tasks and found.args else found


def _all(form: Form, name: str) -> list[str]:
    return [value.strip() for value in form.get(name, []) if value.strip()]


def _text(form: Form, name: str) -> str | None:
    values = _all(form, name)
    return values[0] if values else None


def filter_pairs(form: Form) -> list[tuple[str, str]]:
    """The filter's fields as given (for links and the bulk forms' hidden inputs)."""
    return [(name, value) for name in FILTER_FIELDS for value in _all(form, name)]


def search(d: Site, request: Request, name: str) -> Response:
    queue = d.queue(name)
    per = _per(request)
    pairs = filter_pairs(request.query)
    context: dict[str, Any] = {
        "queue": model.summary(queue.store, d.consumer_timeout),
        "form": {field: (_all(request.query, field) or [""])[0] for field in FILTER_FIELDS},
        "states": STATES,
        "pairs": pairs,
        "per": per,
        "message": _message(request),
    }
    try:
        jobfilter = filter_of(request.query, d.tasks)
        page = queue.jobs(jobfilter, limit=per, cursor=request.arg("cursor") or None,
                          budget=BUDGET)  # fmt: skip
    except ConfigurationError as exc:
        return d.render(request, "jobs.html", 400, problem=str(exc), found=None,
                        actions=(), next_url=None, first_url=None, **context)  # fmt: skip
    base = queue_url(request, name, "/jobs")
    return d.render(
        request, "jobs.html", problem=None, found=[job.as_dict() for job in page.jobs],
        actions=_actions(jobfilter),
        next_url=_url(base, [*pairs, ("per", str(per)), ("cursor", page.cursor)])
        if page.cursor else None,
        first_url=_url(base, [*pairs, ("per", str(per))]) if request.arg("cursor") else None,
        **context,
    )  # fmt: skip


def _per(request: Request) -> int:
    try:
        per = int(request.arg("per") or PER_PAGE)
    except ValueError:
        per = PER_PAGE
    return max(1, min(MAX_PER_PAGE, per))


def _actions(jobfilter: JobFilter) -> tuple[str, ...]:
    """The actions offered: those of the one state the filter names (none for several)."""
    return ACTIONS.get(jobfilter.states[0], ()) if len(jobfilter.states) == 1 else ()


def _url(base: str, pairs: Sequence[tuple[str, str]]) -> str:
    return f"{base}?{urlencode(pairs)}" if pairs else base


def _message(request: Request) -> str | None:
    template = MESSAGES.get(request.arg("done") or "")
    if template is None:
        return None
    text = template.format(n=_count(request.arg("n")))
    conflicts = _count(request.arg("conflicts"))
    if conflicts:
        text += f" {conflicts} left: the target queue holds other jobs with their ids."
    return text


def _count(text: str | None) -> int:
    try:
        return max(0, min(10**12, int(text or 0)))
    except ValueError:
        return 0


# -- the bulk actions ----------------------------------------------------------------------


def act(d: Site, request: Request, name: str) -> Response:
    """One action on the selected jobs or on all that match (read-only mode and the CSRF
    check came first): back to the search with how many jobs it changed."""
    form = request.form()
    queue = d.queue(name)
    verb, everything = _verb(form)
    try:
        jobfilter = filter_of(form, d.tasks)
        state = _state_for(jobfilter, verb)
        chosen = _chosen(form, jobfilter, state, everything)
        result = None if chosen is None else _run(queue, verb, chosen, form)
    except ConfigurationError as exc:
        raise HTTPError(400, str(exc)) from None
    return _after(request, name, filter_pairs(form), verb, result)


def _verb(form: Form) -> tuple[str, bool]:
    """The action asked for, and whether on all the jobs that match ("retry:all")."""
    verb, _, scope = (_text(form, "verb") or "").partition(":")
    if not any(verb in verbs for verbs in ACTIONS.values()) or scope not in ("", "all"):
        raise HTTPError(400, "Unknown action.")
    return verb, scope == "all"


def _state_for(jobfilter: JobFilter, verb: str) -> str:
    if len(jobfilter.states) != 1 or verb not in ACTIONS.get(jobfilter.states[0], ()):
        raise ConfigurationError(
            "choose one state in the search first: dead (retry, delete), ready (purge, move), "
            "scheduled (run, reschedule, delete)"
        )
    return jobfilter.states[0]


def _chosen(form: Form, jobfilter: JobFilter, state: str, everything: bool) -> JobFilter | None:
    """The filter of the jobs to change: all matching, or narrowed to the selected ids;
    None when nothing was selected."""
    if everything:
        return jobfilter
    ids = tuple(dict.fromkeys(_all(form, "id")))
    if len(ids) > MAX_SELECTED:
        raise ConfigurationError(f"at most {MAX_SELECTED} jobs at once: use 'all matching'")
    return dataclasses.replace(jobfilter, states=(state,), ids=ids) if ids else None


def _run(queue: Queue, verb: str, jobfilter: JobFilter, form: Form) -> BulkResult:
    state = jobfilter.states[0]
    return _RUNNERS[(state, verb)](queue, jobfilter, form)


def _move(queue: Queue, jobfilter: JobFilter, form: Form) -> BulkResult:
    target = _text(form, "to")
    if not target:
        raise ConfigurationError("move: name the queue to move the jobs to")
    return queue.move(jobfilter, to=target)


def _reschedule(queue: Queue, jobfilter: JobFilter, form: Form) -> BulkResult:
    delay, at = _text(form, "in"), _text(form, "at")
    if (delay is None) == (at is None):
        raise ConfigurationError("reschedule: give a delay (in: 30s, 10m, 2h) or a time (at)")
    if delay is not None:
        return queue.reschedule(jobfilter, after=parse_duration(delay))
    return queue.reschedule(jobfilter, at=utc_time(at or ""))


def utc_time(text: str) -> float:
    """Unix seconds of an ISO 8601 time (a datetime-local field's ``2026-12-04T18:30``);
    one without an offset is UTC, as the dashboard shows times."""
    try:
        when = datetime.fromisoformat(text.strip())
    except ValueError:
        raise ConfigurationError(f"not a time: {text!r} (use 2026-12-04T18:30, UTC)") from None
    return (when if when.tzinfo else when.replace(tzinfo=timezone.utc)).timestamp()


Runner = Callable[[Queue, JobFilter, Form], BulkResult]

# Whatever is chosen was asked for by name or behind the page's confirmation of "all
# matching": the library's guard against unfiltered destruction is passed (everything).
_RUNNERS: dict[tuple[str, str], Runner] = {
    ("dead", "retry"): lambda q, f, _: q.retry_dead(f),
    ("dead", "delete"): lambda q, f, _: q.delete_dead(f, everything=True),
    ("ready", "purge"): lambda q, f, _: q.purge(f, everything=True),
    ("ready", "move"): _move,
    ("scheduled", "run"): lambda q, f, _: q.run_scheduled(f),
    ("scheduled", "reschedule"): _reschedule,
    ("scheduled", "delete"): lambda q, f, _: q.purge(f, everything=True),
}


def _after(
    request: Request, name: str, pairs: list[tuple[str, str]], verb: str,
    result: BulkResult | None,
) -> Response:  # fmt: skip
    outcome: list[tuple[str, Any]] = [("done", "none")] if result is None else [
        ("done", verb), ("n", result.done), ("conflicts", result.conflicts)]  # fmt: skip
    return redirect(_url(queue_url(request, name, "/jobs"), [*pairs, *outcome]))
