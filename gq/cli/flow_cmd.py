"""Flow control from the shell (SPEC section 9): ``gq pause``, ``gq resume``, ``gq limit``
and ``gq cancel``. The settings live in Redis, so they reach every consumer at its next
fetch, without a restart."""

from __future__ import annotations

import argparse
import math
import re
import sys
from typing import Any

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError, Parser, duration, subcommand
from gq.queue import MAX_RATE_JOBS, MAX_RATE_PERIOD, Queue, flow_report
from gq.sharded import ShardedQueue

_RATE = re.compile(r"^\s*([0-9]+)\s*/\s*(\S+)\s*$")
_NO_JOBS = "(to stop every consumer, pause the queue: gq pause)"


# -- value parsers -------------------------------------------------------------------------


def rate(text: str) -> tuple[int, float]:
    """argparse type: ``JOBS/SECONDS`` (``20/1``, ``100/60``, ``5/0.5``, ``1000/1d``)."""
    match = _RATE.match(text)
    if match is None:
        raise argparse.ArgumentTypeError(
            f"invalid rate {text!r}: use JOBS/SECONDS, such as 20/1, 100/60 or 5/0.5"
        )
    jobs = int(match.group(1))
    if jobs < 1:
        raise argparse.ArgumentTypeError(f"a rate needs at least 1 job per period {_NO_JOBS}")
    if jobs > MAX_RATE_JOBS:
        raise argparse.ArgumentTypeError(f"a rate allows at most {MAX_RATE_JOBS} jobs per period")
    seconds = _period(match.group(2))
    return jobs, seconds


def _period(text: str) -> float:
    try:
        seconds = duration(text)
    except argparse.ArgumentTypeError:
        seconds = math.inf
    if not math.isfinite(seconds):
        raise argparse.ArgumentTypeError(
            f"invalid period {text!r}: use seconds (1, 0.5, 60) or a unit (500ms, 1m, 1h)"
        )
    # gq keeps the period in whole milliseconds (Q:flow "period").
    if round(seconds * 1000) < 1:
        raise argparse.ArgumentTypeError(f"a rate's period must be at least 1ms, not {text!r}")
    if seconds > MAX_RATE_PERIOD:
        raise argparse.ArgumentTypeError(
            f"a rate's period must be at most {MAX_RATE_PERIOD // 86400}d, not {text!r}"
        )
    return seconds


def concurrency_limit(text: str) -> int:
    """argparse type: an integer of at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid number {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value} {_NO_JOBS}")
    return value


# -- parsers -------------------------------------------------------------------------------


_HELP = {
    "pause": "stop the consumers of a queue from fetching jobs; the jobs they run or hold finish",
    "resume": "let the consumers of a paused queue fetch again",
    "limit": "show or change the queue-wide rate and concurrency limits, over all "
    "consumers; with no option, show them",
    "cancel": "cancel jobs: ready or scheduled ones are removed, running ones are "
    "interrupted (gq.JobCancelled) and not retried",
}


def add_parsers(commands: Any, conn: Parser) -> None:
    """Register pause, resume, limit and cancel on the ``gq`` parser."""
    _command(commands, conn, "pause", pause)
    _command(commands, conn, "resume", resume)
    _limit_flags(_command(commands, conn, "limit", limit))
    ids = _command(commands, conn, "cancel", cancel)
    ids.add_argument("ids", nargs="+", metavar="ID", help="job ids")


def _command(commands: Any, conn: Parser, name: str, func: Any) -> Parser:
    return subcommand(commands, name, _HELP[name], [conn], func)


def _limit_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--rate",
        type=rate,
        metavar="N/SECONDS",
        help="at most N jobs started per SECONDS over all consumers (20/1, 100/60, 5/0.5)",
    )
    parser.add_argument(
        "--concurrency",
        type=concurrency_limit,
        metavar="N",
        help="at most N jobs held (buffered or running) at once over all consumers",
    )
    parser.add_argument("--clear", action="store_true", help="remove both limits (give it alone)")


# -- commands ------------------------------------------------------------------------------


def pause(args: argparse.Namespace, queue: Queue) -> int:
    was = queue.paused
    queue.pause()
    note = " (it already was)" if was else ""
    print(f"queue {queue.name} paused{note}{_spread(queue)}: consumers fetch nothing until "
          "gq resume")  # fmt: skip
    return EXIT_OK


def resume(args: argparse.Namespace, queue: Queue) -> int:
    before = queue.store.flow()
    queue.resume()
    held = round(before.held_back, 3)
    print(f"queue {queue.name} resumed" + ("" if before.paused else " (it was not paused)")
          + _spread(queue)
          + (f"; lifted a RateLimited hold of {held:g}s more" if held else ""))  # fmt: skip
    return EXIT_OK


def _spread(queue: Queue) -> str:
    """A sharded queue's ", paused on k of N shards" read back after the writes ("")."""
    if not isinstance(queue, ShardedQueue):
        return ""
    return f", paused on {queue.paused_shards()} of {len(queue.shards)} shards"


