"""Workflows under ``gq.testing.eager``: a chain's steps and a group's members run at once,
in this thread, each through its task's own eager enqueue; a failure stops the workflow
as a ``TaskFailed`` naming the step's task."""

from __future__ import annotations

from typing import Any, Callable

from gq.errors import TaskFailed
from gq.tasks.task import Signature


def _run_eager(sig: Signature[Any], args: list[Any]) -> Any:
    try:
        return sig.task.call().enqueue(*args, **sig.kwargs).get()
    except Exception as exc:  # noqa: BLE001 - named in the TaskFailed
        raise TaskFailed("eager", sig.task.name, f"{type(exc).__name__}: {exc}") from exc


def _eager(run: Callable[[], Any]) -> tuple[Any, BaseException | None]:
    try:
        return run(), None
    except TaskFailed as exc:
        return None, exc


def eager_chain(steps: list[Signature[Any]]) -> tuple[Any, BaseException | None]:
    def run() -> Any:
        value: Any = None
        for index, step in enumerate(steps):
            passed = [value] if index and not step.immutable else []
            value = _run_eager(step, [*passed, *step.args])
        return value

    return _eager(run)


def eager_group(members: list[Signature[Any]],
                 cb: Signature[Any] | None) -> tuple[Any, BaseException | None]:  # fmt: skip
    def run() -> Any:
        values = [_run_eager(m, list(m.args)) for m in members]
        if cb is None:
            return values
        return _run_eager(cb, [*([] if cb.immutable else [values]), *cb.args])

    return _eager(run)
