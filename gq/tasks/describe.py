"""A job's data as people read it: a task's name and arguments as text, for the dashboard
and the ``gq`` views (dead, scheduled), which must agree.

Every value is shown as short, printable text: strings and bytes through ``repr`` (so a
control character, an ANSI escape or a newline in an argument cannot reach a terminal
as such; HTML escaping is the templates' job), long values cut with an ellipsis, and
nothing of unbounded size is built first: a 10 MB argument costs a slice, not a copy.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from typing import Any

from gq.errors import EnvelopeError
from gq.tasks import envelope

# One argument's text is cut to this many characters in a list; a job's page passes more.
VALUE_CHARS = 80
ELLIPSIS = "…"


@dataclass(frozen=True)
class TaskView:
    """A task job's name, arguments and options, each value already text."""

    name: str
    args: list[str]
    kwargs: dict[str, str]
    opts: dict[str, str] = field(default_factory=dict)
    headers: dict[str, str] = field(default_factory=dict)
    shortened: bool = False  # some value was cut: a wider view shows more

    def arguments(self) -> str:
        """``arg, ..., key=value``: the arguments as a call would write them."""
        return ", ".join([*self.args, *(f"{key}={value}" for key, value in self.kwargs.items())])

    def call(self, width: int | None = None) -> str:
        """``name(arg, ..., key=value)``, cut to ``width`` characters when given."""
        text = f"{self.name}({self.arguments()})"
        return text if width is None else cut(text, width)

    def as_dict(self) -> dict[str, Any]:
        """JSON-ready: the dashboard's rows and ``gq ... --json`` lines."""
        return {
            "name": self.name,
            "args": self.args,
            "kwargs": self.kwargs,
            "opts": self.opts,
            "headers": self.headers,
        }


@dataclass(frozen=True)
class DataView:
    """What a job's data is: a task (``task``), an envelope that does not decode
    (``problem``), or plain bytes (both None: shown as they always were)."""

    task: TaskView | None = None
    problem: str | None = None


def describe(data: bytes | None, width: int = VALUE_CHARS) -> DataView:
    """The task inside ``data`` with each value cut to ``width`` characters, the reason
    its envelope does not decode, or an empty view for a byte job."""
    if data is None or not envelope.is_envelope(data):
        return DataView()
    try:
        decoded = envelope.decode(data)
    except EnvelopeError as exc:
        return DataView(problem=f"task envelope does not decode: {exc}")
    return DataView(task=task_view(decoded, width))


def task_view(decoded: envelope.Envelope, width: int) -> TaskView:
    texts = _Texts(width)
    return TaskView(
        name=texts.cut(name_text(decoded.task)),
        args=[texts.shown(value) for value in decoded.args],
        kwargs=texts.mapping(decoded.kwargs),
        opts=texts.mapping(decoded.opts or {}),
        headers=texts.mapping(decoded.headers or {}),
        shortened=texts.shortened,
    )


class _Texts:
    """Values as text cut to one width, remembering whether anything was cut."""

    def __init__(self, width: int) -> None:
        self.width = width
        self.shortened = False

    def cut(self, text: str) -> str:
        self.shortened = self.shortened or len(text) > self.width
        return cut(text, self.width)

    def shown(self, value: object) -> str:
        return self.cut(_render(value, self.width + 1))

    def mapping(self, values: Mapping[Any, Any]) -> dict[str, str]:
        return {self.cut(name_text(str(key))): self.shown(value) for key, value in values.items()}


def name_text(name: str) -> str:
    """A name as it is when printable, else its ``repr`` (quotes and escapes)."""
    return name if name.isprintable() else repr(name)


def shown(value: object, width: int = VALUE_CHARS) -> str:
    """``value`` as printable text of at most ``width`` characters."""
    return cut(_render(value, width + 1), width)


def cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: max(0, width - 1)] + ELLIPSIS


def _render(value: object, budget: int) -> str:
    """Text of ``value``; past ``budget`` characters the rest is left out (the caller cuts),
    so the cost stays near ``budget`` whatever the value's size."""
    if isinstance(value, str):
        return repr(value[:budget])
    if isinstance(value, (bytes, bytearray, memoryview)):
        return repr(bytes(value[:budget]))
    if isinstance(value, Mapping):
        pairs = (f"{_render(k, budget)}: {_render(v, budget)}" for k, v in value.items())
        return "{" + _joined(pairs, budget) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + _joined((_render(item, budget) for item in value), budget) + "]"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    return _printable(repr(value)[:budget])


def _joined(items: Iterable[str], budget: int) -> str:
    """The items comma-separated, stopping with an ellipsis once past ``budget``."""
    out: list[str] = []
    used = 0
    for item in items:
        if used > budget:
            out.append(ELLIPSIS)
            break
        out.append(item)
        used += len(item) + 2
    return ", ".join(out)


def _printable(text: str) -> str:
    """``text`` with any non-printable character escaped (an odd ``repr``)."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)
