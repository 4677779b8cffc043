"""``gq.JobFilter``: which jobs of a queue a search or a bulk action means (issue 34).

One value shared by ``gq jobs``, ``gq purge``, ``gq move``, ``gq dead retry|delete``,
``gq scheduled reschedule``, their ``gq.Queue`` methods and, later, the dashboard:

    JobFilter(states=("dead",), task="app.send", args=(("tenant", "acme"),), error="timeout")
    JobFilter.parse(state=["ready"], older_than="2h", args=["tenant=acme"])  # the CLI's text

Every field narrows; an empty filter matches every job of the states it is used on.
Times: a ready, scheduled or running job's age is its enqueue time (the UUIDv7 of its id,
gq/tasks/ids.py; else the ``ReadyAt`` its push wrote; a job with neither, a curlyq
one, has no age and matches no age filter); a dead job's age is its death (the dead
set's score), as BullMQ's ``clean`` and Sidekiq's dead set count it (docs/decisions.md).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fnmatch import fnmatchcase
from functools import cached_property
from typing import Any, Protocol

from gq import job as jobs
from gq.errors import ConfigurationError, EnvelopeError
from gq.tasks import envelope, ids

#: The states a filter can name, in the order a search walks them ("running": in flight
#: with a consumer, listed only; "ready" includes the jobs waiting in their group's line).
STATES = ("ready", "scheduled", "dead", "running", "finished")
#: The states of the history of finished jobs (gq/history.py; "finished": all of them).
HISTORY_STATES = ("done", "cancelled")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+)\s*(ms|s|m|h|d|w)?\s*$")


class Named(Protocol):
    """A task as ``JobFilter.naming`` reads it (``gq.Task``)."""

    @property
    def positional_names(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class JobFilter:
    """Which jobs: each field given narrows (see the module's docstring)."""

    states: tuple[str, ...] = ()  # none: every state the action works on
    task: str | None = None  # a task's name; * and ? match as in a shell
    group: str | None = None  # a grouped job's group
    args: tuple[tuple[str, str], ...] = ()  # KEY=VALUE: a keyword (or position) equals
    args_contains: str | None = None  # in the arguments' text (a byte job: its bytes)
    error: str | None = None  # in the last error (case-insensitive)
    id_prefix: str | None = None
    ids: tuple[str, ...] = ()  # exactly these ids (a selection: the dashboard's checkboxes)
    older_than: float | None = None  # seconds
    newer_than: float | None = None  # seconds
    #: (task name, its positional parameters' names): an ``args`` key that names one of
    #: them matches a task called with that argument by position too (``naming``)
    parameters: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def __post_init__(self) -> None:
        known = STATES + HISTORY_STATES
        unknown = [state for state in self.states if state not in known]
        if unknown:
            raise ConfigurationError(f"unknown state {unknown[0]!r}: one of {', '.join(known)}")
        for name in ("older_than", "newer_than"):
            value = getattr(self, name)
            if value is not None and not value >= 0:
                raise ConfigurationError(f"{name} must be seconds >= 0, not {value!r}")

    @classmethod
    def parse(
        cls,
        *,
        state: Sequence[str] = (),
        args: Sequence[str] = (),
        older_than: str | None = None,
        newer_than: str | None = None,
        **given: Any,
    ) -> JobFilter:
        """A filter from the command line's text: ``state`` names (a comma list too),
        ``args`` as ``KEY=VALUE``, durations as ``90``, ``10m``, ``2h``, ``7d``."""
        return cls(
            states=tuple(s.strip() for text in state for s in text.split(",") if s.strip()),
            args=tuple(parse_arg(text) for text in args),
            older_than=None if older_than is None else parse_duration(older_than),
            newer_than=None if newer_than is None else parse_duration(newer_than),
            **given,
        )

    def naming(self, tasks: Mapping[str, Named]) -> JobFilter:
        """This filter knowing the tasks' parameters (``app.tasks``), so that
        ``tenant=acme`` also matches ``send("acme")`` of ``def send(tenant)``."""
        named = tuple((name, task.positional_names) for name, task in tasks.items())
        return replace(self, parameters=named)

    def narrows(self) -> bool:
        """Whether anything but the states narrows it (``--yes`` is needed otherwise)."""
        return any(
            value not in (None, ())
            for value in (self.task, self.group, self.args, self.args_contains, self.error,
                          self.id_prefix, self.ids, self.older_than, self.newer_than)
        )  # fmt: skip

    def within(self, allowed: Iterable[str]) -> tuple[str, ...]:
        """The states this filter names among ``allowed`` (all of them when it names none);
        a named state outside them is refused."""
        allowed = tuple(allowed)
        refused = [state for state in self.states if state not in allowed]
        if refused:
            raise ConfigurationError(
                f"state {refused[0]!r} is not for this action: {', '.join(allowed)}"
            )
        return tuple(s for s in allowed if s in self.states) if self.states else allowed

    def matches(self, job: Candidate, now: float) -> bool:
        """Whether ``job`` (read at server time ``now``) passes every field."""
        if self.id_prefix and not job.id.startswith(self.id_prefix):
            return False
        if self.ids and job.id not in self.ids:
            return False
        if not self._may_match(job.message):
            return False
        if not self._age_matches(job.age_time, now):
            return False
        if self.error is not None and self.error.lower() not in (job.error or "").lower():
            return False
        if self.task is not None and not _name_matches(self.task, job.task):
            return False
        if self.group is not None and job.group != self.group:
            return False
        return self._args_match(job)

    @cached_property
    def _needles(self) -> tuple[bytes, ...]:
        """Bytes a message must hold to match: a task's exact name, a text argument's key
        and value (MessagePack writes text as it is): most jobs are passed over without
        decoding (a search of 100,000 jobs by tenant decodes the few that may match)."""
        needles = [self.task.encode()] if self.task and not _GLOB.search(self.task) else []
        named = {name for _, names in self.parameters for name in names}
        for key, value in self.args:
            needles += [] if key.isdigit() or key in named else [key.encode()]
            needles += [value.encode()] if isinstance(_json_value(value), str) else []
        return tuple(needles)

    def _may_match(self, message: bytes | None) -> bool:
        if not self._needles:
            return True
        return message is not None and all(needle in message for needle in self._needles)

    def _age_matches(self, when: float | None, now: float) -> bool:
        if self.older_than is None and self.newer_than is None:
            return True
        if when is None:
            return False
        age = now - when
        if self.older_than is not None and age < self.older_than:
            return False
        return self.newer_than is None or age <= self.newer_than

    def _args_match(self, job: Candidate) -> bool:
        if self.args_contains is not None and self.args_contains.lower() not in job.args_text:
            return False
        places = self._positions.get(job.task or "", {})
        return all(_pair_matches(job, key, value, places.get(key)) for key, value in self.args)

    @cached_property
    def _positions(self) -> dict[str, dict[str, int]]:
        """Task name -> its positional parameters' places by name."""
        return {task: {name: i for i, name in enumerate(names)}
                for task, names in self.parameters}  # fmt: skip


_GLOB = re.compile(r"[*?\[]")


def _name_matches(pattern: str, name: str | None) -> bool:
    if name is None:
        return False
    return fnmatchcase(name, pattern) if _GLOB.search(pattern) else name == pattern


def _pair_matches(job: Candidate, key: str, value: str, place: int | None) -> bool:
    found = job.argument(key, place)
    if found is _MISSING:
        return False
    return bool(found == _json_value(value) or _plain(found) == value)


def _json_value(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


def _plain(value: Any) -> str:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else json.dumps(value, default=str)


def parse_arg(text: str) -> tuple[str, str]:
    """``KEY=VALUE`` (a keyword argument, or a position: ``0=...``)."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise ConfigurationError(f"--args wants KEY=VALUE (tenant=acme, 0=first), not {text!r}")
    return key.strip(), value


def parse_duration(text: str) -> float:
    """Seconds from ``90``, ``1.5``, ``250ms``, ``10m``, ``2h``, ``7d``, ``1w``."""
    match = _DURATION.match(text)
    if match is None:
        raise ConfigurationError(
            f"invalid duration {text!r}: use seconds (90) or a unit (250ms, 10m, 2h, 7d, 1w)"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


_MISSING: Any = object()


class Candidate:
    """One job as a filter reads it: its id, state and the set's score (due, died), its
    message, decoded only as far as a field needs (a filter on the id decodes nothing)."""

    def __init__(
        self, job_id: str, state: str, score: float | None, message: bytes | None,
        line_field: str = "",
    ) -> None:  # fmt: skip
        self.id = job_id
        self.state = state
        self.score = score
        self.message = message
        #: The groups' lines field ("group\nN") of a job waiting in its group's line.
        self.line_field = line_field

    @property
    def line_group(self) -> str | None:
        return self.line_field.rsplit("\n", 1)[0] if self.line_field else None

    @cached_property
    def job(self) -> jobs.Job | None:
        try:
            return None if self.message is None else jobs.decode(self.message)
        except jobs.MessageDecodeError:
            return None

    @cached_property
    def envelope(self) -> envelope.Envelope | None:
        data = self.job.data if self.job is not None else b""
        if not envelope.is_envelope(data):
            return None
        try:
            return envelope.decode(data)
        except EnvelopeError:
            return None

    @property
    def task(self) -> str | None:
        return self.envelope.task if self.envelope is not None else None

    @property
    def group(self) -> str | None:
        if self.line_group is not None:
            return self.line_group
        group = self.envelope.opts.get("group") if self.envelope is not None else None
        return group if isinstance(group, str) else None

    @cached_property
    def error(self) -> str | None:
        try:
            return None if self.message is None else jobs.decode_error(self.message)
        except jobs.MessageDecodeError:
            return None

    @cached_property
    def enqueued_at(self) -> float | None:
        """The id's UUIDv7 time, else the ReadyAt of the message, else None."""
        made = ids.id_time(self.id)
        if made is not None or self.message is None:
            return made
        try:
            return jobs.decode_ready_at(self.message)
        except jobs.MessageDecodeError:
            return None

    @property
    def age_time(self) -> float | None:
        """What an age filter measures: the death of a dead job, else its enqueue."""
        return self.score if self.state == "dead" else self.enqueued_at

    @cached_property
    def args_text(self) -> str:
        """The arguments as searched by a substring, lowercased: a task's as JSON-like
        text, a byte job's data as text."""
        if self.envelope is not None:
            shown = [*map(_plain, self.envelope.args),
                     *(f"{k}={_plain(v)}" for k, v in self.envelope.kwargs.items())]  # fmt: skip
            return ", ".join(shown).lower()
        data = self.job.data if self.job is not None else b""
        return data.decode("utf-8", "surrogateescape").lower()

    def argument(self, key: str, place: int | None = None) -> Any:
        """The keyword argument ``key`` (or the positional one at index ``key``, or at
        ``place``: the task's parameter of that name)."""
        if self.envelope is None:
            return _MISSING
        if key in self.envelope.kwargs:
            return self.envelope.kwargs[key]
        if key.isdigit():
            place = int(key)
        if place is not None and place < len(self.envelope.args):
            return self.envelope.args[place]
        return _MISSING
