"""Workflows (SPEC section 16): ``gq.chain(a.s(), b.s())`` runs each step after the
previous one succeeded, with its value as the step's first argument (``.si`` steps
ignore it); ``gq.group(...)`` runs its members side by side, and ``.then(cb.s())``
runs ``cb(results, ...)`` once every member succeeded.

Exactly once: each step's envelope carries the next step (``opts.then``), and the
worker writes it in the script that acknowledges the step (gq/scripts/lib/outcome.lua),
under an id fixed at enqueue (``<chain>.<i>``). A worker that dies after a step ran but
before its ack wrote nothing: the step runs again (at-least-once), and only its one
acknowledgement enqueues the next. A group's count of members left lives in
``Q:group:<id>`` and is lowered by each member's ack; the callback, stored with it at
enqueue, is queued by the ack that brings it to zero. Its arguments are read by the
worker that runs it, so a member's ack does the same bounded work in a group of 10,000.

Workflow jobs are jobs like any other (gq.tasks.workflow_jobs): a grouped one waits in its
group's line, the successors the ack writes too, and every one passes through the app's
``on_enqueue`` hooks at the workflow's enqueue.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterable, Sequence
from typing import Any

from gq.errors import ResultUnavailable, TaskFailed
from gq.job import Job
from gq.store.base import ScriptedQueue
from gq.store.outcomes import (
    State,
    gathered,
    group_state,
    read_state,
    start_group,
    status_of,
)
from gq.tasks import envelope
from gq.tasks.ids import new_id
from gq.tasks.jobview import waiting_status
from gq.tasks.outcome import GATHER
from gq.tasks.results import Result, await_, look, off_loop, settled, wait
from gq.tasks.task import Signature
from gq.tasks.workflow_eager import eager_chain as _eager_chain
from gq.tasks.workflow_eager import eager_group as _eager_group
from gq.tasks.workflow_ids import recall, remember
from gq.tasks.workflow_ids import steps as _steps_of
from gq.tasks.workflow_jobs import (
    Hooks,
    app_of,
    group_of_step,
    hooked,
    opts_of,
    placed,
    push,
    relative_expiry,
)

#: How long a workflow's steps keep their results (and a group its state) when neither
#: the task nor ``enqueue(result_ttl=)`` says: a day.
DEFAULT_KEEP = 86400.0

Step = tuple[str, str, str]  # (queue, id, task)


def chain(*steps: Signature[Any]) -> Chain:
    """Steps run one after the other, each given the previous value first."""
    return Chain(steps)


def group(*members: Signature[Any] | Iterable[Signature[Any]]) -> Group:
    """Members run side by side: ``group(a.s(1), a.s(2))`` or ``group(a.s(k) for k in ks)``."""
    if len(members) == 1 and not isinstance(members[0], Signature):
        return Group(list(members[0]))
    return Group(list(members))  # type: ignore[arg-type]


def _signatures(items: Sequence[Any], what: str) -> list[Signature[Any]]:
    if not items:
        raise ValueError(f"{what} needs at least one task.s(...)")
    for item in items:
        if not isinstance(item, Signature):
            raise TypeError(f"{what} takes task.s(...) signatures, not {item!r}")
    return list(items)


def _check_binds(sig: Signature[Any], receives: bool) -> None:
    args = [None, *sig.args] if receives and not sig.immutable else list(sig.args)
    why = sig.task.binder.check(args, sig.kwargs)
    if why is not None:
        raise TypeError(f"task {sig.task.name}: the arguments do not bind: {why}")


class Chain:
    """Steps run in order (``gq.chain``); ``then`` adds one; ``enqueue`` starts it."""

    def __init__(self, steps: Sequence[Signature[Any]]) -> None:
        self.steps = _signatures(steps, "chain()")
        for index, step in enumerate(self.steps):
            _check_binds(step, index > 0)

    def then(self, step: Signature[Any]) -> Chain:
        return Chain([*self.steps, step])

    def enqueue(self, *, result_ttl: float | None = None) -> ChainResult:
        """Enqueue the first step (the others follow it); the chain's handle."""
        keep = float(result_ttl or DEFAULT_KEEP)
        cid = new_id()
        ids = [f"{cid}.{i}" for i in range(len(self.steps))]
        app = app_of(self.steps[0])
        if app.eager is not None:
            return ChainResult(cid, app, self._steps(ids), _eager_chain(self.steps))
        hooked(app, lambda hooks: self._write(ids, keep, hooks))
        steps = self._steps(ids)
        remember(app._store(steps[0][0])[0], cid, {"kind": "chain", "steps": steps}, keep)
        return ChainResult(cid, app, steps)

    async def aenqueue(self, *, result_ttl: float | None = None) -> ChainResult:
        """``enqueue`` from asyncio code (written off the event loop)."""
        return await off_loop(lambda: self.enqueue(result_ttl=result_ttl))

    def _write(self, ids: list[str], keep: float, hooks: Hooks) -> None:
        spec: dict[str, Any] | None = None
        for index in reversed(range(len(self.steps))):
            sig = self.steps[index]
            group = group_of_step(sig, index > 0)
            spec = {"kind": "step", "queue": placed(sig, ids[index]), "id": ids[index],
                    "task": sig.task.name, "args": list(sig.args), "kwargs": dict(sig.kwargs),
                    "opts": opts_of(sig, keep, [spec] if spec else None, group),
                    "group": group,
                    "pass": not sig.immutable,
                    "headers": hooks.headers(sig, ids[index])}  # fmt: skip
            relative_expiry(sig, spec)
        assert spec is not None
        first = self.steps[0]
        data = envelope.encode(first.task.name, first.args, first.kwargs, spec["opts"],
                               spec["headers"])  # fmt: skip
        push(first, [(ids[0], data, spec["opts"].get("group"))])

    def _steps(self, ids: list[str]) -> list[Step]:
        return [(placed(s, i), i, s.task.name) for s, i in zip(self.steps, ids)]


