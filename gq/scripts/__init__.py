"""The Lua scripts of gq, one file per operation, loaded as package data.

A script may start with ``-- include: a, b`` to have ``lib/a.lua`` and ``lib/b.lua``
prepended: Redis scripts cannot import each other, and the helpers (server time, chunked
variadic calls, dead-set trimming) must not be written twice.
"""

from __future__ import annotations

import re
from functools import cache
from importlib import resources

# Every operation gq runs; the contract test checks this matches the .lua files.
NAMES = (
    "push",
    "push_unique",
    "schedule",
    "register",
    "deregister",
    "fetch",
    "ack",
    "ack_results",
    "retry",
    "kill",
    "enqueue_due",
    "requeue",
    "expired_consumers",
    "recover",
    "backlog",
    "retry_dead",
    "run_scheduled",
    "delete_jobs",
    "tidy",
    "periodic",
    "gauges",
    "grouped",
    "cancel",
    "push_group",
    "group_limits",
    "dead_outcome",
    "purge",
    "move",
    "move_in",
    "reschedule",
    "progress",
    "history_page",
)

_INCLUDE = re.compile(r"^-- include: *(.+)$", re.MULTILINE)


def _read(relative: str) -> str:
    return resources.files(__name__).joinpath(relative).read_text(encoding="utf-8")


@cache
def source(name: str) -> str:
    """The full Lua source of script ``name``, with its libraries prepended."""
    if name not in NAMES:
        raise KeyError(f"no gq script named {name!r}")
    body = _read(f"{name}.lua")
    match = _INCLUDE.search(body)
    libs = [part.strip() for part in match.group(1).split(",")] if match else []
    return "\n".join([*(_read(f"lib/{lib}.lua") for lib in libs), body])


def header(name: str) -> str:
    """The comment block that documents script ``name`` (its keys, arguments and return)."""
    lines = []
    for line in _read(f"{name}.lua").splitlines():
        if not line.startswith("--"):
            break
        lines.append(line)
    return "\n".join(lines)
