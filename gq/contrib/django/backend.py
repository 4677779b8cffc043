"""``GQBackend``: Django's task backend contract (django/tasks/backends/base.py) on a
``gq.App``.

- Each Django ``@task`` of this backend is a ``GQTask``, which registers a gq task named
  by its module path (``shop.tasks.send_receipt``) on the backend's app as it is
  created: the worker (gq.contrib.django.worker) imports the ``tasks`` modules of the
  installed apps and so knows them all.
- ``enqueue`` writes a gq job on the Django task's ``queue_name`` (checked against
  ``QUEUES`` by Django), ``run_after`` as gq's ``at``; the ``TaskResult`` has the job's id.
- Priorities are refused, as Django's contract says for a backend without them
  (``supports_priority = False``: ``InvalidTask`` for any priority but 0): gq's order is
  by queue (``gq_worker --queue high --queue low``, or weights), not per job.
- ``OPTIONS``: ``url`` (else gq-worker's ``--url`` in the worker) and the gq task
  options as app defaults (``retries``, ``timeout``, ``backoff``...); ``RESULT_TTL``
  (``DEFAULT_RESULT_TTL`` unless given) is how long gq keeps a job's outcome, which is
  what ``get_result`` reads: 0 keeps none, and then ``supports_get_result`` is False.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any, Callable

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

import gq
from gq.contrib.django import results
from gq.errors import ConfigurationError

#: One gq.App per backend alias, for the process: Django keeps a backend per thread
#: (per greenlet under gevent), but the tasks registered must be the same for all.
_APPS: dict[str, gq.App] = {}

#: Seconds an outcome is kept when OPTIONS has no RESULT_TTL: Django's API reads results
#: by id (``get_result``, ``refresh``), so they are kept unless the settings say not to.
DEFAULT_RESULT_TTL = 86400.0


class GQTask(Task):  # type: ignore[misc]  # (Django has no type information)
    """A Django task that registers itself as a gq task on its backend's app."""

    __slots__ = ()

    def __post_init__(self) -> None:
        Task.__post_init__(self)  # Django's checks (validate_task)
        backend = self.get_backend()
        if isinstance(backend, GQBackend):
            backend.register(self)


class GQBackend(BaseTaskBackend):  # type: ignore[misc]  # (as above)
    task_class = GQTask
    supports_defer = True
    supports_async_task = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        #: In the settings' order (Django's ``queues`` is a set): the first is the app's.
        self.queue_names: list[str] = list(params.get("QUEUES") or ["default"])
        self.app = app_for(alias, self.options, self.queue_names)

    @property
    def supports_get_result(self) -> bool:
        """Whether gq keeps the outcomes ``get_result`` reads (OPTIONS ``RESULT_TTL`` > 0)."""
        return bool(self.app.defaults.result_ttl)

    def register(self, task: Task) -> gq.Task[Any, Any]:
        """The gq task of a Django task (registered once, by its module path)."""
        found = self.app.tasks.get(task.module_path)
        if found is None:
            found = self.app.task(name=task.module_path, queue=task.queue_name)(runner(task))
        return found

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        call = self.register(task).using(queue=task.queue_name, at=task.run_after)
        result = call.enqueue(*args, **kwargs)  # TypeError for a value gq cannot carry
        task_result = new_result(task, result.id, self.alias, list(args), dict(kwargs))
        task_enqueued.send(type(self), task_result=task_result)
        return task_result

    def get_result(self, result_id: str) -> TaskResult:
        """The ``TaskResult`` of a job on one of the backend's queues: its kept outcome,
        else its state while it waits or runs (``TaskResultDoesNotExist`` when gq knows
        nothing of it)."""
        if not self.supports_get_result:
            raise NotImplementedError(
                f"TASKS[{self.alias!r}] keeps no results (OPTIONS RESULT_TTL is 0)"
            )
        return results.read(self.app, self.alias, self.queue_names, result_id)