class Group:
    """Members run side by side (``gq.group``); ``then`` sets a callback."""

    def __init__(self, members: Sequence[Signature[Any]],
                 callback: Signature[Any] | None = None) -> None:  # fmt: skip
        self.members = _signatures(members, "group()")
        for member in self.members:
            _check_binds(member, False)
        if callback is not None:
            _check_binds(_signatures([callback], "then()")[0], True)
        self.callback = callback

    def then(self, callback: Signature[Any]) -> Group:
        """Run ``callback`` with the members' results first, once all succeeded."""
        return Group(self.members, callback)

    def enqueue(self, *, result_ttl: float | None = None) -> GroupResult:
        keep = float(result_ttl or DEFAULT_KEEP)
        gid = new_id()
        ids = [f"{gid}.{i}" for i in range(len(self.members))]
        home = placed(self.callback or self.members[0], gid)
        app = app_of(self.members[0])
        steps = [(placed(s, i), i, s.task.name) for s, i in zip(self.members, ids)]
        cb = self.callback
        cb_step = None if cb is None else (placed(cb, gid), f"{gid}.then", cb.task.name)
        if app.eager is not None:
            return GroupResult(gid, home, app, steps, cb_step, _eager_group(self.members, cb))
        hooked(app, lambda hooks: self._write(gid, ids, keep, home, hooks))
        shape = {"kind": "group", "members": steps, "callback": cb_step}
        remember(app._store(home)[0], gid, shape, keep)
        return GroupResult(gid, home, app, steps, cb_step)

    async def aenqueue(self, *, result_ttl: float | None = None) -> GroupResult:
        """``enqueue`` from asyncio code (written off the event loop)."""
        return await off_loop(lambda: self.enqueue(result_ttl=result_ttl))

    def _write(self, gid: str, ids: list[str], keep: float, home: str, hooks: Hooks) -> None:
        callback = self._callback(gid, keep, home, hooks)
        start_group(app_of(self.members[0])._store(home)[0], gid, len(ids), keep, callback)
        by_queue: dict[str, list[tuple[str, bytes, str | None]]] = {}
        for index, (sig, job_id) in enumerate(zip(self.members, ids)):
            member = {"kind": "member", "queue": home, "group": gid, "index": index, "keep": keep}
            group = group_of_step(sig, False)
            data = envelope.encode(sig.task.name, sig.args, sig.kwargs,
                                   opts_of(sig, keep, [member], group),
                                   hooks.headers(sig, job_id))  # fmt: skip
            by_queue.setdefault(sig.task.queue, []).append((job_id, data, group))
        firsts = {s.task.queue: s for s in reversed(self.members)}
        for queue, jobs in by_queue.items():
            push(firsts[queue], jobs)

    def _callback(self, gid: str, keep: float, home: str,
                  hooks: Hooks) -> tuple[str, bytes, str] | None:  # fmt: skip
        cb = self.callback
        if cb is None:
            return None
        cb_id = f"{gid}.then"
        group = group_of_step(cb, True)
        opts = opts_of(cb, keep, None, group)
        if not cb.immutable:
            opts[GATHER] = {"queue": home, "group": gid, "n": len(self.members)}
        data = envelope.encode(cb.task.name, cb.args, cb.kwargs, opts, hooks.headers(cb, cb_id))
        core = app_of(cb)._store(cb.task.queue)[1]
        return cb_id, core._encode(Job(cb_id, data), time.time()), group or ""


