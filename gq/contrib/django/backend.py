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
- ``OPTIONS`` (gq/contrib/django/options.py): ``url`` (else gq-worker's ``--url`` in the
  worker), ``SHARDS`` (sharded queues: ``{"emails": 8}``) and the gq task options as app
  defaults (``retries``, ``timeout``, ``backoff``...); ``RESULT_TTL``
  (``DEFAULT_RESULT_TTL`` unless given) is how long gq keeps a job's outcome, which is
  what ``get_result`` reads: 0 keeps none, and then ``supports_get_result`` is False.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from django.db import close_old_connections
from django.tasks import TaskContext, TaskResult, TaskResultStatus
from django.tasks.backends.base import BaseTaskBackend
from django.tasks.base import Task
from django.tasks.exceptions import InvalidTask
from django.tasks.signals import task_enqueued, task_finished, task_started
from django.utils import timezone
from django.utils.json import normalize_json

import gq
from gq.contrib.django import options as options_
from gq.contrib.django import results
from gq.errors import ConfigurationError
from gq.tasks.ids import id_time

#: One gq.App per backend alias and settings, for the process: Django keeps a backend per
#: thread (per greenlet under gevent), but the tasks registered must be the same for all;
#: and a backend made after the settings changed (``override_settings``, Django's
#: ``setting_changed`` makes new backends) has the app of its own settings.
_APPS: dict[tuple[str, str], gq.App] = {}

DEFAULT_RESULT_TTL = options_.DEFAULT_RESULT_TTL


#: gq's task options a Django ``@task(...)`` of a GQBackend takes (Django 6.1's
#: ``task_class``): GQTask's fields, given to the gq task it registers.
GQ_OPTIONS = ("retries", "timeout", "backoff", "unique_for", "group", "result_ttl")


@dataclass(frozen=True, slots=True, kw_only=True)
class GQTask(Task):  # type: ignore[misc]  # (Django has no type information)
    """A Django task that registers itself as a gq task on its backend's app, with gq's
    task options: ``@task(retries=5, timeout=30, unique_for=600, group=..., ...)``
    (None: the backend's OPTIONS, then the worker's flags)."""

    retries: int | None = None
    timeout: float | None = None
    backoff: float | None = None
    unique_for: float | None = None
    group: str | Callable[..., str] | None = None
    result_ttl: float | None = None

    def __post_init__(self) -> None:
        Task.__post_init__(self)  # Django's checks (validate_task)
        backend = self.get_backend()
        if isinstance(backend, GQBackend):
            backend.register(self)

    def gq_options(self) -> dict[str, Any]:
        """The gq task options set on this task."""
        return {name: getattr(self, name) for name in GQ_OPTIONS if getattr(self, name) is not None}


class GQBackend(BaseTaskBackend):  # type: ignore[misc]  # (as above)
    task_class = GQTask
    supports_defer = True
    supports_async_task = True
    supports_priority = False

    def __init__(self, alias: str, params: dict[str, Any]) -> None:
        super().__init__(alias, params)
        #: In the settings' order (Django's ``queues`` is a set): the first is the app's.
        #: None for ``QUEUES: []`` (Django: no validation): any queue, found by the app.
        self.queue_names: list[str] | None = list(params.get("QUEUES") or []) or None
        self.app = app_for(alias, self.options, (self.queue_names or ["default"])[0])

    @property
    def supports_get_result(self) -> bool:
        """Whether gq keeps the outcomes ``get_result`` reads (OPTIONS ``RESULT_TTL`` > 0)."""
        return bool(self.app.defaults.result_ttl)

    def register(self, task: Task) -> gq.Task[Any, Any]:
        """The gq task of a Django task (registered once, by its module path)."""
        found = self.app.tasks.get(task.module_path)
        if found is None:
            options = task.gq_options() if isinstance(task, GQTask) else {}
            try:
                make = self.app.task(name=task.module_path, queue=task.queue_name, **options)
            except ConfigurationError as exc:
                raise InvalidTask(f"task {task.module_path}: {exc}") from exc
            found = make(runner(task))
        return found

    def enqueue(self, task: Task, args: Any, kwargs: Any) -> TaskResult:
        self.validate_task(task)
        # Django's contract for every backend: JSON-like arguments (TypeError "Unsupported
        # type" otherwise), kept as JSON gives them back (tuples as lists).
        args, kwargs = normalize_json(list(args)), normalize_json(dict(kwargs))
        call = self.register(task).using(queue=task.queue_name, at=task.run_after)
        result = call.enqueue(*args, **kwargs)
        task_result = new_result(task, result.id, self.alias, args, kwargs)
        # The enqueue time gq records (read from the job's id), so that get_result and
        # refresh() give back what enqueue() said (a given id of another form: now).
        enqueued = id_time(result.id)
        if enqueued is not None:
            object.__setattr__(task_result, "enqueued_at", results.aware(enqueued))
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


def app_for(alias: str, options: dict[str, Any], queue: str) -> gq.App:
    """The app of backend ``alias`` under these OPTIONS and first queue (made once per
    settings); ``ImproperlyConfigured`` for bad OPTIONS."""
    from django.core.exceptions import ImproperlyConfigured

    key = (alias, repr((sorted(options.items()), queue)))
    app = _APPS.get(key)
    if app is None:
        try:
            app = _APPS[key] = gq.App(**options_.app_arguments(options, queue))
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
