"""``gq COMMAND``: the operator's tool. Imported by ``gq.cli.admin.main`` once gevent has
patched (``gq demo`` runs a consumer in this process)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Callable

import redis

import gq
from gq.cli import (
    EXIT_FATAL,
    EXIT_USAGE,
    bulk_cmd,
    dashboard_cmd,
    demo,
    events_cmd,
    flow_cmd,
    group_cmd,
    history_cmd,
    job_cmd,
    jobs_cmd,
    logs,
    metrics_cmd,
    periodic_cmd,
    shards_cmd,
    status,
)
from gq.cli.app_flag import add_app_flag, apply_app
from gq.cli.common import (
    CliError,
    Parser,
    add_connection_flags,
    add_consumer_timeout_flag,
    duration,
    open_queue,
    positive_int,
    require_queue,
    subcommand,
    unix_time,
)
from gq.cli.logs import scrub, url_secrets
from gq.errors import ConfigurationError
from gq.queue import Queue

DESCRIPTION = """\
The gq operator's tool: look at a queue, enqueue from the shell, find jobs by filter
(gq jobs), purge, move, retry or delete them in bulk, list consumers, or try gq out
with `gq demo`.
Every command but demo takes --url (or $GQ_REDIS_URL) and --queue (or $GQ_QUEUE), or
--app module:app (or $GQ_APP) to use a gq.App's URL and queues.
"""

EXIT_CODES = """\
exit codes:
  0  done
  1  the operation failed (an id that was not there, a duplicate id, a Redis error)
  2  bad usage
  3  Redis unreachable or refusing the credentials
