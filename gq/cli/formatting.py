"""How the operator tool shows things: tables, ages, job previews and JSON lines."""

from __future__ import annotations

import base64
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timezone, tzinfo
from typing import Any

from gq import job as jobs
from gq.describe import describe

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


YEAR = 365 * 86400


def age(seconds: float) -> str:
    """A short human duration: 42s, 5m07s, 3h02m, 4d06h, 3y005d; total: "forever" for an
    infinity, ">999y" past that, "-" for NaN or what is not a number."""
    value = _seconds(seconds)
    if value is None:
        return "-"
    if value == math.inf:
        return "forever"
    s = int(max(0.0, value))
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    if s < 86400:
        return f"{s // 3600}h{s % 3600 // 60:02d}m"
    if s < YEAR:
        return f"{s // 86400}d{s % 86400 // 3600:02d}h"
    return f"{s // YEAR}y{s % YEAR // 86400:03d}d" if s < 1000 * YEAR else ">999y"


def relative(when: float, now: float) -> str:
    """5m07s ago, in 3h02m, never (due at +inf); "-" when either time is unreadable."""
    at, current = _seconds(when), _seconds(now)
    delta = math.nan if at is None or current is None else at - current
    if math.isnan(delta):
        return "-"
    if delta <= 0:
        return f"{age(-delta)} ago"
    return "never" if delta == math.inf else f"in {age(delta)}"


def local_time(when: float) -> str:
    return clock_time(when, None)


def clock_time(when: float, tz: tzinfo | None) -> str:
    """``when`` (unix seconds) as a date and time in ``tz`` (None: local); beyond the
    calendar's years "after year 9999" / "before year 1", "-" for NaN."""
    at = _seconds(when)
    if at is None:
        return "-"
    try:
        shown = datetime.fromtimestamp(at, tz).strftime("%Y-%m-%d %H:%M:%S")
    except (ValueError, OverflowError, OSError):  # out of datetime's range
        return "after year 9999" if at > 0 else "before year 1"
    return f"{shown} UTC" if tz is timezone.utc else shown


def _seconds(value: Any) -> float | None:
    """Any number as a float (a huge int as an infinity); None for NaN or a non-number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    try:
        seconds = float(value)
    except OverflowError:
        return math.inf if value > 0 else -math.inf
    return None if math.isnan(seconds) else seconds


def json_safe(value: Any) -> Any:
    """``value`` with every infinity or NaN replaced by None: strict JSON has neither (a
    score of +inf in Redis is legal, "Infinity" in JSON is not)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value


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
