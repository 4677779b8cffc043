"""``gq-worker``'s command line: its flags, the handler it names and the queues it
consumes. Shared by the worker (gq/cli/worker_cmd.py) and the supervisor of
``--processes`` (gq/cli/supervisor.py), which checks them once before any child starts."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any, Callable

import redis

import gq
from gq.cli import ENV_QUEUE, ENV_URL, EXIT_CODES_HELP, EXIT_USAGE, logs, metrics_cmd
from gq.cli.app_flag import ENV_APP
from gq.cli.common import (
    CliError,
    Parser,
    add_connection_flags,
    duration,
    positive_int,
    queue_specs,
)
from gq.cli.options import add_option_flags, add_retries_flag
from gq.cli.periodic_cmd import add_worker_flag
from gq.errors import ConfigurationError
from gq.store.connection import DEFAULT_URL
from gq.version import __version__
from gq.worker.identity import Name, check_name, default_name

log = logging.getLogger("gq.worker")

DESCRIPTION = """\
Run one gq consumer: take jobs from a Redis queue and call HANDLER for each, hundreds
at once on gevent. HANDLER is package.module:function (the current directory is on the
import path); it gets a gq.Job (id, data, attempt); returning means success, raising
means failure (retried with backoff, then moved to dead).

The first SIGINT or SIGTERM stops gracefully: fetching stops, buffered jobs go back to
the queue, running jobs get the grace period to finish. A second signal stops at once:
running jobs stay in flight and another worker recovers them (exit code 1).
"""


def parse(argv: list[str] | None) -> argparse.Namespace:
    """gq-worker's arguments, HANDLER resolved from ``--app`` or $GQ_APP where not given
    (bad usage exits 2 here)."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.handler and args.app:
        parser.error(f"give HANDLER or --app, not both ({args.handler} and {args.app})")
    args.handler = args.handler or args.app or os.environ.get(ENV_APP)
    if not args.handler:
        parser.error(f"HANDLER is required (package.module:function or package.module:app; "
                     f"or --app, or ${ENV_APP})")  # fmt: skip
    return args


def _add_handler_args(parser: argparse.ArgumentParser) -> None:
    """HANDLER, or ``--app`` as the operator's commands take it (``parse`` picks one)."""
    parser.add_argument(
        "handler",
        metavar="HANDLER",
        nargs="?",
        help="package.module:function to call, or package.module:app for a gq.App's tasks",
    )
    parser.add_argument(
        "--app",
        metavar="MODULE:APP",
        help=f"a gq.App to run, as the other gq commands name it: the same as giving it as "
        f"HANDLER; default ${ENV_APP} when no HANDLER is given",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gq-worker",
        usage="%(prog)s HANDLER [options]",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    _add_handler_args(parser)
    add_connection_flags(parser, several_queues=True)
    _add_name_flag(parser)
    parser.add_argument(
        "--burst",
        action="store_true",
        help="exit (code 0) once nothing is ready, nothing is due and nothing "
        "is in flight for this worker",
    )
    _add_logging_flags(parser)
    add_worker_flag(parser)
    metrics_cmd.add_worker_flags(parser)
    parser.add_argument("--version", action="version", version=f"gq-worker {__version__}")
    add_retries_flag(parser)
    add_option_flags(parser)
    add_process_flags(parser)
    return parser


def _add_name_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--name",
        help="who this worker is across restarts: restarted under its name, it takes its "
        "crashed predecessor's jobs back at once, not after the lease; a second live worker "
        "with the name refuses to start. With --processes, each child is NAME-<index>. "
        "Default: the host's name and the process's index (host-0, host-1...; the next "
        "free one)",
    )


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """What the worker logs, how, and how often it logs its counts."""
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=logs.LEVELS, help="default INFO"
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=logs.FORMATS,
        help="text, or json (one object per line); default text",
    )
    parser.add_argument(
        "--stats-interval",
        type=duration,
        default=60.0,
        metavar="SECONDS",
        help="log done/failed/retried/killed and the rate this often; 0 turns it off; default 60",
    )


PROCESSES_HELP = """\
Run several worker processes under one supervisor (for handlers that need more
than one core). Each child is a full consumer with its own id and name
(NAME-<index>, or the host's name and its index). The first signal
stops every child gracefully, a second at once. The supervisor exits 0 when every
child stopped cleanly, 2 or 3 as below before any child starts, 1 otherwise
(including children that keep dying at start)."""


