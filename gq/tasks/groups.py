"""Groups: limits per tenant and fair turns between them (SPEC section 17).

A job may belong to a group (a tenant, a domain, an API key): ``task.using(group=...)``
per call, or ``@app.task(group=...)`` per task, where the group is a str (every job of
the task in that group) or a callable over the task's arguments that returns the group
(or None for no group). The group travels in the envelope's ``opts`` and decides where
the job waits: in its group's line in gq's own keys, fetched in turn with the other
groups, within the group's limits (``gq.Queue.set_group_limits``). The Redis side is
gq/store/groups.py and gq/scripts/lib/groups.lua; docs/flow-control.md tells the story.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Mapping, Sequence
from typing import Any, Callable, Union

from gq.errors import ConfigurationError
from gq.store.base import ScriptedQueue
from gq.store.groups import busiest, group_limits

#: The longest group name, in characters: a tenant id, a domain or a hashed API key fit
#: well within it, and every name is copied into several keys' fields per job.
MAX_GROUP_LENGTH = 200

#: What ``group=`` takes: a group name, or a function of the task's arguments giving one.
GroupOption = Union[str, Callable[..., Union[str, None]]]


def check_group(group: object) -> str:
    """``group`` if it is a valid group name, else ``ConfigurationError`` saying why: a
    non-empty str of at most MAX_GROUP_LENGTH characters without control characters (the
    scripts use a newline to separate a group's name from what follows it)."""
    if not isinstance(group, str):
        raise ConfigurationError(f"a group must be a str, not {type(group).__name__} {group!r}")
    if not group:
        raise ConfigurationError("a group must not be empty (leave group unset for none)")
    if len(group) > MAX_GROUP_LENGTH:
        raise ConfigurationError(
            f"a group must be at most {MAX_GROUP_LENGTH} characters, not {len(group)} "
            f"({group[:40]!r}...)"
        )
    if any(unicodedata.category(ch) == "Cc" for ch in group):
        raise ConfigurationError(f"a group must not contain control characters: {group!r}")
    return group


def check_option(group: object) -> GroupOption | None:
    """The ``group=`` option of ``@app.task``/``.using``: None, a valid name, or a callable."""
    if group is None or callable(group):
        return group
    return check_group(group)


def group_of(
    option: GroupOption | None, args: Sequence[Any], kwargs: Mapping[str, Any], task: str
) -> str | None:
    """The group of one call: the name given, or what the callable makes of the call's
    arguments (checked; its errors name the task)."""
    if option is None or isinstance(option, str):
        return option
    try:
        group = option(*args, **kwargs)
    except Exception as exc:
        raise ConfigurationError(
            f"task {task}: its group function failed on these arguments: {exc!r}"
        ) from exc
    if group is None:
        return None
    try:
        return check_group(group)
    except ConfigurationError as exc:
        raise ConfigurationError(
            f"task {task}: its group function gave a bad group: {exc}"
        ) from None


# -- limits and what the groups hold (gq.Queue's methods, gq group-limit, gq stats) --------

#: How many of the busiest groups ``gq stats`` and the dashboard show.
BUSIEST = 10


def report(queue: ScriptedQueue, count: int = BUSIEST) -> dict[str, Any]:
    """The groups part of ``gq stats --json``: how many groups have jobs waiting, every
    group's limits, and the ``count`` busiest (most waiting) with their jobs waiting and
    held, the limits in force and any RateLimited hold."""
    total, rows = busiest(queue, count)
    defaults = group_limits(queue, "")
    return {
        "waiting_groups": total,
        "limits": _limits_report(defaults.rate, defaults.concurrency),
        "busiest": [
            {"group": row.group, "waiting": row.waiting, "held": row.held,
             **_limits_report(row.rate, row.concurrency),
             "held_back_seconds": round(row.held_back, 3)}
            for row in rows
        ],  # fmt: skip
    }


def _limits_report(rate: tuple[int, float] | None, concurrency: int | None) -> dict[str, Any]:
    return {
        "rate_limit": None if rate is None else {"jobs": rate[0], "per": rate[1]},
        "concurrency_limit": concurrency,
    }