"""

Command = Callable[[argparse.Namespace, Queue], int]


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gq",
        description=DESCRIPTION,
        epilog=EXIT_CODES,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"gq {gq.__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    conn = Parser(add_help=False, allow_abbrev=False)
    add_connection_flags(conn)
    add_app_flag(conn)
    _add_stats(commands, conn)
    _add_enqueue(commands, conn)
    _add_job_set(
        commands, conn, "dead", jobs_cmd.dead_list, jobs_cmd.dead_delete, retry=jobs_cmd.dead_retry
    )
    _add_job_set(commands, conn, "scheduled", jobs_cmd.scheduled_list, jobs_cmd.scheduled_delete)
    bulk_cmd.add_parsers(commands, conn)
    history_cmd.add_parser(commands, conn)
    _add_consumers(commands, conn)
    flow_cmd.add_parsers(commands, conn)
    shards_cmd.add_parser(commands, conn)
    group_cmd.add_parser(commands, conn)
    periodic_cmd.add_parser(commands, conn)
    job_cmd.add_parser(commands, conn)
    events_cmd.add_parser(commands, conn)
    demo.add_parser(commands)
    dashboard_cmd.add_parser(commands)
    metrics_cmd.add_parser(commands)
    return parser


def _add_report(
    commands: argparse._SubParsersAction[Parser],
    conn: Parser,
    name: str,
    help: str,
    func: Command,
    json_help: str,
) -> None:
    """A command that reports on a queue and its consumers (``stats``, ``consumers``)."""
    parser = subcommand(commands, name, help, [conn], func)
    parser.add_argument("--json", action="store_true", help=json_help)
    add_consumer_timeout_flag(parser, explain=True)


def _add_stats(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    help = "count the jobs of a queue in each state, and its consumers"
    _add_report(commands, conn, "stats", help, status.stats, "one JSON object")
    commands.choices["stats"].add_argument(
        "--shards", action="store_true",
        help="a sharded queue's shards too, one line each (the sum is shown without it)")


def _add_consumers(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    help = "list the consumers of a queue: last heartbeat, jobs in flight, alive or dead"
    _add_report(commands, conn, "consumers", help, status.consumers, "one JSON object a line")
    parser = commands.choices["consumers"]
    parser.add_argument(
        "--recover",
        metavar="ID",
        help="hand back now the jobs in flight of consumer ID, known to be dead (a "
        "custodian would at the end of its lease); a consumer whose heartbeats are on "
        "time is refused unless --force",
    )
    parser.add_argument(
        "--force", action="store_true", help="with --recover: even if it looks alive"
    )


def _add_enqueue(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    parser = subcommand(
        commands,
        "enqueue",
        "add jobs: one per DATA argument, or else one per "
        "non-empty line of stdin; prints their ids",
        [conn],
        jobs_cmd.enqueue,
    )
    parser.add_argument("data", nargs="*", metavar="DATA", help="the job's data (text)")
    parser.add_argument("--id", help="the job's id (one job only); default a new UUID4")
    _add_task_flags(parser)
    when = parser.add_mutually_exclusive_group()
    when.add_argument(
        "--at",
        type=unix_time,
        metavar="TIME",
        help="run at TIME: unix seconds or ISO 8601 (naive is local time)",
    )
    when.add_argument(
        "--after",
        type=duration,
        metavar="DELAY",
        help="run after DELAY: seconds, or 30s, 5m, 2h, 7d",
    )


def _add_task_flags(parser: Parser) -> None:
    """``--task NAME --args JSON --kwargs JSON``: one task job, built from its name alone
    (the task's code is not imported here: its options are the worker's defaults)."""
    parser.add_argument("--task", metavar="NAME", help="enqueue one job of task NAME")
    parser.add_argument(
        "--args",
        type=jobs_cmd.json_array,
        metavar="JSON",
        help="the task's positional arguments, a JSON array (with --task)",
    )
    parser.add_argument(
        "--kwargs",
        type=jobs_cmd.json_object,
        metavar="JSON",
        help="the task's keyword arguments, a JSON object (with --task)",
    )


def _add_job_set(
    commands: argparse._SubParsersAction[Parser],
    conn: Parser,
    state: str,
    list_: Command,
    delete: Command,
    retry: Command | None = None,
) -> None:
    """``gq dead|scheduled ACTION``: list, delete, and for dead jobs retry."""
    help = f"list or delete {state} jobs" + (", or queue them again" if retry else
                                              ", run them now or reschedule them")  # fmt: skip
    parser = subcommand(commands, state, help, [], None)
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_job_list(actions, conn, state, list_)
    if retry is not None:
        retrier = _add_job_action(actions, conn, state, "retry", retry)
        retrier.add_argument(
            "--reset-attempts",
            action="store_true",
            help="start the attempts over at 0 (default: keep them, "
            "so a job that fails again goes back to dead)",
        )
    _add_job_action(actions, conn, state, "delete", delete)
    if state == "scheduled":
        _add_job_action(actions, conn, state, "run", jobs_cmd.scheduled_run)
        bulk_cmd.add_reschedule(actions, conn)


def _add_job_list(
    actions: argparse._SubParsersAction[Parser], conn: Parser, state: str, list_: Command
) -> None:
    order = "newest first" if state == "dead" else "soonest first"
    lister = subcommand(actions, "list", f"show {state} jobs, {order}", [conn], list_)
    lister.add_argument("--limit", type=positive_int, default=50, metavar="N", help="default 50")
    lister.add_argument("--json", action="store_true", help="one JSON object a line")


_ACTION_HELP = {
    "retry": "queue dead jobs again, at the tail of the queue",
    "run": "run scheduled jobs now: to the tail of the queue (a grouped one to its line)",
    "delete": "delete {state} jobs and free their ids",
}


def _add_job_action(
    actions: argparse._SubParsersAction[Parser], conn: Parser, state: str, verb: str, func: Command
) -> Parser:
    """An action on the given job ids, or on every job of the set."""
    action = subcommand(actions, verb, _ACTION_HELP[verb].format(state=state), [conn], func)
    action.add_argument("ids", nargs="*", metavar="ID", help="job ids")
    action.add_argument("--all", action="store_true", help=f"every {state} job")
    bulk_cmd.add_filter_flags(action, None)
    bulk_cmd.add_action_flags(action, confirm=False)
    return action


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # bad usage exits 2 here
    secrets = url_secrets(args.url)
    logs.configure("WARNING", "text", secrets)
    try:
        apply_app(args)
        secrets = secrets + url_secrets(args.url)  # the app's URL, shown in errors, hidden
        if args.command == "demo":
            return demo.run(args)
        if args.command == "dashboard":
            return dashboard_cmd.run(args)
        if args.command == "metrics":
            return metrics_cmd.run(args)
        queue = open_queue(args.url, require_queue(args.queue))
        try:
            return int(args.func(args, queue))
        finally:
            queue.client.close()
    except CliError as exc:
        print(f"gq: error: {scrub(exc.message, secrets)}", file=sys.stderr)
        return exc.code
    except ConfigurationError as exc:  # an operation the queue refuses (a sharded one's)
        print(f"gq: error: {scrub(str(exc), secrets)}", file=sys.stderr)
        return EXIT_USAGE
    except redis.RedisError as exc:  # after the start: the operation failed
        print(f"gq: error: Redis: {scrub(str(exc), secrets)}", file=sys.stderr)
        return EXIT_FATAL
    except BrokenPipeError:  # `gq dead list | head`: the reader has seen enough
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FATAL
