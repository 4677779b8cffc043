"""The check of an envelope's ``opts`` before its task runs (docs/wire.md, "opts").

An envelope may come from another language, or from an older or a buggy producer: every
option the worker or the ack reads is checked here, once, before the task runs, so that
a value of the wrong type or range sends the job to dead at once with a reason naming
the option, and never stops a worker after the task ran (an outcome it cannot build, a
TTL Redis refuses after the ack). Unknown keys are ignored (a newer producer may add
some); a call whose opts are exactly its task's own skips this (they were checked when
the task was defined: gq.tasks.options.TaskOptions).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, NoReturn

from gq.errors import ConfigurationError, Kill
from gq.tasks.groups import check_group
from gq.tasks.options import MAX_SECONDS


def check(task: str, opts: dict[str, Any], now: Callable[[], float]) -> None:
    """``Kill`` naming the first option of ``opts`` with a wrong type or range, or
    ``Kill("expired")`` when ``expires`` has passed."""
    _check_numbers(task, opts)
    _check_names(task, opts)
    expires = opts.get("expires")
    if expires is not None and expires <= now():
        raise Kill("expired")
    _check_then(task, opts.get("then"))
    gather = opts.get("gather")
    if gather is not None:
        if type(gather) is not dict:
            _refuse(task, "gather", gather, "a map")
        _need_names(task, "gather", gather, ("queue", "group"))
        _need_count(task, "gather.n", gather.get("n"))


def _check_numbers(task: str, opts: dict[str, Any]) -> None:
    for name in ("timeout", "backoff", "result_ttl"):
        value = opts.get(name)
        if value is not None and not _seconds(value, zero=name == "result_ttl"):
            _refuse(task, name, value, f"a number of seconds > 0 and <= {MAX_SECONDS:g}")
    retries = opts.get("retries")
    if retries is not None:
        _need_count(task, "retries", retries)
    expires = opts.get("expires")
    if expires is not None and (type(expires) not in (int, float) or not math.isfinite(expires)):
        _refuse(task, "expires", expires, "a finite number (unix seconds)")


def _seconds(value: Any, zero: bool = False) -> bool:
    """Whether ``value`` is a finite number of seconds within gq's range (0 too with ``zero``:
    a result_ttl of 0 keeps nothing)."""
    if type(value) not in (int, float) or not math.isfinite(value):
        return False
    return bool((value >= 0 if zero else value > 0) and value <= MAX_SECONDS)


def _check_names(task: str, opts: dict[str, Any]) -> None:
    unique = opts.get("unique")
    if unique is not None and (type(unique) is not str or not unique):
        _refuse(task, "unique", unique, "a non-empty str")
    group = opts.get("group")
    if group is not None:
        try:
            check_group(group)
        except ConfigurationError as exc:
            raise Kill(f"task {task}: option group is {group!r}, not a group name: {exc}") from exc


def _check_then(task: str, then: Any) -> None:
    if then is None:
        return
    if type(then) is not list:
        _refuse(task, "then", then, "an array of maps")
    for index, spec in enumerate(then):
        place = f"then[{index}]"
        if type(spec) is not dict:
            _refuse(task, place, spec, "a map")
        kind = spec.get("kind")
        if kind == "step":
            _check_step(task, place, spec)
        elif kind == "member":  # (another kind: a newer producer's, not acted on here)
            _check_member(task, place, spec)


def _check_member(task: str, place: str, spec: dict[str, Any]) -> None:
    _need_names(task, place, spec, ("queue", "group"))
    _need_count(task, f"{place}.index", spec.get("index"))
    if not _seconds(spec.get("keep")):
        _refuse(task, f"{place}.keep", spec.get("keep"), "a number of seconds > 0")


#: The optional keys of a step's map: their type, and its name in a reason.
_STEP_KEYS = (("args", list, "an array"), ("kwargs", dict, "a map"), ("opts", dict, "a map"),
              ("headers", dict, "a map"), ("pass", bool, "a bool"))  # fmt: skip


def _check_step(task: str, place: str, spec: dict[str, Any]) -> None:
    _need_names(task, place, spec, ("queue", "id", "task"))
    for key, kind, what in _STEP_KEYS:
        value = spec.get(key)
        if value is not None and type(value) is not kind:
            _refuse(task, f"{place}.{key}", value, what)
    headers = spec.get("headers") or {}
    if not all(type(k) is str and type(v) is str for k, v in headers.items()):
        _refuse(task, f"{place}.headers", headers, "a map of str to str")
    if not all(isinstance(key, str) for key in spec.get("kwargs") or {}):
        _refuse(task, f"{place}.kwargs", spec["kwargs"], "a map with str keys")


def _need_names(task: str, place: str, spec: dict[str, Any], keys: tuple[str, ...]) -> None:
    for key in keys:
        value = spec.get(key)
        if type(value) is not str or not value:
            _refuse(task, f"{place}.{key}", value, "a non-empty str")


def _need_count(task: str, name: str, value: Any) -> None:
    if type(value) is not int or value < 0:
        _refuse(task, name, value, "an int >= 0")


def _refuse(task: str, name: str, value: Any, wanted: str) -> NoReturn:
    shown = repr(value)
    if len(shown) > 80:
        shown = shown[:77] + "..."
    raise Kill(f"task {task}: option {name} is {shown}, not {wanted}")
