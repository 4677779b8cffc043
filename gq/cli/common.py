"""What both commands share: value parsers, the connection flags, and reaching Redis."""

from __future__ import annotations

import argparse
import math
import os
import re
from datetime import datetime
from typing import Any, Callable, NoReturn

import redis

from gq.cli import ENV_QUEUE, ENV_URL, EXIT_UNREACHABLE, EXIT_USAGE
from gq.cli.logs import scrub, url_secrets
from gq.errors import ConfigurationError, PermissionDeniedError
from gq.options import DEFAULT_CONSUMER_TIMEOUT
from gq.queue import Queue
from gq.store.base import ScriptedQueue, describe
from gq.store.connection import DEFAULT_URL, client_from_url, redact_url
from gq.store.shards import declared

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_DURATION = re.compile(r"^\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|m|h|d)?\s*$")
# Redis error replies that mean "these credentials are refused" (redis-py may pass them on
# as a plain ResponseError, depending on its version and the server's).
_REFUSALS = ("NOAUTH", "WRONGPASS", "NOPERM", "invalid password", "invalid username")


# A password in a URL: user info (scheme://user:PASSWORD@) or a query argument.
_URL_PASSWORD = re.compile(r"(://[^:/@\s]*:)[^@\s/]+@|(password=)[^&\s'\"]+")


def hide_passwords(text: str) -> str:
    """``text`` with the password of every URL in it replaced by ``***``."""
    return _URL_PASSWORD.sub(
        lambda m: f"{m.group(1)}***@" if m.group(1) else f"{m.group(2)}***", text
    )


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose usage errors (which quote the bad argument) hide passwords."""

    def error(self, message: str) -> NoReturn:
        super().error(hide_passwords(message))


def subcommand(commands: argparse._SubParsersAction[Any], name: str, help: str,
               parents: list[Parser], func: Callable[..., int] | None) -> Parser:  # fmt: skip
    """Subcommand ``name`` running ``func``; its description is its ``help`` as a sentence."""
    parser: Parser = commands.add_parser(name, help=help, parents=parents, allow_abbrev=False,
                                         description=help[0].upper() + help[1:] + ".")  # fmt: skip
    parser.set_defaults(func=func)
    return parser


class CliError(Exception):
    """Ends a command with ``code`` after printing ``message`` (one line, no traceback)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def duration(text: str) -> float:
    """argparse type: seconds: ``1.5``, or ``250ms``, ``30s``, ``5m``, ``2h``, ``7d``."""
    match = _DURATION.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid duration {text!r}: use seconds (1.5) or a unit (250ms, 30s, 5m, 2h, 7d)"
        )
    return float(match.group(1)) * _UNITS[match.group(2) or "s"]


def optional_duration(text: str) -> float | None:
    """argparse type: a duration, or ``none`` (0 also means no limit)."""
    return None if text.strip().lower() == "none" else duration(text)


def positive_int(text: str) -> int:
    """argparse type: an integer of at least 1."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def optional_count(text: str) -> int | None:
    """argparse type: an integer, or ``none`` (0 also means never)."""
    if text.strip().lower() == "none":
        return None
    return int(text)


def count_or_auto(text: str) -> int | str:
    """argparse type: an integer, or ``auto``."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', not {text!r}") from None


def unix_time(text: str) -> float:
    """argparse type: unix seconds, or an ISO 8601 date and time (naive means local time)."""
    try:
        value = float(text)
    except ValueError:
        pass
    else:
        if not math.isfinite(value):
            raise argparse.ArgumentTypeError(f"invalid time {text!r}")
        return value
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"invalid time {text!r}: use unix seconds or ISO 8601 (2030-01-31T09:00:00+01:00)"
        ) from None
    return when.timestamp()


def add_url_flag(parser: argparse.ArgumentParser, what: str = "Redis URL") -> None:
    parser.add_argument(
        "--url",
        default=os.environ.get(ENV_URL) or DEFAULT_URL,
        help=f"{what}; default ${ENV_URL}, else {DEFAULT_URL}",
    )


def add_connection_flags(parser: argparse.ArgumentParser, *, several_queues: bool = False) -> None:
    add_url_flag(
        parser,
        "Redis URL (redis://, rediss://, unix://, valkey://, valkeys://, the +cluster and "
        "+sentinel forms, or fakeredis:// for an in-process server)",
    )
    if several_queues:
        parser.add_argument(
            "--queue",
            action="append",
            default=None,
            metavar="NAME[:WEIGHT]",
            help=f"a queue to take jobs from; repeat it for several, highest priority "
            f"first, or give each a weight (critical:6) to draw by weight; default ${ENV_QUEUE}",
        )
        return
    parser.add_argument(
        "--queue",
        default=os.environ.get(ENV_QUEUE) or None,
        help=f"queue name; default ${ENV_QUEUE}",
    )