def app_for(alias: str, options: dict[str, Any], queues: list[str]) -> gq.App:
    """The app of backend ``alias`` (made once); ``ImproperlyConfigured`` for bad OPTIONS."""
    from django.core.exceptions import ImproperlyConfigured

    app = _APPS.get(alias)
    if app is None:
        defaults = {key.lower(): value for key, value in options.items()}
        defaults.setdefault("result_ttl", DEFAULT_RESULT_TTL)
        url = defaults.pop("url", None)
        try:
            app = _APPS[alias] = gq.App(url=url, queue=queues[0], **defaults)
        except (ConfigurationError, TypeError) as exc:
            raise ImproperlyConfigured(f"TASKS[{alias!r}]['OPTIONS']: {exc}") from exc
    return app


def new_result(task: Task, id: str, alias: str, args: list[Any], kwargs: dict[str, Any],
               status: str = TaskResultStatus.READY) -> TaskResult:  # fmt: skip
    """A Django TaskResult for job ``id``, with nothing known of its runs yet."""
    return TaskResult(
        task=task, id=id, status=status, enqueued_at=timezone.now(), started_at=None,
        finished_at=None, last_attempted_at=None, args=args, kwargs=kwargs, backend=alias,
        errors=[], worker_ids=[],
    )  # fmt: skip


def runner(task: Task) -> Callable[..., Any]:
    """The function gq runs for a Django task: its ``func``, given a ``TaskContext``
    first when it takes one, with Django's signals around it and its return value
    made JSON-like as Django's own backends make it. Its signature is the task's
    (without ``context``), so that gq refuses arguments that do not bind."""
    if inspect.iscoroutinefunction(task.func):

        async def arun(*args: Any, **kwargs: Any) -> Any:
            with signalled(task, args, kwargs) as context:
                return normalize_json(await task.func(*context, *args, **kwargs))

        return signed(arun, task)

    def run(*args: Any, **kwargs: Any) -> Any:
        with signalled(task, args, kwargs) as context:
            return normalize_json(task.func(*context, *args, **kwargs))

    return signed(run, task)


def signed(fn: Callable[..., Any], task: Task) -> Callable[..., Any]:
    functools.update_wrapper(fn, task.func)
    signature = inspect.signature(task.func)
    if task.takes_context:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    fn.__signature__ = signature  # type: ignore[attr-defined]
    return fn


class signalled:  # noqa: N801 - used as a context manager, like contextlib's
    """Django's ``task_started``/``task_finished`` around a run, and its stale database
    connections closed; the ``TaskContext`` to pass first (an empty tuple for a task that
    takes none)."""

    def __init__(self, task: Task, args: Any, kwargs: Any) -> None:
        job = gq.current_job()
        assert job is not None  # (only the worker runs these)
        self.result = new_result(task, job.id, task.backend, list(args), dict(kwargs),
                                 TaskResultStatus.RUNNING)  # fmt: skip
        # Django counts attempts from 1, by the workers that ran it.
        self.result.worker_ids.extend(["gq"] * (job.attempt + 1))
        self.context = (TaskContext(task_result=self.result),) if task.takes_context else ()

    def __enter__(self) -> tuple[Any, ...]:
        # As around a request (and Celery's Django fixup around a task): a connection
        # past CONN_MAX_AGE or broken is closed, not reused by the next run of this greenlet.
        close_old_connections()
        now = timezone.now()
        object.__setattr__(self.result, "started_at", now)
        object.__setattr__(self.result, "last_attempted_at", now)
        task_started.send(GQBackend, task_result=self.result)
        return self.context

    def __exit__(self, kind: Any, error: Any, tb: Any) -> None:
        failed = error is not None
        status = TaskResultStatus.FAILED if failed else TaskResultStatus.SUCCESSFUL
        object.__setattr__(self.result, "status", status)
        object.__setattr__(self.result, "finished_at", timezone.now())
        if failed:
            self.result.errors.append(results.task_error(error))
        task_finished.send(GQBackend, task_result=self.result)
        close_old_connections()
