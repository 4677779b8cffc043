"""Periodic jobs on the command line: ``gq-worker --periodic package.module:SCHEDULE`` and
``gq periodic list|delete``."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli import periodic_runtime_cmd as runtime_cmd
from gq.cli.common import CliError
from gq.cli.formatting import print_json_lines, table
from gq.display import local_time, relative
from gq.errors import ConfigurationError
from gq.periodic import Periodic, ScheduleInfo, check_schedule, describe
from gq.queue import Queue

# -- gq-worker --periodic ----------------------------------------------------------------


def add_worker_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--periodic",
        action="append",
        default=[],
        metavar="MODULE:NAME",
        help="a list of gq.Periodic (package.module:name) whose occurrences this worker "
        "enqueues, each exactly once over all workers; may be repeated",
    )


def load_schedules(specs: list[str]) -> list[Periodic]:
    """The schedules of every ``--periodic`` spec, as one list; CliError(2) if one is bad."""
    found: list[Periodic] = []
    for spec in specs:
        found.extend(_checked(spec, _import(spec)))
    try:
        return check_schedule(found)  # distinct names across every spec
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, f"--periodic: {exc}") from None


def _import(spec: str) -> Any:
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(EXIT_USAGE, f"--periodic must be package.module:name, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as for HANDLER
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - any import failure, bad rules included, is a usage error
        raise CliError(
            EXIT_USAGE, f"--periodic {spec}: cannot import {module_name!r}: {exc}"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CliError(EXIT_USAGE, f"--periodic {spec}: {module_name} has no {attr!r}")
        target = getattr(target, part)
    return target


def _checked(spec: str, schedule: Any) -> list[Periodic]:
    try:
        return check_schedule(schedule)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, f"--periodic {spec}: {exc}") from None


# -- gq periodic list|delete -------------------------------------------------------------


def add_parser(commands: Any, conn: argparse.ArgumentParser) -> None:
    parser = commands.add_parser(
        "periodic",
        help="list or forget the periodic schedules of a queue",
        description="List or forget the periodic schedules of a queue.",
        allow_abbrev=False,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    _add_list(actions, conn)
    _add_delete(actions, conn)
    runtime_cmd.add_actions(actions, conn, _add_action)


def _add_list(actions: Any, conn: argparse.ArgumentParser) -> None:
    lister = _add_action(actions, conn, "list", list_schedules,
                         "each schedule: rule, time zone, last and next occurrence",
                         "Each schedule the queue's consumers run: rule, time zone, last "
                         "occurrence enqueued and the next one.")  # fmt: skip
    lister.add_argument("--json", action="store_true", help="one JSON object a line")


def _add_delete(actions: Any, conn: argparse.ArgumentParser) -> None:
    deleter = _add_action(actions, conn, "delete", delete_schedules,
                          "forget schedules removed from the workers (one still run starts afresh)",
                          "Forget schedules: their last occurrence and rule. A worker that "
                          "still has one starts it afresh, without catching up.")  # fmt: skip
    deleter.add_argument("names", nargs="+", metavar="NAME", help="schedule names")


def _add_action(actions: Any, conn: argparse.ArgumentParser, name: str, func: Any, help: str,
                description: str) -> Any:  # fmt: skip
    parser = actions.add_parser(name, help=help, description=description, parents=[conn],
                                allow_abbrev=False)  # fmt: skip
    parser.set_defaults(func=func)
    return parser


def list_schedules(args: argparse.Namespace, queue: Queue) -> int:
    infos = describe(queue.store)
    runtime = {s.name: s for s in queue.periodic_schedules()}
    if args.json:
        print_json_lines([runtime_cmd.joined(info.as_dict(), runtime.pop(info.name, None))
                          for info in infos] + runtime_cmd.unstarted(runtime))  # fmt: skip
        return EXIT_OK
    if not infos and not runtime:
        print(f"no periodic schedules on queue {queue.name}")
        return EXIT_OK
    now = queue.store.server_time()
    rows = [(*_row(i, now), runtime_cmd.source(runtime.pop(i.name, None))) for i in infos]
    rows += [(s.name, runtime_cmd.rule(s), s.tz, "-", "", "-", "", runtime_cmd.source(s))
             for s in runtime.values()]  # fmt: skip
    print(table(("NAME", "RULE", "TZ", "LAST", "", "NEXT", "", "SOURCE"), rows))
    return EXIT_OK


def _row(info: ScheduleInfo, now: float) -> tuple[str, ...]:
    rule = f"every {info.rule}s" if info.kind == "every" else info.rule
    return (
        info.name,
        rule,
        info.tz or "-",
        *_when(info.last, now),
        *_when(info.next, now),
    )


def _when(when: int | None, now: float) -> tuple[str, str]:
    if when is None:
        return "-", ""
    return local_time(when), f"({relative(when, now)})"


def delete_schedules(args: argparse.Namespace, queue: Queue) -> int:
    names = list(dict.fromkeys(args.names))
    known = set(queue.store.periodic_state())
    queue.store.delete_periodic(names)
    for name in names:
        print(f"{name}: {'forgotten' if name in known else 'not found'}")
    return EXIT_OK if all(name in known for name in names) else EXIT_FATAL
