"""Periodic schedules added at runtime (issue 34): kept in Redis under gq's own keys
(gq.store.schedules), read by every running worker of the queue within a heartbeat, and
run by the same PeriodicRunner and periodic.lua as the schedules given in code: exactly
one enqueue per occurrence across consumers (SPEC section 11).

A record is MessagePack: task, args, kwargs, cron or every, tz. The job's envelope is
built by the worker from it; the task name is not checked here, since the worker that
runs the job decides (an unknown task fails there, as any job of an unknown task does).
A name that a schedule given in code holds wins on that worker: the runtime one is
ignored there with a warning (docs/decisions.md).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import msgpack

from gq.errors import ConfigurationError
from gq.periodic import Periodic
from gq.store import schedules as store
from gq.tasks import envelope

log = logging.getLogger("gq.periodic")


@dataclass(frozen=True)
class Schedule:
    """A runtime schedule: enqueue ``task(*args, **kwargs)`` at every occurrence of
    ``cron`` (in ``tz``) or ``every`` seconds, unless ``paused``."""

    name: str
    task: str
    cron: str | None = None
    every: int | None = None
    args: list[Any] = field(default_factory=list)
    kwargs: dict[str, Any] = field(default_factory=dict)
    tz: str = "UTC"
    paused: bool = False

    def periodic(self, queue: str) -> Periodic:
        """The Periodic the worker runs (ConfigurationError for a bad rule)."""
        data = envelope.encode(self.task, self.args, self.kwargs)
        return Periodic(self.name, cron=self.cron, every=self.every, data=data, tz=self.tz,
                        queue=queue)  # fmt: skip

    def record(self) -> bytes:
        fields = {"task": self.task, "cron": self.cron, "every": self.every,
                  "args": self.args, "kwargs": self.kwargs, "tz": self.tz}  # fmt: skip
        return bytes(msgpack.packb(fields, use_bin_type=True))

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "task": self.task, "cron": self.cron, "every": self.every,
                "args": self.args, "kwargs": self.kwargs, "tz": self.tz,
                "paused": self.paused}  # fmt: skip


def checked(schedule: Schedule, queue: str) -> Schedule:
    """``schedule`` if it can run, else ConfigurationError saying why."""
    if not isinstance(schedule.task, str) or not schedule.task:
        raise ConfigurationError(f"Periodic {schedule.name!r}: task must be a task's name")
    if not isinstance(schedule.args, list) or not isinstance(schedule.kwargs, dict):
        raise ConfigurationError(
            f"Periodic {schedule.name!r}: args must be a list and kwargs a mapping"
        )
    try:
        schedule.periodic(queue)
    except TypeError as exc:  # (an argument with no MessagePack form)
        raise ConfigurationError(f"Periodic {schedule.name!r}: {exc}") from exc
    return schedule


def decode(name: str, record: bytes, paused: bool) -> Schedule:
    """The Schedule a record holds (ValueError if it does not decode)."""
    found = msgpack.unpackb(record, raw=False)
    if not isinstance(found, dict):
        raise ValueError("not a map")
    return Schedule(name, found["task"], found.get("cron"), found.get("every"),
                    list(found.get("args") or []), dict(found.get("kwargs") or {}),
                    found.get("tz") or "UTC", paused)  # fmt: skip


def add(client: Any, queue: str, schedule: Schedule, code_names: set[str]) -> bool:
    """Add or change a runtime schedule; True if it is new. A name that a schedule given
    in code holds (``code_names``: the names with a cursor and no runtime record) is
    refused: ConfigurationError."""
    checked(schedule, queue)
    if schedule.name in code_names and not store.exists(client, queue, schedule.name):
        raise ConfigurationError(
            f"Periodic {schedule.name!r}: a schedule given in code (app.periodic or "
            "--periodic) holds this name on queue " + queue
        )
    store.forget_moved(client, queue, schedule.name)  # a mark a reshard left: start afresh
    return store.put(client, queue, schedule.name, schedule.record())


def code_names(state: dict[str, Any], runtime: list[Schedule]) -> set[str]:
    """The names schedules given in code hold: those with a cursor (``state``: the
    queue's ``periodic_state``) that are no runtime schedule nor one moved away."""
    return {name for name, (rule, *_) in state.items() if rule != store.MOVED} - {
        s.name for s in runtime}


def set_paused(client: Any, queue: str, name: str, paused: bool) -> None:
    """Pause or resume ``name``; KeyError if no runtime schedule has that name."""
    if not store.exists(client, queue, name):
        raise KeyError(f"no runtime periodic schedule {name!r} on queue {queue}")
    store.set_paused(client, queue, name, paused)


def remove(client: Any, queue: str, name: str) -> bool:
    """Remove runtime schedule ``name`` and its cursor; whether it existed."""
    return store.remove(client, queue, name)


def listed(client: Any, queue: str) -> list[Schedule]:
    """Every runtime schedule of ``queue`` that decodes, by name."""
    found = []
    for name, (record, paused) in sorted(store.read(client, queue).items()):
        try:
            found.append(decode(name, record, paused))
        except (ValueError, KeyError, TypeError, msgpack.UnpackException):
            log.warning("periodic %s on queue %s: its record does not decode", name, queue)
    return found


def runnable(client: Any, queue: str) -> list[Periodic]:
    """The Periodic of every runtime schedule of ``queue`` that is not paused and runs."""
    found = []
    for schedule in listed(client, queue):
        if schedule.paused:
            continue
        try:
            found.append(schedule.periodic(queue))
        except (ConfigurationError, TypeError) as exc:
            log.warning("periodic %s on queue %s: not run: %s", schedule.name, queue, exc)
    return found
