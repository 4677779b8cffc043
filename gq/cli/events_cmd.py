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
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError, Parser, positive_int, subcommand
from gq.display import local_time
from gq.queue import Queue
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
                        "(the last one seen, to resume); default: all kept, or from now "
                        "with --follow")  # fmt: skip
    parser.add_argument("--task", help="only the events of this task")
    parser.add_argument("--event", choices=job_events.EVENT_NAMES, help="only this event")
    parser.add_argument("--json", action="store_true", help="one JSON object a line")


def events(args: argparse.Namespace, queue: Queue) -> int:
    if args.maxlen is not None and not args.enable:
        raise CliError(EXIT_USAGE, "--maxlen goes with --enable")
    if args.enable or args.disable:
        return _switch(args, queue)
    if args.since is not None and not _STREAM_ID.match(args.since):
        raise CliError(EXIT_USAGE, f"--since {args.since!r} is not a stream id (e.g. "
                       "1733320000000-0, as the events print it)")  # fmt: skip
    per_shard = getattr(queue, "per_shard", None)  # (a sharded queue: gq.sharded)
    if per_shard is not None:
        raise CliError(EXIT_USAGE, per_shard("its job events"))
    kept = queue.client.exists(queue.store.keys.events)
    on = job_events.maxlen(queue.client, queue.name)
    if not kept and not on and not queue.store.exists():
        raise CliError(EXIT_FATAL, f"queue {queue.name} does not exist (no jobs, no consumers)")
    if not on:
        print(f"gq: note: events are off for {queue.name} (gq events --queue {queue.name} "
              "--enable)", file=sys.stderr)  # fmt: skip
    return _follow(args, queue) if args.follow else _list(args, queue)


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
    found = _chosen(args, queue.events(since=args.since or "0"))
    _print(args, found, header=True)
    return EXIT_OK


def _follow(args: argparse.Namespace, queue: Queue) -> int:
    # "From now on" is fixed before the ready line: what comes after it is printed.
    since = args.since or job_events.newest_id(queue.client, queue.name)
    stream = queue.events(since=since, block=FOLLOW_BLOCK)
    print(f"gq: following {queue.name}'s events (Ctrl-C to stop)", file=sys.stderr, flush=True)
    with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C ends a follow as asked: exit 0
        _print(args, _chosen(args, stream), header=True)
    return EXIT_OK


def _chosen(args: argparse.Namespace,
            found: Iterable[job_events.Event]) -> Iterator[job_events.Event]:  # fmt: skip
    for event in found:
        if (args.task is None or event.task == args.task) and (
                args.event is None or event.event == args.event):  # fmt: skip
            yield event


def _print(args: argparse.Namespace, found: Iterable[job_events.Event], *, header: bool) -> None:
    if header and not args.json:
        print(_ROW.format("ID", "TIME", "EVENT", "JOB", "TASK", "ATTEMPTS", "EXTRA"))
    for event in found:
        line = json.dumps(event.as_json(), ensure_ascii=False) if args.json else _row(event)
        print(line, flush=args.follow)


def _row(event: job_events.Event) -> str:
    extra = " ".join(f"{k}={as_text(v)}" for k, v in event.extra.items())
    attempts = "" if event.attempts is None else str(event.attempts)
    return _ROW.format(event.id, local_time(event.time), event.event, event.job_id,
                       event.task or "-", attempts, extra).rstrip()  # fmt: skip