# -- handles --------------------------------------------------------------------------

_NOTHING: Any = object()


class _Handle:
    """What chain and group handles share: an id, an app, eager outcomes."""

    def __init__(self, id: str, app: Any, eager: tuple[Any, BaseException | None] | None) -> None:
        self.id = id
        self._app = app
        self._eager = eager

    def _store(self, queue: str) -> ScriptedQueue:
        store: ScriptedQueue = self._app._store(queue)[0]
        return store

    def _known(self) -> Any:
        if self._eager is None:
            return _NOTHING
        value, error = self._eager
        if error is not None:
            raise error
        return value

    def _check(self) -> tuple[bool, Any]:
        raise NotImplementedError

    def _watched(self) -> list[tuple[str, list[str]]]:
        raise NotImplementedError

    def get(self, timeout: float | None = None) -> Any:
        """The workflow's value; ``TaskFailed`` naming the step or member that failed;
        ``TimeoutError`` with no outcome after ``timeout`` seconds."""
        known = self._known()
        if known is not _NOTHING:
            return known
        return wait(self._app, self._watched(), self._check, timeout)

    async def aget(self, timeout: float | None = None) -> Any:
        known = self._known()
        if known is not _NOTHING:
            return known
        return await await_(self._app, self._watched(), self._check, timeout)

    async def astatus(self) -> str:
        """``status`` from asyncio code."""
        return await off_loop(self.status)

    def status(self) -> str:
        """"done", "failed", "missing" (gq knows nothing of it, or a step is gone), or,
        while it is under way, "running" ("ready" or "scheduled" for a chain whose first
        step has not started)."""
        if self._eager is not None:
            return "failed" if self._eager[1] is not None else "done"
        try:
            done, _ = self._check()
        except TaskFailed:
            return "failed"
        except ResultUnavailable:
            return "missing"
        return "done" if done else self._under_way()

    def _under_way(self) -> str:
        return "running"


