"""gq's results as Django's ``TaskResult`` (status, return value, errors).

Written against SPEC section 16's API (``app.result(id)``, ``Result.status()``,
``Result.get()``, ``gq.TaskFailed``), which lands with gq's results: until then
``available`` is False, so ``GQBackend.supports_get_result`` is, and ``get_result``
says so. ``to_task_result`` is the one place the two models meet.
"""

from __future__ import annotations

import traceback
from typing import Any

from django.tasks import TaskResult, TaskResultStatus
from django.tasks.base import TaskError
from django.tasks.exceptions import TaskResultDoesNotExist
from django.utils.module_loading import import_string

import gq

#: gq's statuses (SPEC 16) as Django's; "missing" is TaskResultDoesNotExist.
STATUSES = {
    "scheduled": TaskResultStatus.READY,
    "ready": TaskResultStatus.READY,
    "running": TaskResultStatus.RUNNING,
    "done": TaskResultStatus.SUCCESSFUL,
    "failed": TaskResultStatus.FAILED,
}


def available(app: gq.App) -> bool:
    """Whether this gq keeps results (SPEC 16's ``App.result``)."""
    return callable(getattr(app, "result", None))


def read(app: gq.App, alias: str, result_id: str) -> TaskResult:
    """The TaskResult of job ``result_id`` for the backend ``alias`` of ``app``
    (``TaskResultDoesNotExist`` if gq knows nothing of it)."""
    if not available(app):
        raise NotImplementedError("this gq keeps no results yet (SPEC section 16)")
    result: Any = app.result(result_id)
    status = result.status()
    if status == "missing":
        raise TaskResultDoesNotExist(result_id)
    value, error = None, None
    if status == "done":
        value = result.get(timeout=0)
    elif status == "failed":
        try:
            result.get(timeout=0)
        except Exception as exc:  # noqa: BLE001 - gq.TaskFailed, whatever its module
            error = exc
    return to_task_result(alias, result_id, result.task, status, value, error)


def to_task_result(
    alias: str, id: str, task_name: str, status: str, value: Any, error: Any
) -> TaskResult:
    """A TaskResult from what gq knows of a job: its task's module path, its status
    (SPEC 16's words), its return value, and the error of a job that ended in dead."""
    task = import_string(task_name)  # the Django task at that path (a GQTask)
    result = TaskResult(
        task=task, id=id, status=STATUSES[status], enqueued_at=None, started_at=None,
        finished_at=None, last_attempted_at=None, args=[], kwargs={}, backend=alias,
        errors=[] if error is None else [failed_error(error)], worker_ids=[],
    )  # fmt: skip
    if status == "done":
        object.__setattr__(result, "_return_value", value)
    return result


def failed_error(error: Any) -> TaskError:
    """gq.TaskFailed as Django's TaskError: gq stores the error as "Type: text" (the
    worker's description), kept whole as the traceback; the type as the class path when
    it is a builtin's name, else gq.TaskFailed's."""
    text = str(getattr(error, "error", None) or error)
    name = text.split(":", 1)[0].strip()
    builtin = __builtins__ if isinstance(__builtins__, dict) else vars(__builtins__)
    if isinstance(builtin.get(name), type) and issubclass(builtin[name], BaseException):
        path = f"builtins.{name}"
    else:
        path = f"{type(error).__module__}.{type(error).__qualname__}"
    return TaskError(exception_class_path=path, traceback=text)


def task_error(error: BaseException) -> TaskError:
    """A run's exception as Django's TaskError (for the signals in the worker)."""
    kind = type(error)
    return TaskError(
        exception_class_path=f"{kind.__module__}.{kind.__qualname__}",
        traceback="".join(traceback.format_exception(error)),
    )
