"""``gq periodic add|pause|resume|remove``: periodic schedules at runtime (gq/schedules.py),
and what ``gq periodic list`` adds about them (their task, arguments and pause)."""

from __future__ import annotations

import argparse
import json
from typing import Any, Callable

from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError
from gq.errors import ConfigurationError
from gq.queue import Queue
from gq.schedules import Schedule


def add_actions(actions: Any, conn: argparse.ArgumentParser, add: Callable[..., Any]) -> None:
    adder = add(actions, conn, "add", add_schedule,
                "add or change a schedule (running workers take it up within a heartbeat)",
                "Add a periodic schedule, or change the one of that name. Running workers "
                "take it up within a heartbeat. The task's name is not checked here: the "
                "worker that runs its jobs decides.")  # fmt: skip
    adder.add_argument("--name", required=True, help="the schedule's name")
    adder.add_argument("--task", required=True, help="the task's name (as the worker knows it)")
    rule = adder.add_mutually_exclusive_group(required=True)
    rule.add_argument("--cron", help="a cron rule, e.g. '*/5 * * * *' (needs gq[cron])")
    rule.add_argument("--every", help="an interval: seconds, or 30s, 5m, 2h (at least 1s)")
    adder.add_argument("--tz", default="UTC", help="the cron rule's time zone (default UTC)")
    adder.add_argument("--args", default="[]", help="the task's arguments: a JSON array")
    adder.add_argument("--kwargs", default="{}", help="its keyword arguments: a JSON object")
    for name, func, help in (("pause", pause, "enqueue nothing of a schedule until resumed"),
                             ("resume", resume, "enqueue a paused schedule again"),
                             ("remove", remove, "remove a schedule and forget its cursor")):
        parser = add(actions, conn, name, func, help, help[0].upper() + help[1:] + ".")
        parser.add_argument("name", metavar="NAME", help="the schedule's name")


def add_schedule(args: argparse.Namespace, queue: Queue) -> int:
    every = None if args.every is None else _seconds(args.every)
    positional, named = _json(args.args, list, "--args"), _json(args.kwargs, dict, "--kwargs")
    try:
        new = queue.add_periodic(args.name, args.task, cron=args.cron, every=every,
                                 args=positional, kwargs=named, tz=args.tz)  # fmt: skip
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    print(f"{args.name}: {'added' if new else 'changed'}")
    return EXIT_OK


def pause(args: argparse.Namespace, queue: Queue) -> int:
    return _flag(queue.pause_periodic, args.name, "paused")


def resume(args: argparse.Namespace, queue: Queue) -> int:
    return _flag(queue.resume_periodic, args.name, "resumed")


def remove(args: argparse.Namespace, queue: Queue) -> int:
    found = queue.remove_periodic(args.name)
    print(f"{args.name}: {'removed' if found else 'not found'}")
    return EXIT_OK if found else EXIT_FATAL


def _flag(change: Callable[[str], None], name: str, done: str) -> int:
    try:
        change(name)
    except KeyError:
        print(f"{name}: not found (no runtime schedule of that name)")
        return EXIT_FATAL
    print(f"{name}: {done}")
    return EXIT_OK


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def _seconds(text: str) -> int:
    number, unit = (text[:-1], text[-1]) if text[-1:] in _UNITS else (text, "s")
    try:
        return int(number) * _UNITS[unit]
    except ValueError:
        raise CliError(EXIT_USAGE, f"--every must be whole seconds or 30s, 5m, 2h, 1d, "
                                   f"not {text!r}") from None  # fmt: skip


def _json(text: str, kind: type, flag: str) -> Any:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise CliError(EXIT_USAGE, f"{flag} is not JSON: {exc}") from None
    if not isinstance(value, kind):
        raise CliError(EXIT_USAGE, f"{flag} must be a JSON {'array' if kind is list else 'object'}")
    return value


def rule(schedule: Schedule) -> str:
    return f"every {schedule.every}s" if schedule.every is not None else str(schedule.cron)


def source(schedule: Schedule | None) -> str:
    if schedule is None:
        return "code"
    return "runtime (paused)" if schedule.paused else "runtime"


def joined(info: dict[str, Any], schedule: Schedule | None) -> dict[str, Any]:
    """A ``list --json`` line: the cursor's view, and the runtime record if it has one."""
    extra = {"source": "code"} if schedule is None else {"source": "runtime",
             **{k: v for k, v in schedule.as_dict().items() if k != "name"}}  # fmt: skip
    return {**info, **extra}


def unstarted(runtime: dict[str, Schedule]) -> list[dict[str, Any]]:
    """``list --json`` lines of runtime schedules no worker has run yet."""
    return [joined({"name": s.name, "kind": "every" if s.every is not None else "cron",
                    "rule": rule(s), "tz": s.tz, "last": None, "next": None}, s)
            for s in runtime.values()]  # fmt: skip
