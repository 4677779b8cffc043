"""``gq events``: turn a queue's job events on or off, list them, or follow them as they
come (gq/events.py)."""

from __future__ import annotations

import argparse
import contextlib
import json
import re
import sys
from collections.abc import Iterable, Iterator

from gq import events as job_events
from gq import sharded_reads
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError, Parser, positive_int, subcommand
from gq.display import local_time
from gq.errors import ConfigurationError
from gq.queue import Queue
from gq.sharded import ShardedQueue
from gq.store.base import as_text

#: How long one XREAD of --follow blocks (below the CLI's socket timeout of 10 s).
FOLLOW_BLOCK = 2.0
_STREAM_ID = re.compile(r"^\d+(-\d+)?$")
_ROW = "{:<17}  {:<19}  {:<9}  {:<36}  {:<20}  {:>8}  {}"


def add_parser(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    parser = subcommand(commands, "events", "list or follow a queue's job events (enqueued, "
                        "started, retried, done, dead, cancelled, progress), or turn them on "
                        "or off", [conn], events)  # fmt: skip
    switch = parser.add_mutually_exclusive_group()
    switch.add_argument("--enable", action="store_true", help="write this queue's events from "
                        "now on (the scripts' next call sees it)")  # fmt: skip
    switch.add_argument("--disable", action="store_true", help="write no more events")
    parser.add_argument("--maxlen", type=positive_int, metavar="N", help="with --enable: keep "
                        f"about N events (default {job_events.DEFAULT_MAXLEN:,})")  # fmt: skip
    parser.add_argument("--follow", action="store_true", help="wait for new events and print "
                        "them as they come (Ctrl-C to stop)")  # fmt: skip
    parser.add_argument("--since", metavar="ID", help="only the events after this stream id "
                        "(the last one seen, to resume; a sharded queue's: the cursor it "
                        "printed); default: all kept, or from now with --follow")  # fmt: skip
    parser.add_argument("--task", help="only the events of this task")
    parser.add_argument("--event", choices=job_events.EVENT_NAMES, help="only this event")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")


def events(args: argparse.Namespace, queue: Queue) -> int:
    if args.maxlen is not None and not args.enable:
        raise CliError(EXIT_USAGE, "--maxlen goes with --enable")
    if args.enable or args.disable:
        return _switch(args, queue)
    sharded = isinstance(queue, ShardedQueue)
    if args.since is not None and not (_STREAM_ID.match(args.since) or sharded):
        raise CliError(EXIT_USAGE, f"--since {args.since!r} is not a stream id (e.g. "
                       "1733320000000-0, as the events print it)")  # fmt: skip
    _check_known(queue)
    return _follow(args, queue) if args.follow else _list(args, queue)


def _check_known(queue: Queue) -> None:
    """A queue Redis knows nothing of is refused; one whose events are off is noted."""
    plain = queue.shards if isinstance(queue, ShardedQueue) else [queue]
    kept = any(shard.client.exists(shard.store.keys.events) for shard in plain)
    on = any(job_events.maxlen(shard.client, shard.name) for shard in plain)
    if not kept and not on and not queue.store.exists():
        raise CliError(EXIT_FATAL, f"queue {queue.name} does not exist (no jobs, no consumers)")
    if not on:
        print(f"gq: note: events are off for {queue.name} (gq events --queue {queue.name} "
              "--enable)", file=sys.stderr)  # fmt: skip


def _read(queue: Queue, since: str | None, block: float | None) -> Iterator[job_events.Event]:
    try:
        return queue.events(since=since, block=block)
    except ConfigurationError as exc:  # (a sharded queue's cursor, checked at once)
        raise CliError(EXIT_USAGE, str(exc)) from None


def _switch(args: argparse.Namespace, queue: Queue) -> int:
    if args.enable:
        cap = args.maxlen or job_events.DEFAULT_MAXLEN
        queue.enable_events(maxlen=cap)
        print(f"{queue.name}: events on, about {cap:,} kept")
    else:
        queue.disable_events()
        print(f"{queue.name}: events off (those kept stay readable)")
    return EXIT_OK


def _list(args: argparse.Namespace, queue: Queue) -> int:
    seen = _Seen(args)
    shown = _print(args, seen.chosen(_read(queue, args.since or "0", None)), queue)
    if not shown and not args.json:
        print(f"no matching events on queue {queue.name}")
    seen.tell_resume()
    return EXIT_OK


def _follow(args: argparse.Namespace, queue: Queue) -> int:
    # "From now on" is fixed before the ready line: what comes after it is printed.
    if isinstance(queue, ShardedQueue):
        since = args.since or sharded_reads.newest(queue.shards)
    else:
        since = args.since or job_events.newest_id(queue.client, queue.name)
    stream, seen = _read(queue, since, FOLLOW_BLOCK), _Seen(args)
    print(f"gq: following {queue.name}'s events (Ctrl-C to stop)", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a follow as asked: exit 0
        _print(args, seen.chosen(stream), queue)
    seen.tell_resume()
    return EXIT_OK


class _Seen:
    """The events the flags choose, and the last one read (chosen or not): a sharded
    queue's events carry the cursor to resume after it, said at the end."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.last: job_events.Event | None = None

    def chosen(self, found: Iterable[job_events.Event]) -> Iterator[job_events.Event]:
        task, name = self.args.task, self.args.event
        for event in found:
            self.last = event
            if (task is None or event.task == task) and (name is None or event.event == name):
                yield event

    def tell_resume(self) -> None:
        if self.last is not None and self.last.cursor is not None:
            print(f"gq: to resume after the last event read: --since '{self.last.cursor}'",
                  file=sys.stderr)  # fmt: skip


def _row_format(queue: Queue) -> str:
    """The table's line: a sharded queue's has a SHARD column after the ID."""
    if not isinstance(queue, ShardedQueue):
        return _ROW
    width = max(len(shard.name) for shard in queue.shards)
    return _ROW.replace("}", f"}}  {{:<{width}}}", 1)


def _print(args: argparse.Namespace, found: Iterable[job_events.Event], queue: Queue) -> int:
    """Print the events ``found`` (a table's head first: at once when following, else
    before the first event); how many."""
    row, sharded = _row_format(queue), isinstance(queue, ShardedQueue)
    columns = ("ID", *(["SHARD"] if sharded else []), "TIME", "EVENT", "JOB", "TASK", "ATTEMPTS",
               "EXTRA")  # fmt: skip
    head = None if args.json else row.format(*columns).rstrip()
    if head is not None and args.follow:
        print(head, flush=True)
        head = None
    shown = 0
    for event in found:
        if head is not None:
            print(head)
            head = None
        line = json.dumps(event.as_json(), ensure_ascii=False) if args.json else _row(
            event, row, sharded)  # fmt: skip
        print(line, flush=args.follow)
        shown += 1
    return shown


def _row(event: job_events.Event, row: str, sharded: bool) -> str:
    extra = " ".join(f"{k}={as_text(v)}" for k, v in event.extra.items())
    attempts = "" if event.attempts is None else str(event.attempts)
    shard = [event.shard or ""] if sharded else []
    return row.format(event.id, *shard, local_time(event.time), event.event, event.job_id,
                      event.task or "-", attempts, extra).rstrip()  # fmt: skip