def add_process_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("processes", PROCESSES_HELP)
    group.add_argument(
        "--processes",
        type=positive_int,
        metavar="N",
        help="start N worker processes and restart any that dies; without it, "
        "gq-worker runs one consumer in this process",
    )
    _add_recycling_flags(group)
    # Set by the supervisor on its children's command lines only.
    parser.add_argument("--supervisor-pid", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-slot", type=int, default=0, help=argparse.SUPPRESS)


def _add_recycling_flags(group: argparse._ArgumentGroup) -> None:
    """When a child is replaced by a fresh one (leaky handlers)."""
    group.add_argument(
        "--max-jobs-per-child",
        type=positive_int,
        metavar="N",
        help="replace a child gracefully after it finished about N jobs (plus up to 10%% "
        "jitter); needs --processes",
    )
    group.add_argument(
        "--max-memory-per-child",
        type=positive_int,
        metavar="MB",
        help="replace a child gracefully once its resident memory passes MB mebibytes "
        "(checked every 2 s); needs --processes",
    )


def worker_queues(args: argparse.Namespace, handler: Any) -> str | list[str] | dict[str, int]:
    """The queues to consume: ``--queue`` (or $GQ_QUEUE) as given; for a ``gq.App``
    without them, every queue its tasks name, with equal weights. An app with no Redis
    of its own enqueues (from its tasks) on the worker's ``--url``; without ``--url``
    (or $GQ_URL) the worker uses the app's."""
    if not isinstance(handler, gq.App):
        return queue_specs(args.queue)
    if handler.connected() and args.url == DEFAULT_URL and not os.environ.get(ENV_URL):
        url, client, _ = handler.connection()
        if url is None:
            raise CliError(EXIT_USAGE, "an app built with client= needs the worker's --url")
        args.url = url
    elif not handler.connected():
        handler.connect(args.url)
    if args.queue or os.environ.get(ENV_QUEUE):
        return queue_specs(args.queue)
    names = handler.queues
    return names[0] if len(names) == 1 else dict.fromkeys(names, 1)


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (attributes may be dotted); CliError(2) if not."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(EXIT_USAGE, f"HANDLER must be package.module:function, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would, and as rq and celery do
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        log.debug("importing %s failed", module_name, exc_info=True)
        raise CliError(
            EXIT_USAGE, f"cannot import handler module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CliError(
                EXIT_USAGE,
                f"cannot find handler {spec!r}: {module_name}.{attr} has no attribute {part!r}",
            )
        target = getattr(target, part)
    if not callable(target):
        raise CliError(
            EXIT_USAGE, f"handler {spec!r} is not callable (it is {type(target).__name__})"
        )
    return target  # type: ignore[no-any-return]


def worker_name(args: argparse.Namespace) -> Name:
    """The name ``--name`` gives (NAME-<index> for a child of ``--processes``), or the
    default one: the host's name and the child's index, moving on while taken."""
    if args.name is None:
        return default_name(args.child_slot)
    try:
        base = check_name(args.name)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    return Name(base, args.child_slot if args.supervisor_pid is not None else None)


def worker_shards(
    url: str, queue: str | list[str] | dict[str, int], handler: Any
) -> dict[str, int]:
    """The sharded queues among those the worker serves, with their counts: the app's
    (``gq.App(shards=...)``), else the descriptors Redis holds (gq/store/shards.py); an
    app and Redis that disagree are refused (exit 2)."""
    from gq.cli.common import cannot_use
    from gq.store.connection import client_from_url
    from gq.store.reshard import history
    from gq.store.shards import declared

    names = [queue] if isinstance(queue, str) else list(queue)
    given = dict(handler.sharding.counts) if isinstance(handler, gq.App) else {}
    try:
        client = client_from_url(url, socket_connect_timeout=5.0, socket_timeout=10.0)
        try:
            stored = declared(client, names)
            # A count the queue had before a reshard follows Redis (gq/store/reshard.py).
            had = {name: history(client, name) for name in set(given) & set(stored)}
        finally:
            client.close()
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    except redis.RedisError as exc:  # unreachable or refused: said as gq-worker says it
        raise cannot_use(url, exc) from None
    for name in had:
        if given[name] != stored[name] and given[name] not in had[name]:
            raise CliError(EXIT_USAGE, f"queue {name!r}: the app says {given[name]} shards, "
                           f"Redis says {stored[name]} (gq:sharded:{name})")  # fmt: skip
    return {**{name: n for name, n in given.items() if name in names}, **stored}
