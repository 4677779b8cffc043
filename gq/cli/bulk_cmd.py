"""Operating by filter from the shell (issue 34): ``gq jobs`` (search), ``gq purge``,
``gq move``, ``gq scheduled reschedule`` and the filter flags of ``gq dead retry|delete``.
Each command is a ``gq.Queue`` method (gq/bulk.py, gq/jobsearch.py): the same filter
means the same jobs in the library, here and in the dashboard."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any

from gq.bulk import BulkResult
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli.app_flag import app_tasks
from gq.cli.common import CliError, Parser, duration, positive_int, subcommand, unix_time
from gq.cli.formatting import ERROR_CHARS, shorten, table
from gq.display import json_text, local_time, relative
from gq.errors import ConfigurationError
from gq.jobfilter import STATES, JobFilter
from gq.jobsearch import FoundJob
from gq.queue import Queue

FILTER_HELP = """\
filters (each narrows; ages count from the enqueue, a dead job's from its death):
  gq jobs --queue Q --state dead --task app.send --args tenant=acme --error timeout
  gq purge --queue Q --task app.broken --older-than 1h --dry-run
"""


def add_filter_flags(parser: argparse.ArgumentParser, states: tuple[str, ...] | None) -> None:
    """The filter flags every command on many jobs shares (``states`` None: no --state)."""
    group = parser.add_argument_group("filters")
    if states is not None:
        group.add_argument("--state", action="append", default=[], metavar="STATE",
                           help=f"one of {', '.join(states)} (repeat, or a comma list); "
                           "default all of them")  # fmt: skip
    group.add_argument("--task", help="the task's name (* and ? match as in a shell)")
    group.add_argument("--group", help="a grouped job's group")
    group.add_argument("--args", action="append", default=[], metavar="KEY=VALUE",
                       help="a keyword argument (or a position: 0=VALUE) equals VALUE "
                       "(JSON or text); repeatable")  # fmt: skip
    group.add_argument("--args-contains", metavar="TEXT",
                       help="TEXT in the arguments (a byte job: in its data)")  # fmt: skip
    group.add_argument("--error", metavar="TEXT", help="TEXT in the last error (any case)")
    group.add_argument("--id-prefix", metavar="PREFIX", help="ids starting with PREFIX")
    group.add_argument("--older-than", metavar="AGE", help="older than AGE (90, 10m, 2h, 7d)")
    group.add_argument("--newer-than", metavar="AGE", help="at most AGE old")


def add_action_flags(parser: argparse.ArgumentParser, *, confirm: bool = True) -> None:
    parser.add_argument("--dry-run", action="store_true", help="count the jobs, change none")
    if confirm:
        parser.add_argument("--yes", action="store_true",
                            help="no question when no filter narrows it (every job)")  # fmt: skip
    parser.add_argument("--json", action="store_true", help="the outcome as one JSON object")


def filter_of(args: argparse.Namespace) -> JobFilter:
    """The filter the flags describe (knowing the tasks of ``--app``: ``--args
    tenant=acme`` matches a call by position too); a bad one exits 2 with its reason."""
    try:
        jobfilter = JobFilter.parse(
            state=getattr(args, "state", []), args=args.args, older_than=args.older_than,
            newer_than=args.newer_than, task=args.task, group=args.group,
            args_contains=args.args_contains, error=args.error, id_prefix=args.id_prefix,
        )  # fmt: skip
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    tasks = app_tasks(args)
    return jobfilter if tasks is None or not jobfilter.args else jobfilter.naming(tasks)


def filtered(args: argparse.Namespace) -> bool:
    """Whether any filter flag was given (``gq dead retry|delete``: ids, --all or filters)."""
    return filter_of(args).narrows()


# -- gq jobs ------------------------------------------------------------------------------


def jobs(args: argparse.Namespace, queue: Queue) -> int:
    try:
        page = queue.jobs(filter_of(args), limit=args.limit, cursor=args.cursor)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    if args.json:
        print(json_text([job.as_json() for job in page.jobs]))
    elif not page.jobs:
        print(f"no matching jobs on queue {queue.name}")
    else:
        now = queue.store.server_time()
        print(table(_HEADERS, [_row(job, now) for job in page.jobs]))
    if page.cursor is not None:
        print(f"gq: more jobs may match: --cursor '{page.cursor}'", file=sys.stderr)
    return EXIT_OK


_HEADERS = ("ID", "STATE", "TASK", "ARGS", "ATTEMPT", "ENQUEUED", "DUE/DIED", "ERROR")


def _row(job: FoundJob, now: float) -> tuple[str, ...]:
    when = job.due_at if job.due_at is not None else job.died_at
    return (
        job.id,
        job.state if job.group is None else f"{job.state} ({shorten(job.group, 20)})",
        job.task or "-",
        shorten(job.args, 50),
        "?" if job.attempt is None else str(job.attempt),
        "-" if job.enqueued_at is None else relative(job.enqueued_at, now),
        "-" if when is None else f"{relative(when, now)} ({local_time(when)})",
        shorten(job.error or "", ERROR_CHARS),
    )


# -- gq purge, gq move, gq scheduled reschedule ---------------------------------------------


def purge(args: argparse.Namespace, queue: Queue) -> int:
    jobfilter = _existing(queue, filter_of(args))
    everything = _confirmed(args, queue, jobfilter, "purge every ready and scheduled job")
    result = _guarded(lambda: queue.purge(jobfilter, dry_run=args.dry_run, everything=everything))
    return _report(args, result, "purge", "purged")


def move(args: argparse.Namespace, queue: Queue) -> int:
    if args.to == queue.name:
        raise CliError(EXIT_USAGE, f"cannot move jobs of {queue.name} to the same queue")
    jobfilter = _existing(queue, filter_of(args))
    _confirmed(args, queue, jobfilter, f"move every ready, scheduled and dead job to {args.to}")
    result = _guarded(lambda: queue.move(jobfilter, to=args.to, dry_run=args.dry_run))
    code = _report(args, result, "move", "moved")
    if result.conflicts:
        print(f"gq: {result.conflicts} job(s) left: {args.to} holds other jobs with their ids",
              file=sys.stderr)  # fmt: skip
        return EXIT_FATAL
    return code


def reschedule(args: argparse.Namespace, queue: Queue) -> int:
    if (args.at is None) == (getattr(args, "in") is None):
        raise CliError(EXIT_USAGE, "give --at TIME or --in DELAY")
    jobfilter = filter_of(args)
    _confirmed(args, queue, jobfilter, "reschedule every scheduled job")
    result = _guarded(lambda: queue.reschedule(jobfilter, at=args.at, after=getattr(args, "in"),
                                               dry_run=args.dry_run))  # fmt: skip
    return _report(args, result, "reschedule", "rescheduled")


def by_filter(args: argparse.Namespace, queue: Queue, state: str, verb: str) -> int:
    """``gq dead retry|delete`` and ``gq scheduled run|delete`` with filter flags."""
    jobfilter = filter_of(args)
    if verb == "run":
        result = _guarded(lambda: queue.run_scheduled(jobfilter, dry_run=args.dry_run))
        return _report(args, result, "run", "queued")
    if state == "scheduled":
        scheduled = dataclasses.replace(jobfilter, states=("scheduled",))
        result = _guarded(lambda: queue.purge(scheduled, dry_run=args.dry_run))
        return _report(args, result, "delete", "deleted")
    if verb == "retry":
        result = _guarded(lambda: queue.retry_dead(
            jobfilter, reset_attempts=args.reset_attempts, dry_run=args.dry_run))  # fmt: skip
        return _report(args, result, "retry", "retried")
    result = _guarded(lambda: queue.delete_dead(jobfilter, dry_run=args.dry_run))
    return _report(args, result, "delete", "deleted")


def _guarded(action: Any) -> BulkResult:
    try:
        return action()  # type: ignore[no-any-return]
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None


def _existing(queue: Queue, jobfilter: JobFilter) -> JobFilter:
    if not queue.store.exists():
        raise CliError(EXIT_FATAL, f"queue {queue.name} does not exist (no jobs, no consumers)")
    return jobfilter


def _confirmed(args: argparse.Namespace, queue: Queue, jobfilter: JobFilter, what: str) -> bool:
    """Whether "everything" was agreed to: a narrowing filter, a dry run, --yes, or a yes
    typed at the terminal; else exit 2."""
    if jobfilter.narrows() or args.dry_run or args.yes:
        return True
    if not sys.stdin.isatty():
        raise CliError(EXIT_USAGE, f"no filter narrows this: it would {what} of {queue.name}; "
                       "add a filter, --dry-run to count, or --yes")  # fmt: skip
    answer = input(f"{what[0].upper()}{what[1:]} of {queue.name}? Type yes: ")
    if answer.strip().lower() != "yes":
        raise CliError(EXIT_USAGE, "not confirmed: nothing changed")
    return True


def _report(args: argparse.Namespace, result: BulkResult, verb: str, done: str) -> int:
    if args.json:
        print(json.dumps({"matched": result.matched, "done": result.done,
                          "conflicts": result.conflicts, "dry_run": args.dry_run}))  # fmt: skip
    elif args.dry_run:
        print(f"would {verb} {result.matched} job(s) (dry run: nothing changed)")
    else:
        print(f"{done} {result.done} job(s)")
    return EXIT_OK


# -- the parsers ---------------------------------------------------------------------------


def add_parsers(commands: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    parser = subcommand(commands, "jobs", "find jobs by state, task, group, arguments, "
                        "error or age", [conn], jobs)  # fmt: skip
    add_filter_flags(parser, STATES)
    parser.add_argument("--limit", type=positive_int, default=50, metavar="N", help="default 50")
    parser.add_argument("--cursor", help="go on from where an earlier search stopped")
    parser.add_argument("--json", action="store_true", help="one JSON array of objects")
    parser = subcommand(commands, "purge", "remove ready and scheduled jobs matching a filter, "
                        "with their bookkeeping", [conn], purge)  # fmt: skip
    add_filter_flags(parser, ("ready", "scheduled"))
    add_action_flags(parser)
    parser = subcommand(commands, "move", "move ready, scheduled and dead jobs matching a "
                        "filter to another queue, in their state", [conn], move)  # fmt: skip
    parser.add_argument("--to", required=True, metavar="QUEUE", help="the target queue")
    add_filter_flags(parser, ("ready", "scheduled", "dead"))
    add_action_flags(parser)


def add_reschedule(actions: argparse._SubParsersAction[Parser], conn: Parser) -> None:
    """``gq scheduled reschedule --at TIME | --in DELAY [filters]``."""
    parser = subcommand(actions, "reschedule", "give scheduled jobs matching a filter a new "
                        "due time", [conn], reschedule)  # fmt: skip
    parser.add_argument("--at", type=unix_time, metavar="TIME",
                        help="unix seconds or ISO 8601 (naive is local time)")  # fmt: skip
    parser.add_argument("--in", type=duration, metavar="DELAY", help="from now: 30s, 10m, 2h")
    add_filter_flags(parser, None)
    add_action_flags(parser)
