"""How the operator tool shows things: tables, ages, job previews and JSON lines."""

from __future__ import annotations

import base64
import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from gq import job as jobs
from gq.display import json_safe
from gq.tasks.describe import describe

PREVIEW_CHARS = 40
ERROR_CHARS = 60
# A task's call (name and arguments) in a table, and one value of it in a JSON line.
CALL_CHARS = 70
JSON_VALUE_CHARS = 1000


@dataclass
class MessageView:
    """What a stored message says, or why it cannot be read."""

    attempt: int | None = None
    data: bytes | None = None
    error: str | None = None
    problem: str | None = None


def read_message(message: bytes | None) -> MessageView:
    if message is None:
        return MessageView(problem="no message stored")
    try:
        job = jobs.decode(message)
    except jobs.MessageDecodeError as exc:
        return MessageView(problem=f"undecodable message: {exc}")
    return MessageView(job.attempt, job.data, jobs.decode_error(message))


def shorten(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def preview(data: bytes | None, width: int = PREVIEW_CHARS) -> str:
    """The data as text when it is printable UTF-8, else its size."""
    if data is None:
        return "-"
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return f"<{len(data)} bytes>"
    if not text.isprintable():
        return f"<{len(data)} bytes>"
    return repr(shorten(text, width)) if text else "''"


def data_preview(data: bytes | None) -> str:
    """A task as ``name(arguments)``; other data as :func:`preview` shows it, with a note
    when it is a task envelope that does not decode."""
    view = describe(data, PREVIEW_CHARS)
    if view.task is not None:
        return view.task.call(CALL_CHARS)
    if view.problem is not None:
        return f"{preview(data)} (undecodable task envelope)"
    return preview(data)


def data_fields(data: bytes | None) -> dict[str, Any]:
    """JSON fields for job data: ``data`` (UTF-8 text) or ``data_base64``; for a task also
    ``task`` (its name, arguments, options and headers as text) and, for an envelope that
    does not decode, ``data_problem``. A task's data is always base64: it is MessagePack."""
    if data is None:
        return {"data": None}
    view = describe(data, JSON_VALUE_CHARS)
    if view.task is not None:
        return {"task": view.task.as_dict(), "data_base64": _base64(data)}
    if view.problem is not None:
        return {"data_problem": view.problem, "data_base64": _base64(data)}
    try:
        return {"data": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"data_base64": _base64(data)}


def _base64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Left-aligned columns, two spaces apart; the last column is not padded."""
    widths = [max(len(str(row[i])) for row in [headers, *rows]) for i in range(len(headers))]
    lines = []
    for row in [headers, *rows]:
        cells = [str(cell).ljust(width) for cell, width in zip(row[:-1], widths)]
        lines.append("  ".join([*cells, str(row[-1])]).rstrip())
    return "\n".join(lines)


def print_json_lines(items: Sequence[dict[str, Any]]) -> None:
    for item in items:
        sys.stdout.write(json.dumps(json_safe(item), ensure_ascii=False) + "\n")
