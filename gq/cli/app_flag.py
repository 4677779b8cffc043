"""``gq --app module:app`` (or $GQ_APP): the operator's commands reach the Redis and the
queues a ``gq.App`` names, as gq-worker does when given the app, instead of
localhost:6379, which on a shared host may be someone else's Redis."""

from __future__ import annotations

import argparse
import importlib
import os
import sys
from typing import Any

from gq.cli import ENV_QUEUE, ENV_URL, EXIT_USAGE
from gq.cli.common import CliError
from gq.store.connection import DEFAULT_URL
from gq.tasks.app import App

ENV_APP = "GQ_APP"


def add_app_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--app",
        default=os.environ.get(ENV_APP) or None,
        metavar="MODULE:APP",
        help=f"a gq.App whose Redis URL (unless --url or ${ENV_URL} is given) and queues "
        f"(unless --queue or ${ENV_QUEUE} is) to use; default ${ENV_APP}",
    )


def apply_app(args: argparse.Namespace) -> None:
    """Fill ``args.url`` and the queue flags from ``--app``, where they were not given."""
    spec = getattr(args, "app", None)
    if not spec:
        return
    app = load_app(spec)
    args.loaded_app = app  # (its tasks name the positional arguments a filter matches)
    if args.url == DEFAULT_URL and not os.environ.get(ENV_URL):
        args.url = _app_url(app, spec)
    if "queues" in vars(args) and not args.queues:  # gq metrics: every queue the app names
        args.queues = app.queues
    elif isinstance(getattr(args, "queue", None), list) and not args.queue:  # gq dashboard
        args.queue = app.queues
    elif "queue" in vars(args) and args.queue is None:
        args.queue = _one_queue(app, spec)


def app_tasks(args: argparse.Namespace) -> Any:
    """The tasks of the app ``--app`` loaded (None without one): a filter by an argument's
    name then matches the calls that gave it by position (``JobFilter.naming``)."""
    loaded = getattr(args, "loaded_app", None)
    return None if loaded is None else loaded.tasks


def load_app(spec: str) -> App:
    """The ``gq.App`` that ``package.module:attribute`` names; CliError(2) saying what is
    wrong if the module does not import, lacks the attribute or it is not a gq.App."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(EXIT_USAGE, f"--app must be package.module:app, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as gq-worker finds the app's module
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:  # noqa: BLE001 - whatever the module raised, said in one line
        raise CliError(EXIT_USAGE, f"--app {spec}: cannot import module {module_name!r}: "
                                   f"{type(exc).__name__}: {exc}") from None  # fmt: skip
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CliError(EXIT_USAGE, f"--app {spec}: {module_name}.{attr} has no attribute "
                                       f"{part!r}")  # fmt: skip
        target = getattr(target, part)
    if not isinstance(target, App):
        kind = type(target).__name__
        raise CliError(EXIT_USAGE, f"--app {spec}: not a gq.App (it is {kind})")
    return target


def _app_url(app: App, spec: str) -> str:
    url, _, _ = app.connection()
    if url is None:
        how = "was built with client=" if app.connected() else "has no url="
        raise CliError(EXIT_USAGE, f"--app {spec}: the app {how}: pass --url")
    return url


def _one_queue(app: App, spec: str) -> str:
    names = app.queues
    if len(names) == 1:
        return names[0]
    raise CliError(EXIT_USAGE, f"--app {spec} names several queues ({', '.join(names)}): "
                               "pass --queue NAME")  # fmt: skip
