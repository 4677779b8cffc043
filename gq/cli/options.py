"""One ``gq-worker`` flag per consumer option, built from ``gq.options.ConsumerOptions``.

The flag is the field name with dashes, its type follows the field's (float fields are
durations), and its help is the field's docstring, which names the default. A new
option in ``ConsumerOptions`` gets its flag with no change here.
"""

from __future__ import annotations

import argparse
import ast
import inspect
from dataclasses import dataclass, fields
from typing import Any, Callable

from gq.cli import EXIT_USAGE
from gq.cli.common import CliError, count_or_auto, duration, optional_count, optional_duration
from gq.options import SHORT_NAMES, WORKER_CONCURRENCY, ConsumerOptions

# The short forms users of other queues reach for first (--concurrency...).
ALIASES = {name: "--" + short.replace("_", "-") for short, name in SHORT_NAMES.items()}

# gq-worker's own defaults, where they differ from a Consumer's, with the help that says so.
WORKER_DEFAULTS: dict[str, Any] = {"processor_concurrency": WORKER_CONCURRENCY}
_WORKER_HELP = {
    "processor_concurrency": f"Default {WORKER_CONCURRENCY} (a gq.Consumer built in code: 5, "
    "curlyq's), minimum 1. Handlers running at once.",
}

# Added to a docstring that only gives the default ("Default 30 s."); {loop} is the
# option's first word.
_FAMILY_HELP = {
    "_max_attempts": "Failures in a row of the {loop} loop before the consumer aborts.",
    "_max_backoff": "Cap on the {loop} loop's backoff after a failure.",
}


@dataclass(frozen=True)
class OptionFlag:
    name: str
    flags: tuple[str, ...]
    parse: Callable[[str], Any]
    metavar: str
    help: str


def option_flags() -> list[OptionFlag]:
    docs = field_docstrings()
    found = []
    for field in fields(ConsumerOptions):
        kind = str(field.type)
        optional = "Optional" in kind or "None" in kind
        parse: Callable[[str], Any]
        if "bool" in kind:
            parse, metavar = on_off, "on|off"
        elif "float" in kind:
            parse = optional_duration if optional else duration
            metavar = "SECONDS"
        elif "str" in kind:  # a count or "auto" (poller_buffer_size)
            parse, metavar = count_or_auto, "N|auto"
        else:
            parse = optional_count if optional else int
            metavar = "N"
        flag = "--" + field.name.replace("_", "-")
        flags = (flag, ALIASES[field.name]) if field.name in ALIASES else (flag,)
        found.append(
            OptionFlag(
                field.name, flags, parse, metavar, _help(field.name, docs.get(field.name, ""))
            )
        )
    return found


def on_off(text: str) -> bool:
    """A switch's value on the command line: on/off (also true/false, yes/no, 1/0)."""
    value = text.strip().lower()
    if value in ("on", "true", "yes", "1"):
        return True
    if value in ("off", "false", "no", "0"):
        return False
    raise argparse.ArgumentTypeError(f"expected on or off, not {text!r}")


def field_docstrings() -> dict[str, str]:
    """Each ConsumerOptions field's docstring (the string right after its annotation)."""
    tree = ast.parse(inspect.getsource(ConsumerOptions))
    body = tree.body[0].body  # type: ignore[attr-defined]
    docs = {}
    for node, following in zip(body, body[1:]):
        if (
            isinstance(node, ast.AnnAssign)
            and isinstance(node.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            docs[node.target.id] = " ".join(following.value.value.split())
    return docs


def _help(name: str, doc: str) -> str:
    doc = _WORKER_HELP.get(name, doc)
    text = doc.replace("``", "").replace("%", "%%")  # argparse formats help with %
    if text.startswith("Default") and ". " not in text:
        family = next((h for suffix, h in _FAMILY_HELP.items() if name.endswith(suffix)), "")
        text = f"{text} {family.format(loop=name.split('_')[0])}".strip()
    return text


def add_option_flags(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group(
        "consumer options",
        "Durations are seconds (1.5) or take a unit (250ms, 30s, 5m, 2h, 7d); 'none' or 0\n"
        "turns an optional limit off. An option not given keeps its default.",
    )
    for option in option_flags():
        group.add_argument(
            *option.flags,
            dest=option.name,
            type=option.parse,
            metavar=option.metavar,
            help=option.help,
            default=argparse.SUPPRESS,
        )


def add_retries_flag(parser: argparse.ArgumentParser) -> None:
    """``--retries N``: curlyq's job_max_attempts under a name that says what it counts."""
    parser.add_argument(
        "--retries",
        type=int,
        metavar="N",
        default=argparse.SUPPRESS,
        help="how many times a failing job runs again, so at most N + 1 runs (the count "
        "--job-max-attempts holds, named for what it counts); a task's retries= wins; "
        "default 20",
    )


def consumer_options(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line, as keyword arguments of ``gq.Consumer``."""
    given = vars(args)
    options = {name: given[name] for name in ConsumerOptions.names() if name in given}
    for name, default in WORKER_DEFAULTS.items():
        options.setdefault(name, default)
    if "retries" in given:
        other = options.setdefault("job_max_attempts", given["retries"])
        if other != given["retries"]:
            raise CliError(
                EXIT_USAGE,
                f"--retries {given['retries']} and --job-max-attempts {other} disagree "
                "(they are the same count): give one",
            )
    return options
