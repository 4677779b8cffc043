"""The dashboard's page of a queue's runtime periodic schedules (issue 34, gq/schedules.py):
listed with their task, rule and arguments; added, paused, resumed and removed through
``gq.Queue``'s methods, as ``gq periodic add|pause|resume|remove`` does."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from gq.dashboard import model
from gq.dashboard.http import HTTPError, Request, Response, redirect
from gq.dashboard.pages import queue_url
from gq.errors import ConfigurationError
from gq.queue import Queue

if TYPE_CHECKING:
    from gq.dashboard.site import Site

Form = Mapping[str, Sequence[str]]
ADD_FIELDS = ("name", "task", "cron", "every", "tz", "args", "kwargs")
MESSAGES = {
    "added": "Schedule added: running workers take it up within a heartbeat.",
    "changed": "Schedule changed: running workers take it up within a heartbeat.",
    "paused": "Schedule paused.",
    "resumed": "Schedule resumed.",
    "removed": "Schedule removed.",
    "missing": "No runtime schedule of that name.",
}


def schedules(d: Site, request: Request, name: str) -> Response:
    code = MESSAGES.get(request.arg("done") or "")
    return _page(d, request, d.queue(name), message=code)


def _page(d: Site, request: Request, queue: Queue, status: int = 200, problem: str | None = None,
          form: Form | None = None, message: str | None = None) -> Response:  # fmt: skip
    given = form or {}
    return d.render(
        request, "periodic.html", status,
        queue=model.summary(queue.store, d.consumer_timeout),
        schedules=[_shown(s.as_dict()) for s in queue.periodic_schedules()],
        problem=problem, message=message,
        form={field: (given.get(field) or [""])[0] for field in ADD_FIELDS},
    )  # fmt: skip


def _shown(schedule: dict[str, Any]) -> dict[str, Any]:
    rule = f"every {schedule['every']}s" if schedule["every"] is not None else schedule["cron"]
    arguments = json.dumps(schedule["args"], ensure_ascii=False, default=str)
    named = json.dumps(schedule["kwargs"], ensure_ascii=False, default=str)
    return {**schedule, "rule": rule, "arguments": arguments, "named": named}


def add(d: Site, request: Request, name: str) -> Response:
    """Add (or change) a schedule; a bad rule or argument shows the page again (400) with
    what is wrong and the form as it was filled."""
    queue, form = d.queue(name), request.form()
    try:
        new = queue.add_periodic(_field(form, "name"), _field(form, "task"),
                                 cron=_field(form, "cron") or None, every=_every(form),
                                 args=_json(form, "args", list), kwargs=_json(form, "kwargs", dict),
                                 tz=_field(form, "tz") or "UTC")  # fmt: skip
    except ConfigurationError as exc:
        return _page(d, request, queue, 400, str(exc), form)
    return _after(request, name, "added" if new else "changed")


def change(d: Site, request: Request, name: str, verb: str) -> Response:
    """Pause, resume or remove the posted schedule."""
    queue, schedule = d.queue(name), _field(request.form(), "schedule")
    if not schedule:
        raise HTTPError(400, "No schedule named.")
    try:
        if verb == "remove":
            found = queue.remove_periodic(schedule)
            return _after(request, name, "removed" if found else "missing")
        (queue.pause_periodic if verb == "pause" else queue.resume_periodic)(schedule)
    except KeyError:
        return _after(request, name, "missing")
    return _after(request, name, "paused" if verb == "pause" else "resumed")


def _field(form: Form, name: str) -> str:
    return (form.get(name) or [""])[0].strip()


def _every(form: Form) -> int | None:
    text = _field(form, "every")
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ConfigurationError(f"every must be whole seconds, not {text!r}") from None


def _json(form: Form, name: str, kind: type) -> Any:
    text = _field(form, name) or ("[]" if kind is list else "{}")
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ConfigurationError(f"{name} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        wanted = 'an array, such as [1, "a"]' if kind is list else 'an object, such as {"k": 1}'
        raise ConfigurationError(f"{name} must be a JSON {wanted}")
    return value


def _after(request: Request, name: str, code: str) -> Response:
    return redirect(f"{queue_url(request, name, '/periodic')}?done={code}")