def add_consumer_timeout_flag(parser: argparse.ArgumentParser, *, explain: bool = False) -> None:
    """``--consumer-timeout``; ``explain``: say in the help what the default is made of."""
    parts = " (curlyq's heartbeat interval + consumer timeout)" if explain else ""
    parser.add_argument(
        "--consumer-timeout",
        type=duration,
        default=DEFAULT_CONSUMER_TIMEOUT,
        metavar="SECONDS",
        help="a consumer that states no lease (a curlyq consumer) is dead once silent this "
        f"long{parts}; a gq worker by the lease it states (default 60 + 60)",
    )


def queue_specs(given: list[str] | None) -> str | list[str] | dict[str, int]:
    """``--queue`` given once or more (or $GQ_QUEUE) as gq.Consumer takes it: one name, names
    in priority order, or name -> weight when any has ``:WEIGHT``."""
    names = given or [require_queue(os.environ.get(ENV_QUEUE) or None)]
    if len(names) == 1 and not _WEIGHTED.match(names[0]):
        return names[0]
    weighted = [_WEIGHTED.match(name) for name in names]
    if not any(weighted):
        return names
    return {m.group(1) if m else name: int(m.group(2)) if m else 1
            for name, m in zip(names, weighted)}  # fmt: skip


_WEIGHTED = re.compile(r"^(.+):([0-9]+)$")


def require_queue(queue: str | None) -> str:
    if not queue:
        raise CliError(EXIT_USAGE, f"no queue: pass --queue NAME or set {ENV_QUEUE}")
    return queue


def is_refusal(exc: BaseException) -> bool:
    """Whether ``exc`` means Redis could not be reached or refused the credentials."""
    if isinstance(exc, (redis.ConnectionError, redis.TimeoutError, OSError)):
        return True
    if isinstance(exc, (redis.exceptions.NoPermissionError, PermissionDeniedError)):
        return True  # the former's text lacks "NOPERM"
    return isinstance(exc, redis.ResponseError) and any(
        marker.lower() in str(exc).lower() for marker in _REFUSALS
    )


def cannot_use(url: str, problem: object) -> CliError:
    """Exit 3: Redis at ``url`` cannot be used, for ``problem`` (its password hidden)."""
    message = f"cannot use Redis at {redact_url(url)}: {problem}"
    return CliError(EXIT_UNREACHABLE, scrub(message, url_secrets(url)))


def open_queue(url: str, queue: str, **pool_options: Any) -> Queue:
    """A gq.Queue on ``url`` that has answered a PING (exit 3 if not, 2 for a bad URL)."""
    rq = queue_on(url, queue, **pool_options)
    problem = unreachable(rq.store, url)
    if problem is not None:
        rq.client.close()
        raise cannot_use(url, problem)
    return rq


def _shards_of(client: Any, queue: str) -> int | None:
    """A sharded queue's count (its descriptor in Redis: gq/store/shards.py), None for a
    plain one, or where Redis cannot be read yet: the caller's PING says why (the demo
    then falls back to its embedded server)."""
    try:
        return declared(client, [queue]).get(queue)
    except (redis.ConnectionError, redis.TimeoutError):
        return None


def queue_on(url: str, queue: str, **pool_options: Any) -> Queue:
    """A gq.Queue on ``url``, not yet connected (exit 2 for a bad URL)."""
    pool_options.setdefault("socket_connect_timeout", 5.0)
    pool_options.setdefault("socket_timeout", 10.0)
    try:
        client = client_from_url(url, **pool_options)
        return Queue(queue, client=client, shards=_shards_of(client, queue))
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    except redis.RedisError as exc:  # a cluster client connects as it is built
        raise cannot_use(url, exc) from None


def unreachable(rq: ScriptedQueue, url: str) -> str | None:
    """Why Redis cannot be used (unreachable, refusing the credentials), or None if it can."""
    try:
        rq.ping()
    except Exception as exc:
        # A ResponseError of any kind (a key of the queue holding the wrong type) means
        # Redis answered and will answer the same: a clear exit, not a traceback.
        if not (is_refusal(exc) or isinstance(exc, redis.ResponseError)):
            raise
        return scrub(describe(exc), url_secrets(url))
    return None
