"""The options of a task (SPEC section 14): their checks, and how they travel.

Each option is set on ``gq.App(...)`` (the defaults), on ``@app.task(...)`` and per call
with ``.using(...)``; the later wins, and what is left unset falls back to the worker's
flags. What a worker enforces travels in the envelope's ``opts`` (gq/envelope.py), so it
holds on any worker and across a crash.
"""

from __future__ import annotations

import hashlib
import inspect
import math
from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime, timedelta
from typing import Any, Callable, Union

import msgpack

from gq.errors import ConfigurationError
from gq.tasks.groups import GroupOption, check_option

Seconds = Union[float, int, timedelta]

#: The longest duration an option takes, in seconds (about 31 years): longer ones are a
#: mistake, and some overflow what Redis or the clock can hold (a TTL of 1e300 s is
#: refused by PEXPIRE, after the ack). Envelopes are held to it too (gq/tasks/wire_opts.py).
MAX_SECONDS = 1e9

#: The options of ``@app.task`` and ``.using``, and the names ``gq.App`` takes as defaults.
NAMES = (
    "retries", "backoff", "timeout", "unique_for", "unique_key", "expires", "result_ttl", "group",
)  # fmt: skip


@dataclass(frozen=True)
class TaskOptions:
    """Options of a task or of one call; None leaves an option to the next level.

    ``retries`` (int >= 0: runs after the first failure, so at most ``retries + 1`` runs),
    ``backoff`` (s, > 0: the cap of the retry delay), ``timeout`` (s, > 0), ``unique_for``
    (s, > 0), ``unique_key`` (str), ``expires`` (s from the enqueue, > 0, or an aware
    datetime), ``result_ttl`` (s, > 0, or 0 for none; section 16), ``group`` (a group name,
    or a callable over the task's arguments that gives one; section 17, gq/groups.py)."""

    retries: int | None = None
    backoff: float | None = None
    timeout: float | None = None
    unique_for: float | None = None
    unique_key: str | None = None
    expires: float | datetime | None = None
    result_ttl: float | None = None
    group: GroupOption | None = None

    def __post_init__(self) -> None:
        for name in ("backoff", "timeout", "unique_for"):
            object.__setattr__(self, name, _seconds(name, getattr(self, name)))
        # 0 keeps no result: a task's way to override an app's default (SPEC section 16).
        if self.result_ttl not in (0, None) or isinstance(self.result_ttl, bool):
            object.__setattr__(self, "result_ttl", _seconds("result_ttl", self.result_ttl))
        _check_retries(self.retries)
        key = self.unique_key
        if key is not None and (not isinstance(key, str) or not key):
            raise ConfigurationError(f"unique_key must be a non-empty str, not {key!r}")
        check_option(self.group)
        if not isinstance(self.expires, datetime):
            object.__setattr__(self, "expires", _seconds("expires", self.expires))
        elif self.expires.utcoffset() is None:
            raise ConfigurationError("expires must be a timezone-aware datetime (or seconds)")
        if self.unique_key is not None and self.unique_for is None:
            raise ConfigurationError("unique_key needs unique_for (how long the lock holds)")

    def over(self, base: TaskOptions) -> TaskOptions:
        """These options, with ``base``'s where these leave one unset."""
        given = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(base, **{k: v for k, v in given.items() if v is not None})


def _check_retries(value: object) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
        raise ConfigurationError(f"retries must be an int >= 0, not {value!r}")


def _seconds(name: str, value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, timedelta):
        value = value.total_seconds()
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigurationError(f"{name} must be seconds or a timedelta, not {value!r}")
    if value <= 0:
        raise ConfigurationError(f"{name} must be positive, not {value!r}")
    if value > MAX_SECONDS:
        raise ConfigurationError(f"{name} must be at most {MAX_SECONDS:g} s, not {value!r}")
    return float(value)


def split(options: Mapping[str, Any]) -> TaskOptions:
    """The TaskOptions among keyword arguments; ConfigurationError naming an unknown one."""
    unknown = sorted(set(options) - set(NAMES))
    if unknown:
        raise ConfigurationError(f"unknown task option(s) {', '.join(unknown)}; known: "
                                 f"{', '.join(NAMES)}")  # fmt: skip
    return TaskOptions(**options)


def wire(options: TaskOptions, now: Callable[[], float], lock: str | None) -> dict[str, Any]:
    """The envelope's ``opts`` for one call (only what is set): what the worker enforces."""
    opts: dict[str, Any] = {}
    if options.retries is not None:
        opts["retries"] = options.retries
    if options.timeout is not None:
        opts["timeout"] = options.timeout
    if options.backoff is not None:
        opts["backoff"] = options.backoff
    if options.expires is not None:
        expires = options.expires
        opts["expires"] = expires.timestamp() if isinstance(expires, datetime) else now() + expires
    if lock is not None:
        opts["unique"] = lock
    if options.result_ttl is not None:  # (0 said: none kept, even if the task keeps some)
        opts["result_ttl"] = options.result_ttl
    if isinstance(options.group, str):  # a callable's group is the enqueuer's, per call
        opts["group"] = options.group
    return opts


def lock_name(task: str, options: TaskOptions, args: Any, kwargs: Mapping[str, Any]) -> str | None:
    """The uniqueness lock of a call: the task and its ``unique_key``, or the task and a
    digest of its arguments (keyword order does not matter); None without ``unique_for``."""
    if options.unique_for is None:
        return None
    if options.unique_key is not None:
        return f"{task}:key:{options.unique_key}"
    packed = msgpack.packb([list(args), sorted(kwargs.items())], use_bin_type=True, datetime=True)
    return f"{task}:args:{hashlib.blake2b(packed, digest_size=16).hexdigest()}"


class Binder:
    """Checks that arguments bind to a function's signature, with a fast path for the
    common shape (positional arguments only, no ``*args``), which ``Signature.bind``
    would cost several microseconds per call for."""

    __slots__ = ("signature", "_least", "_most")

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.signature = inspect.signature(fn)
        params = list(self.signature.parameters.values())
        positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        simple = all(p.kind in positional for p in params)
        empty = inspect.Parameter.empty
        # The fast path: without kwargs, any count between the required and all of them.
        self._least = sum(p.default is empty for p in params) if simple else -1
        self._most = len(params)

    def positional_names(self) -> tuple[str, ...]:
        kinds = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
        return tuple(p.name for p in self.signature.parameters.values() if p.kind in kinds)

    def bounds(self) -> tuple[int, int]:
        """(least, most): positional-only calls with a count in between bind; (0, -1)
        when no call takes the fast path."""
        return (self._least, self._most) if self._least >= 0 else (0, -1)

    def check(self, args: Any, kwargs: Mapping[str, Any]) -> str | None:
        """None when ``args`` and ``kwargs`` bind, else why not (Signature.bind's words)."""
        if not kwargs and self._least <= len(args) <= self._most and self._least >= 0:
            return None
        try:
            self.signature.bind(*args, **kwargs)
        except TypeError as exc:
            return str(exc)
        return None
