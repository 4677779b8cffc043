"""gq's results as Django's ``TaskResult`` (status, return value, errors).

``read`` looks the id up on each queue of the backend with ``gq.tasks.jobview.job_view`` (what
``gq job`` shows: one round trip per queue): the kept outcome once the job ended (for
the backend's ``RESULT_TTL``), else the job's message while it waits, runs or lies in
dead. ``to_task_result`` is the one place the two models meet.
"""

from __future__ import annotations

import builtins
import inspect
import traceback
from datetime import datetime, timezone
from types import ModuleType
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import Task, TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils.module_loading import import_string

import gq
import gq.errors
from gq.store.locate import locate
from gq.tasks.jobview import job_view

#: gq's statuses (SPEC 16) as Django's; "missing" is TaskResultDoesNotExist.
STATUSES = {
    "scheduled": TaskResultStatus.READY,
    "retrying": TaskResultStatus.READY,  # (Django has no retry status: it waits to run)
    "ready": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
}

#: The class of an error gq stored without a type it can name (a gq.Kill's reason, a
#: return value that could not be kept, a type of an unknown module).
UNNAMED = "gq.errors.TaskFailed"


def read(app: gq.App, alias: str, queues: list[str] | None, result_id: str) -> TaskResult:
    """The TaskResult of job ``result_id`` on the first of ``queues`` that knows it (any
    queue the app knows for None: Django's ``QUEUES: []``); ``TaskResultDoesNotExist``
    when none does, or when it is no Django task's job."""
    names = queues or app.known_queues()
    client = app._store(app.queue)[0].client
    sharded = any(name in app.sharding.counts for name in names)
    # A sharded queue's job is on one of its shards: its id's, else (a grouped job) any.
    found = (app.sharding.locate(client, result_id, names) if sharded
             else names[0] if len(names) == 1 else locate(client, result_id, names))  # fmt: skip
    view = None if found is None else job_view(app._store(found)[0], result_id)
    if view is None or view["status"] == "missing":
        raise TaskResultDoesNotExist(
            f"gq knows nothing of job {result_id!r} on queue(s) {', '.join(names)}: never "
            "enqueued there, cancelled, or its result expired (RESULT_TTL)"
        )
    return to_task_result(alias, view)


def to_task_result(alias: str, view: dict[str, Any]) -> TaskResult:
    """A TaskResult from ``job_view``'s answer: the Django task at the job's task path,
    its status, call, attempts, end time, and its return value or last error."""
    task, status, error = django_task(view), view["status"], view.get("error")
    if status == "done" and error is not None:
        status = "failed"  # done, but its return value could not be kept: none to give
    result = TaskResult(
        task=task, id=view["id"], status=STATUSES[status], **times(view),
        args=list(view.get("args") or []), kwargs=dict(view.get("kwargs") or {}),
        backend=alias,
        errors=[] if error is None else [stored_error(error, task, view.get("traceback"))],
        worker_ids=["gq"] * attempts(view),
    )  # fmt: skip
    if status == "done":
        object.__setattr__(result, "_return_value", view.get("value"))
    return result


def django_task(view: dict[str, Any]) -> Task:
    """The Django task a job runs, imported from its gq task name (its module path)."""
    name = view.get("task")
    try:
        found = import_string(name) if name else None
    except ImportError:
        found = None
    if not isinstance(found, Task):
        what = f"of gq task {name!r}" if name else "with no task (a plain job)"
        raise TaskResultDoesNotExist(f"job {view['id']!r} is a job {what}, not a Django task's")
    return found


def attempts(view: dict[str, Any]) -> int:
    """How many runs the job had: a kept outcome (and a running job) names the attempt it
    ended in, counted from 0; a waiting or dead message counts the attempts made."""
    attempt = int(view.get("attempt") or 0)
    finished = "finished" in view or view["status"] == "running"
    return attempt + 1 if finished else attempt


def times(view: dict[str, Any]) -> dict[str, datetime | None]:
    """The job's times as Django's TaskResult names them (None: not recorded)."""
    return {"enqueued_at": _time(view, "enqueued_at"), "started_at": _time(view, "started_at"),
            "last_attempted_at": _time(view, "last_started_at"),
            "finished_at": _when(view)}  # fmt: skip


def _when(view: dict[str, Any]) -> datetime | None:
    """When the job finished: the outcome's own time, else the kept outcome's, else
    dead's score."""
    at = view.get("finished_at") or view.get("finished", view.get("since"))
    return None if at is None else aware(at)


def _time(view: dict[str, Any], key: str) -> datetime | None:
    """One of the job's times (unix seconds in the view) as an aware UTC datetime."""
    at = view.get(key)
    return None if at is None else aware(at)


def aware(at: float) -> datetime:
    """Unix seconds as an aware UTC datetime, as Django's results carry times."""
    return datetime.fromtimestamp(float(at), tz=timezone.utc)


def stored_error(text: str, task: Task, trace: str | None = None) -> TaskError:
    """An error as gq stores it ("Type: text") as Django's TaskError: the type's class path
    (``class_path``), the traceback gq kept (else the text, ended as a traceback ends)."""
    if trace is None:
        trace = text if text.endswith("\n") else text + "\n"
    return TaskError(exception_class_path=class_path(text, task), traceback=trace)


def class_path(text: str, task: Task) -> str:
    """The class path of the type an error's text names. gq stores the type's name, not
    its module, so it is looked for in the task's module (where a task's own exceptions
    often live, and where a name it imports means that class), then among the builtins,
    then in gq.errors; ``UNNAMED`` when none has it."""
    name = text.split(":", 1)[0].strip()
    for place in (inspect.getmodule(task.func), builtins, gq.errors):
        if place is not None and _is_exception(place, name):
            return f"{place.__name__}.{name}"
    return UNNAMED


def _is_exception(module: ModuleType, name: str) -> bool:
    found = getattr(module, name, None) if name.isidentifier() else None
    return isinstance(found, type) and issubclass(found, BaseException)


def task_error(error: BaseException) -> TaskError:
    """A run's exception as Django's TaskError (for the signals in the worker)."""
    kind, trace = type(error), "".join(traceback.format_exception(error))
    return TaskError(exception_class_path=f"{kind.__module__}.{kind.__qualname__}", traceback=trace)
