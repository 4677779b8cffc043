"""``gq job ID``: one job's status, task, arguments, attempts, times, and result or error
(gq.tasks.jobview), as text or ``--json``. Exit 1 when gq knows nothing of the id."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from gq.cli import EXIT_FATAL, EXIT_OK
from gq.cli.common import Parser, subcommand
from gq.display import json_text, local_time
from gq.queue import Queue
from gq.sharded import ShardedQueue
from gq.tasks.jobview import job_view

_TIMES = ("ready_at", "due", "since", "finished", "enqueued_at", "started_at", "last_started_at",
          "finished_at")  # fmt: skip


def add_parser(commands: Any, conn: Parser) -> None:
    help = "show one job: its status, arguments, attempts, times and result or error"
    parser = subcommand(commands, "job", help, [conn], show)
    parser.add_argument("id", metavar="ID", help="the job's id")
    parser.add_argument("--json", action="store_true", help="print the job as one JSON object")


def show(args: argparse.Namespace, queue: Queue) -> int:
    shard = queue.shard_of(args.id) if isinstance(queue, ShardedQueue) else queue
    view = job_view(shard.store, args.id)
    if args.json:
        sys.stdout.write(json_text(view) + "\n")
    else:
        sys.stdout.write(render(view))
    return EXIT_FATAL if view["status"] == "missing" else EXIT_OK


def render(view: dict[str, Any]) -> str:
    lines = []
    for key, value in view.items():
        if value is None:
            continue
        if key == "traceback":  # (its own lines, indented, after the others)
            value = "\n" + "\n".join("  " + line for line in str(value).splitlines())
        elif key == "progress":
            value = f"{value['fraction']:.0%} {value['note']}".rstrip()
        elif key in _TIMES:
            value = local_time(float(value))
        elif not isinstance(value, str):
            value = json_text(value)
        lines.append(f"{key + ':':<10} {value}")
    return "\n".join(lines) + "\n"
