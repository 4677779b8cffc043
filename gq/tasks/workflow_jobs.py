"""How a workflow's jobs are written (gq.tasks.workflows): each job's opts, its group
(SPEC section 17: workflow jobs are grouped jobs like any other), the app's
``on_enqueue`` hooks for every step, and the push of the first jobs."""

from __future__ import annotations

import time
from datetime import datetime
from typing import Any, Callable

from gq.errors import ConfigurationError, ResultUnavailable
from gq.job import Job
from gq.store.groups import push_group
from gq.tasks.groups import group_of
from gq.tasks.options import wire
from gq.tasks.outcome import THEN
from gq.tasks.task import Signature


def opts_of(sig: Signature[Any], keep: float, then: list[dict[str, Any]] | None,
          group: str | None = None) -> dict[str, Any]:  # fmt: skip
    opts = wire(sig.task.options, time.time, None)
    opts.pop("group", None)
    if group:
        opts["group"] = group  # (where a retry of it waits: its group's line)
    opts["result_ttl"] = sig.task.options.result_ttl or keep
    if then:
        opts[THEN] = then
    return opts


def group_of_step(sig: Signature[Any], receives: bool) -> str | None:
    """The group of a workflow job (SPEC section 17): the task's, a function's of its
    arguments, which a step receiving the previous value does not have at enqueue."""
    option = sig.task.options.group
    if callable(option) and receives and not sig.immutable:
        raise ConfigurationError(f"task {sig.task.name}: a chain step that receives the "
                                 "previous value cannot have a group function (its "
                                 "arguments are not known at enqueue): use .si(...) or a "
                                 "group name")  # fmt: skip
    return group_of(option, sig.args, sig.kwargs, sig.task.name)


def app_of(sig: Signature[Any]) -> Any:
    return sig.task.app


def placed(sig: Signature[Any], job_id: str) -> str:
    """The queue workflow job ``job_id`` of ``sig`` is written to: on a sharded queue, the
    shard of its workflow (its id is ``<workflow>.<i>``), so that the ack that writes its
    successor stays in one slot (gq/tasks/sharding.py)."""
    physical: str = app_of(sig).sharding.physical(sig.task.queue, job_id)
    return physical


class Hooks:
    """The app's ``on_enqueue`` hooks for every job a workflow writes, its later steps'
    included: run at the workflow's enqueue, their headers stored with each step."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.runs: list[Any] = []

    def headers(self, sig: Signature[Any], job_id: str) -> dict[str, str] | None:
        run = self.app.hooks.enqueueing(sig.task.queue, sig.task.name)
        if run is None:
            return None
        self.runs.append(run)
        return run.stamp(job_id, sig.args, sig.kwargs, None)  # type: ignore[no-any-return]

    def close(self, error: BaseException | None) -> None:
        for run in reversed(self.runs):
            run.close(error)


def push(sig: Signature[Any], jobs: list[tuple[str, bytes, str | None]]) -> None:
    """Store and queue (id, envelope, group) jobs on ``sig``'s queue, in batches: the
    grouped ones in their group's line (all of one workflow: one shard of a sharded queue)."""
    queue, core = app_of(sig)._store(placed(sig, jobs[0][0]))
    now = time.time()
    messages = [(job_id, core._encode(Job(job_id, data), now)) for job_id, data, _ in jobs]
    if any(group for _, _, group in jobs):
        entries = [(i, m, 0.0, g or "") for (i, m), (_, _, g) in zip(messages, jobs)]
        stored = push_group(queue, "now", entries)
    else:
        stored = queue.push(messages)
    if not all(stored):
        raise ResultUnavailable(f"workflow job {messages[stored.index(False)][0]} exists already")


def hooked(app: Any, write: Callable[[Hooks], Any]) -> Any:
    """``write(hooks)``, the hooks closed after it with its error, if any."""
    hooks = Hooks(app)
    try:
        written = write(hooks)
    except BaseException as exc:
        hooks.close(exc)
        raise
    hooks.close(None)
    return written


def relative_expiry(sig: Signature[Any], spec: dict[str, Any]) -> None:
    """A later step's relative ``expires`` counts from its own enqueue (docs/tasks.md):
    carried as ``expires_in``, resolved by the worker that writes the step."""
    expires = sig.task.options.expires
    if expires is not None and not isinstance(expires, datetime):
        spec["expires_in"] = float(expires)
