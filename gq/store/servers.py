"""The servers gq runs on: Redis 6.2 or newer, or Valkey (which reports itself as Redis 7.2+),
and how their answers differ.

gq's scripts use commands and Lua behaviour that older servers lack (``LMOVE``/``BLMOVE``
and ``ZMSCORE`` are 6.2's), and an old server fails them one by one, deep in a worker, with
an "unknown command" that names none of that. So the first script call on a client reads
``INFO server`` once and refuses an older server with its version in the message.
"""

from __future__ import annotations

import contextlib
import re
import weakref
from typing import Any

import redis

from gq.errors import ConfigurationError

OLDEST_SUPPORTED = (6, 2)
_LEADING_DIGITS = re.compile(r"\d+")
# Redis 6.2 wraps the error of a command that a script called in one of its own: "Error
# running script (call to f_<sha>): @user_script:1: @user_script: 1: -OOM command not
# allowed...". Redis 7.0+ and Valkey answer the command's error itself, its code first.
_WRAPPED_IN_SCRIPT = re.compile(r"@user_script: ?\d+: -([A-Z]+) ")

# Clients whose server passed the check: one INFO per client, however many queues share it.
_checked: weakref.WeakKeyDictionary[Any, bool] = weakref.WeakKeyDictionary()


def version_tuple(text: str) -> tuple[int, ...]:
    """``"6.2.5"`` as ``(6, 2, 5)``; the numeric prefix of each part (``"7.4.0-v1"``)."""
    return tuple(int(match.group()) if (match := _LEADING_DIGITS.match(part)) else 0
                 for part in text.split("."))  # fmt: skip


def error_code(exc: BaseException) -> str:
    """The code of a Redis error reply ("OOM", "READONLY"...), also when Redis 6.2 wrapped
    it in a script's error; "" when it has none (redis-py drops the code of the replies it
    maps to an exception type of their own: check the type first)."""
    text = str(exc)
    wrapped = _WRAPPED_IN_SCRIPT.search(text)
    if wrapped:
        return wrapped.group(1)
    first = text.split(" ", 1)[0]
    return first if first.isalpha() and first.isupper() else ""


def refusal(info: dict[Any, Any]) -> str | None:
    """Why the server that answered ``INFO server`` with ``info`` cannot run gq, or None."""
    version = str(info.get("redis_version", ""))
    if not version or version_tuple(version) >= OLDEST_SUPPORTED:
        return None  # a server that names no version (a proxy) is given the benefit
    return (
        f"Redis {version} is older than Redis 6.2, the oldest server gq supports "
        "(gq's scripts need its LMOVE, BLMOVE and ZMSCORE): upgrade to Redis 6.2 or newer, "
        "or Valkey"
    )


def _cached(client: Any) -> bool:
    try:
        return _checked.get(client, False)
    except TypeError:  # a client that cannot be weakly referenced: checked by each queue
        return False


def _remember(client: Any) -> None:
    with contextlib.suppress(TypeError):
        _checked[client] = True


def _judge(client: Any, info: Any) -> None:
    # A cluster client may answer per node ({node: info}); any node's refusal counts.
    answers = info.values() if info and all(isinstance(v, dict) for v in info.values()) else [info]
    for answer in answers:
        reason = refusal(answer)
        if reason:
            raise ConfigurationError(reason)
    _remember(client)


def require_supported(client: Any) -> None:
    """Raise ConfigurationError if ``client``'s server is older than Redis 6.2."""
    if _cached(client):
        return
    try:
        info = client.info("server")
    except redis.ResponseError:  # INFO denied by an ACL: gq cannot tell, and does not block
        _remember(client)
        return
    _judge(client, info)


async def require_supported_async(client: Any) -> None:
    """``require_supported`` for a ``redis.asyncio`` client."""
    if _cached(client):
        return
    try:
        info = await client.info("server")
    except redis.ResponseError:
        _remember(client)
        return
    _judge(client, info)