class ChainResult(_Handle):
    """A chain's handle: ``get()`` the last step's value."""

    def __init__(self, id: str, app: Any, steps: list[Step], eager: Any = None) -> None:
        super().__init__(id, app, eager)
        self.steps = steps

    def results(self) -> list[Result[Any]]:
        return [Result(i, q, t, app=self._app, keeps=True) for q, i, t in self.steps]

    def _watched(self) -> list[tuple[str, list[str]]]:
        by_queue: dict[str, list[str]] = {}
        for queue, job_id, _ in self.steps:
            by_queue.setdefault(queue, []).append(job_id)
        return list(by_queue.items())

    def _latest(self) -> tuple[int, State]:
        """The last step gq knows of, read from the last step backwards: what is known
        decides, not the steps before it (whose results may have expired sooner)."""
        for index in reversed(range(1, len(self.steps))):
            queue, job_id, _ = self.steps[index]
            state = read_state(self._store(queue), job_id)
            if state.known:
                return index, state
        queue, job_id, _ = self.steps[0]
        return 0, read_state(self._store(queue), job_id)  # (unknown: settled raises)

    def _check(self) -> tuple[bool, Any]:
        index, state = self._latest()
        queue, job_id, task = self.steps[index]
        done, value = settled(state, queue, job_id, task, True)
        if not done:
            return False, None
        if index == len(self.steps) - 1:
            return True, value
        # Its ack wrote the next step in the same script, maybe after that step was read
        # (backwards): read again, and if it is still unknown it is gone since.
        next_queue, after, name = self.steps[index + 1]
        if read_state(self._store(next_queue), after).known:
            return self._check()  # (reads it, and the steps after it, again)
        raise ResultUnavailable(f"chain {self.id}: step {after} (task {name}) is gone: "
                                "cancelled, or its outcome expired")  # fmt: skip

    def _under_way(self) -> str:
        index, state = self._latest()
        if index > 0:
            return "running"
        queue, job_id, task = self.steps[0]
        if settled(state, queue, job_id, task, True)[0]:
            return "running"  # (its next step is being written)
        status: str = status_of(self._store(queue), state, job_id)
        return status


class GroupResult(_Handle):
    """A group's handle: ``get()`` the members' results in order, or, with a callback,
    the callback's value."""

    def __init__(
        self,
        id: str,
        home: str,
        app: Any,
        members: list[Step],
        callback: Step | None,
        eager: Any = None,
    ) -> None:
        super().__init__(id, app, eager)
        self.home = home
        self.members = members
        self.callback = callback

    def _watched(self) -> list[tuple[str, list[str]]]:
        watched = [(self.home, [self.id])]
        if self.callback is not None:
            watched.append((self.callback[0], [self.callback[1]]))
        return watched

    def _check(self) -> tuple[bool, Any]:
        home = self._store(self.home)
        state = group_state(home, self.id)
        if state.left is None:
            raise ResultUnavailable(f"group {self.id}: gq knows nothing of it on queue "
                                    f"{self.home} (never enqueued there, or expired)")  # fmt: skip
        if state.failed is not None:
            self._raise_for(state.failed)
        if state.left > 0:
            return False, None
        if self.callback is not None:
            queue, job_id, task = self.callback
            return look(self._store(queue), job_id, task, True)
        return True, gathered(home, self.id, state.size)

    def _under_way(self) -> str:
        if group_state(self._store(self.home), self.id).left != len(self.members):
            return "running"  # (a member has ended)
        return waiting_status(status_of(*self._read(q, i)) for q, i, _ in self.members)

    def _read(self, queue: str, job_id: str) -> tuple[ScriptedQueue, State, str]:
        store = self._store(queue)
        return store, read_state(store, job_id), job_id

    def _raise_for(self, member: str) -> None:
        queue, _, task = next((m for m in self.members if m[1] == member), (self.home, member, ""))
        # Its error may be no longer kept: the group's mark still says it failed.
        with contextlib.suppress(ResultUnavailable):
            settled(read_state(self._store(queue), member), queue, member, task, True)
        raise TaskFailed(member, task, "failed (its error is no longer kept)")


def rebuilt(app: Any, workflow_id: str) -> ChainResult | GroupResult:
    """The handle of the chain or group ``workflow_id`` (``app.workflow``)."""
    queues = [app.sharding.physical(queue, workflow_id) for queue in app.known_queues()]
    shape = recall(app._store(queues[0])[0], queues, workflow_id)
    if shape is None:
        raise ResultUnavailable(f"workflow {workflow_id}: gq knows no chain or group of that "
                                f"id on the app's queues ({', '.join(queues)}): never "
                                "enqueued there, or its results expired")  # fmt: skip
    if shape["kind"] == "chain":
        return ChainResult(workflow_id, app, _steps_of(shape["steps"]))
    members = _steps_of(shape["members"])
    callback = None if shape["callback"] is None else _steps_of([shape["callback"]])[0]
    home = members[0][0] if callback is None else callback[0]
    return GroupResult(workflow_id, home, app, members, callback)
