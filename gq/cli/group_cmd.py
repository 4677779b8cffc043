"""``gq group-limit`` (SPEC section 17): show or change the limits per group of a queue,
and the rows of ``gq stats`` about its groups. The settings live in Redis, so they reach
every consumer at its next fetch, without a restart."""

from __future__ import annotations

import argparse
from typing import Any

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError, Parser, subcommand
from gq.cli.flow_cmd import _limit_changes, concurrency_limit, rate
from gq.cli.formatting import table
from gq.errors import ConfigurationError
from gq.queue import Queue

_HELP = ("show or change the limits per group (tenant, domain, API key): every group's, "
         "or one group's own with --group; with no limit option, show them and the busiest "
         "groups")  # fmt: skip


def add_parser(commands: Any, conn: Parser) -> None:
    """Register ``group-limit`` on the ``gq`` parser."""
    parser = subcommand(commands, "group-limit", _HELP, [conn], group_limit)
    parser.add_argument("--concurrency", type=concurrency_limit, metavar="N",
                        help="at most N jobs of a group held (buffered or running) at "
                        "once; a crashed worker's jobs count until recovered: at once when "
                        "it restarts under its --name, or by gq consumers --recover ID, "
                        "else at its lease's end (25 s by default)")
    parser.add_argument("--rate", type=rate, metavar="N/SECONDS",
                        help="at most N jobs of a group started per SECONDS (10/1, 100/60)")
    parser.add_argument("--group", metavar="G",
                        help="one group's own limits (they win over every group's)")
    parser.add_argument("--clear", action="store_true",
                        help="remove both limits (of every group, or of --group)")  # fmt: skip


def group_limit(args: argparse.Namespace, queue: Queue) -> int:
    changes = _limit_changes(args)  # the same flags as gq limit's
    try:
        if changes:
            queue.set_group_limits(group=args.group, **changes)
        limits = queue.group_limits(args.group)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    whose = f"group {args.group}" if args.group else "every group"
    own = " (its own; unset ones follow every group's)" if args.group else ""
    print(f"limits of {whose}{own}")
    print(f"{'rate':<13}{_rate_text(limits['rate'])}")
    print(f"{'concurrency':<13}{limits['concurrency'] or 'none'}")
    if not args.group:
        print(groups_text(queue.groups()))
    return EXIT_OK


def _rate_text(rate_limit: Any) -> str:
    if rate_limit is None:
        return "none"
    if isinstance(rate_limit, dict):
        rate_limit = (rate_limit["jobs"], rate_limit["per"])
    jobs, per = rate_limit
    return f"{jobs} jobs per {per:g}s"


def groups_text(report: dict[str, Any]) -> str:
    """The busiest groups as a table (``gq group-limit``, ``gq stats``)."""
    if not report["waiting_groups"] and not report["busiest"]:
        return "no group has jobs waiting"
    rows = [(row["group"], str(row["waiting"]), str(row["held"]),
             str(row["concurrency_limit"] or "-"), _rate_text(row["rate_limit"]),
             f"{row['held_back_seconds']:g}s" if row["held_back_seconds"] else "-")
            for row in report["busiest"]]  # fmt: skip
    head = f"{report['waiting_groups']} group(s) with jobs waiting; the busiest:"
    headers = ("GROUP", "WAITING", "HELD", "CONCURRENCY", "RATE", "HELD BACK")
    return head + "\n" + table(headers, rows)


def stats_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The "groups" row of ``gq stats``: nothing for a queue without grouped jobs."""
    groups = report.get("groups")
    if not groups or not groups["waiting_groups"]:
        return []
    top = ", ".join(f"{row['group']} ({row['waiting']} waiting, {row['held']} held)"
                    for row in groups["busiest"][:3])  # fmt: skip
    return [("groups", f"{groups['waiting_groups']} with jobs waiting; busiest: {top}")]
