"""``gq history``: the jobs that ended on a queue, newest first (gq/history.py), with the
filter flags of ``gq jobs``; ``--set-max`` and ``--set-ttl`` change its bounds."""

from __future__ import annotations

import argparse
import sys

from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli.bulk_cmd import add_filter_flags, filter_of
from gq.cli.common import CliError, Parser, duration, positive_int, subcommand
from gq.cli.formatting import ERROR_CHARS, shorten, table
from gq.display import json_text, local_time, relative
from gq.errors import ConfigurationError
from gq.history import HistoryEntry, HistoryPage
from gq.jobfilter import JobFilter
from gq.queue import Queue
from gq.sharded import ShardedQueue

_HEADERS = ("ID", "STATE", "TASK", "ARGS", "ATTEMPTS", "FINISHED", "DURATION", "TOTAL",
            "RESULT", "ERROR")  # fmt: skip


def history(args: argparse.Namespace, queue: Queue) -> int:
    if args.set_max is not None or args.set_ttl is not None:
        return _configure(args, queue)
    jobfilter = filter_of(args)
    page = _read(queue, jobfilter, args)
    if args.json:
        print(json_text([e.as_json() for e in page.entries]))
    elif not page.entries:
        print(f"no matching finished jobs on queue {queue.name}")
    else:
        print(_table(page.entries, queue.store.server_time(), args.shards))
    if page.cursor is not None:
        print(f"gq: more entries may match: --cursor '{page.cursor}'", file=sys.stderr)
    return EXIT_OK


def _table(entries: list[HistoryEntry], now: float, shards: bool) -> str:
    """The entries' table; with ``shards``, the shard each ended on first."""
    if not shards:
        return table(_HEADERS, [_row(e, now) for e in entries])
    return table(("SHARD", *_HEADERS), [(e.shard or "-", *_row(e, now)) for e in entries])


def _read(queue: Queue, jobfilter: JobFilter, args: argparse.Namespace) -> HistoryPage:
    try:
        page = queue.history(jobfilter, limit=args.limit, cursor=args.cursor)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    if not page.entries and not _known(queue):
        raise CliError(EXIT_FATAL, f"queue {queue.name} does not exist (no jobs, no history)")
    return page


def _known(queue: Queue) -> bool:
    plain = queue.shards if isinstance(queue, ShardedQueue) else [queue]
    kept = [key for shard in plain for key in (shard.store.keys.finished,
                                               shard.store.keys.finished_settings)]  # fmt: skip
    return queue.store.exists() or any(queue.client.exists(key) for key in kept)


def _configure(args: argparse.Namespace, queue: Queue) -> int:
    try:
        kept, ttl = queue.history_settings(args.set_max, args.set_ttl)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    state = "off" if kept == 0 or ttl == 0 else f"at most {kept} entries, for {ttl:g} s"
    print(f"history of {queue.name}: {state}")
    return EXIT_OK


def _seconds(value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value * 1000:.0f}ms" if value < 1 else f"{value:.2f}s"


def _row(e: HistoryEntry, now: float) -> tuple[str, ...]:
    return (
        e.id, e.state, e.task or "-", shorten(e.args or "", 40),
        "?" if e.attempts is None else str(e.attempts),
        f"{relative(e.finished_at, now)} ({local_time(e.finished_at)})",
        _seconds(e.duration), _seconds(e.total), "kept" if e.result_kept else "-",
        shorten(e.error or "", ERROR_CHARS),
    )  # fmt: skip


def add_parser(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    parser = subcommand(commands, "history", "jobs that ended (done, dead, cancelled), newest "
                        "first, with their durations", [conn], history)  # fmt: skip
    add_filter_flags(parser, ("finished", "done", "dead", "cancelled"))
    parser.add_argument("--limit", type=positive_int, default=50, metavar="N", help="default 50")
    parser.add_argument("--cursor", help="go on from where an earlier page stopped")
    parser.add_argument("--json", action="store_true", help="one JSON array of objects")
    parser.add_argument("--shards", action="store_true", help="a sharded queue's: the shard "
                        "each job ended on (the JSON always says it)")  # fmt: skip
    parser.add_argument("--set-max", type=_count, metavar="N",
                        help="keep at most N entries (0: no history)")  # fmt: skip
    parser.add_argument("--set-ttl", type=duration, metavar="AGE",
                        help="keep entries AGE (90, 10m, 2h, 7d; 0: no history)")  # fmt: skip


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"a count >= 0, not {text!r}")
    return value
