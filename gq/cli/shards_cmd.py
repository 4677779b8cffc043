"""``gq shards``: a sharded queue's layouts, and resharding it (docs/deployment.md, "One
queue over many masters": "Resharding")."""

from __future__ import annotations

import argparse
from typing import Any

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError, Parser, subcommand
from gq.queue import Queue
from gq.sharded import ShardedQueue
from gq.store.reshard import leftovers, serving

_HELP = ("show a sharded queue's shards and any reshard under way; --reshard M starts "
         "moving it to M shards, --retire drops a drained old layout")  # fmt: skip


def add_parser(commands: Any, conn: Parser) -> None:
    parser = subcommand(commands, "shards", _HELP, [conn], shards)
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--reshard", type=int, metavar="M",
                      help="new jobs go to M shards; the old ones are served until drained")
    what.add_argument("--retire", action="store_true",
                      help="drop the old layout now if it is drained (workers do it by "
                      "themselves once it is)")  # fmt: skip


def shards(args: argparse.Namespace, queue: Queue) -> int:
    if not isinstance(queue, ShardedQueue):
        raise CliError(EXIT_USAGE, f"queue {queue.name!r} is not a sharded queue")
    if args.reshard is not None:
        queue.reshard(args.reshard)
    if args.retire and not queue.retire():
        print("the old layout is not drained yet (or the reshard is under 10 s old)")
    print(_layouts(queue))
    return EXIT_OK


def _layouts(queue: ShardedQueue) -> str:
    client = queue.shards[0].client
    found = serving(client, queue.name, len(queue.layout.queues))
    lines = [f"shards     {len(found.current.queues)}: {' '.join(found.current.queues)}"]
    if found.previous is not None:
        left = leftovers(client, found.draining)
        lines.append(f"draining   {len(found.previous.queues)} (old layout), jobs left: "
                     + ", ".join(f"{name} {n}" for name, n in left.items()))  # fmt: skip
    return "\n".join(lines)
