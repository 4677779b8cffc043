"""Jinja filters: numbers and times as the pages show them; "-" for anything missing."""

from __future__ import annotations

import math
from datetime import timezone
from typing import Any, Callable

from gq.display import age, clock_time, relative

MISSING = "-"


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)


def duration(seconds: Any) -> str:
    """42s, 5m07s, 3h02m, 4d06h."""
    return age(seconds) if _number(seconds) else MISSING


def utc(when: Any) -> str:
    return clock_time(when, timezone.utc) if _number(when) else MISSING


def ago(when: Any, now: float) -> str:
    """How long ago ``when`` was, or how far ahead: 5m07s ago, in 3h02m."""
    return relative(when, now) if _number(when) else MISSING


def megabytes(size: Any) -> str:
    return f"{size / 1048576:.1f} MB" if _finite(size) else MISSING


def percent(value: Any) -> str:
    return f"{value:.1f}%" if _finite(value) else MISSING


def count(value: Any) -> str:
    """Thousands separated by a thin space, so big counts stay readable."""
    return f"{value:,}".replace(",", "\u202f") if _number(value) else MISSING


def or_missing(value: Any) -> Any:
    return MISSING if value is None or value == "" else value


FILTERS: dict[str, Callable[..., Any]] = {
    "duration": duration,
    "utc": utc,
    "ago": ago,
    "megabytes": megabytes,
    "percent": percent,
    "count": count,
    "or_missing": or_missing,
}
