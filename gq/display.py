"""How times and values read to a person, in the operator tool and the dashboard alike:
short ages, relative and clock times (far times and infinities included), strict JSON."""

from __future__ import annotations

import json
import math
from datetime import datetime, timezone, tzinfo
from typing import Any

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


def json_default(value: Any) -> Any:
    """JSON for the values MessagePack has and JSON lacks: bytes (as text where they are
    UTF-8, else their repr) and datetimes (ISO 8601)."""
    if isinstance(value, bytes):
        try:
            return value.decode("utf-8")
        except UnicodeDecodeError:
            return repr(value)
    if hasattr(value, "isoformat"):
        return value.isoformat()
    return repr(value)


def json_text(value: Any) -> str:
    """``value`` as strict JSON text, its MessagePack-only values made plain (a task's
    arguments as they were sent)."""
    return json.dumps(json_safe(value), ensure_ascii=False, default=json_default)