def limit(args: argparse.Namespace, queue: Queue) -> int:
    changes = _limit_changes(args)
    if changes:
        queue.set_limits(**changes)
    print(limits_text(flow_report(queue.store.flow())))
    return EXIT_OK


def _limit_changes(args: argparse.Namespace) -> dict[str, Any]:
    """The keyword arguments of ``Queue.set_limits`` the flags ask for (none: show)."""
    given = {k: v for k, v in vars(args).items() if k in ("rate", "concurrency") and v is not None}
    if args.clear and given:
        raise CliError(EXIT_USAGE, "--clear removes both limits: give it alone")
    return {"rate": None, "concurrency": None} if args.clear else given


def limits_text(report: dict[str, Any]) -> str:
    """``gq limit``'s answer, from a ``flow_report``."""
    rows = [("rate", rate_text(report)), ("concurrency", concurrency_text(report))]
    rows += [("held back", held_back)] if (held_back := held_back_text(report)) else []
    return "\n".join(f"{name:<13}{value}" for name, value in rows)


def rate_text(report: dict[str, Any]) -> str:
    rate_limit = report["rate_limit"]
    return "none" if rate_limit is None else f"{rate_limit['jobs']} jobs per {rate_limit['per']:g}s"


def concurrency_text(report: dict[str, Any]) -> str:
    return f"{report['concurrency_limit'] or 'none'} ({report['held']} held now)"


def held_back_text(report: dict[str, Any]) -> str:
    """How much longer a handler's RateLimited holds the queue back; "" for not at all."""
    seconds = report["held_back_seconds"]
    why = "a handler raised RateLimited; gq resume lifts it"
    return f"{seconds:g}s more ({why})" if seconds > 0 else ""


def cancel(args: argparse.Namespace, queue: Queue) -> int:
    ids = list(dict.fromkeys(args.ids))  # each id once, in order
    outcomes = queue.store.cancel(ids)  # per id, which gq.Queue.cancel only counts
    print(f"removed {outcomes.count('removed')} ready or scheduled job(s)")
    print(f"cancel requested for {outcomes.count('requested')} running job(s)")
    missing = [job_id for job_id, outcome in zip(ids, outcomes) if not outcome]
    print(f"not found: {len(missing)}")
    for job_id in missing:
        print(f"gq: not found (unknown, finished or dead): {job_id}", file=sys.stderr)
    return EXIT_OK


def stats_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The "paused" and "limits" rows of ``gq stats``, from its report."""
    paused = "yes (consumers fetch nothing; gq resume to undo)" if report["paused"] else "no"
    limits = f"rate {rate_text(report)}, concurrency {concurrency_text(report)}"
    held_back = held_back_text(report)
    return [
        ("paused", paused),
        ("limits", limits + (f", held back {held_back}" if held_back else "")),
    ]
