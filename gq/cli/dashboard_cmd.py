"""``gq dashboard``: serve the web dashboard on gevent's WSGI server.

Imported by ``gq.cli.admin`` once gevent has patched; Jinja2 (the ``dashboard`` extra) is
imported only when the command runs, so the rest of ``gq`` works without it.
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.app_flag import add_app_flag, app_tasks
from gq.cli.common import (
    CliError,
    Parser,
    add_consumer_timeout_flag,
    add_url_flag,
    cannot_use,
    duration,
)
from gq.serving import serve_wsgi, stop_signals
from gq.store.connection import client_from_url, redact_url

ENV_AUTH = "GQ_DASHBOARD_AUTH"  # the same name as gq.dashboard.ENV_AUTH (not imported: Jinja2)
# Connections served at once; gevent's default is unbounded.
MAX_CONNECTIONS = 100


def add_parser(commands: argparse._SubParsersAction[Parser]) -> None:
    parser = commands.add_parser(
        "dashboard",
        help="serve the web dashboard (needs gq[dashboard])",
        description="Serve the web dashboard: every queue, their jobs and consumers.",
        allow_abbrev=False,
    )
    _add_source_flags(parser)
    _add_security_flags(parser)


def _add_source_flags(parser: argparse.ArgumentParser) -> None:
    add_url_flag(parser)
    add_app_flag(parser)
    parser.add_argument(
        "--queue",
        action="append",
        default=[],
        metavar="NAME",
        help="show this queue too (repeatable); the others come from the "
        "registry that gq workers keep (gq:queues), never from KEYS",
    )
    add_consumer_timeout_flag(parser)
    parser.add_argument(
        "--refresh",
        type=duration,
        default=5.0,
        metavar="SECONDS",
        help="seconds between live updates (default 5, at least 2; 0: off)",
    )


def _add_security_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    parser.add_argument("--port", type=int, default=8080, help="port (default 8080; 0: any)")
    parser.add_argument("--read-only", action="store_true", help="hide and refuse every change")
    parser.add_argument(
        "--auth", metavar="USER:PASSWORD", help=f"require HTTP basic auth; default ${ENV_AUTH}"
    )
    parser.add_argument(
        "--no-auth", action="store_true", help="allow serving beyond loopback without --auth"
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name to answer besides localhost and --host (repeatable); "
        "on loopback only those are answered, beyond it any unless this is given",
    )


def run(args: argparse.Namespace) -> int:
    auth = args.auth if args.auth is not None else os.environ.get(ENV_AUTH) or None
    _check_exposure(args.host, auth, args.no_auth)
    app = _build_app(args, auth)
    with stop_signals() as stopping:  # before the server answers: a client may then stop it
        try:
            server = serve_wsgi(args.host, args.port, app, connections=MAX_CONNECTIONS)
        except OSError as exc:  # the port is taken, or the address is not this machine's
            message = f"cannot serve the dashboard on {args.host}:{args.port}: {exc}"
            raise CliError(EXIT_USAGE, message) from None
        print(
            f"gq dashboard: http://{_url_host(args.host)}:{server.server_port}/ "
            f"(Redis {redact_url(args.url)}{', read-only' if args.read_only else ''}"
            f"{', basic auth' if auth else ''})",
            flush=True,
        )
        stopping.wait()
    server.stop()
    return EXIT_OK


def _check_exposure(host: str, auth: str | None, no_auth: bool) -> None:
    from gq.dashboard.security import is_loopback

    if not is_loopback(host) and auth is None and not no_auth:
        raise CliError(
            EXIT_USAGE,
            f"--host {host} serves beyond this machine: pass --auth USER:PASSWORD "
            f"(or set {ENV_AUTH}), or --no-auth if something in front already checks",
        )
    if not is_loopback(host) and auth is None:
        print("gq dashboard: warning: serving without auth beyond loopback", file=sys.stderr)


def _build_app(args: argparse.Namespace, auth: str | None) -> Any:
    try:
        from gq.dashboard import app
    except ImportError as exc:
        raise CliError(
            EXIT_USAGE, f"the dashboard needs Jinja2: pip install 'gq[dashboard]' ({exc})"
        ) from None
    client = _connect(args)
    try:
        return app(
            client=client,
            queues=args.queue,
            read_only=args.read_only,
            auth=auth,
            allowed_hosts=_allowed_hosts(args),
            consumer_timeout=args.consumer_timeout,
            refresh=args.refresh,
            tasks=app_tasks(args),
        )
    except ValueError as exc:  # a malformed --auth
        raise CliError(EXIT_USAGE, f"--auth: {exc}") from None


def _connect(args: argparse.Namespace) -> Any:
    """A client of the Redis at --url, which has answered (exit 3 if it does not)."""
    from gq.cli.common import unreachable
    from gq.store.admin import QueueAdmin

    client = client_from_url(args.url, socket_connect_timeout=5.0, socket_timeout=10.0)
    problem = unreachable(QueueAdmin(client, "gq-dashboard"), args.url)
    if problem is not None:
        raise cannot_use(args.url, problem)
    return client


def _allowed_hosts(args: argparse.Namespace) -> list[str] | None:
    """Host names answered: on loopback, only loopback names (a page whose own name is
    rebound to 127.0.0.1 arrives with that name); beyond loopback, where --auth is
    required, any name unless --allowed-host lists them."""
    from gq.dashboard.security import LOOPBACK_HOSTS, is_loopback

    if not is_loopback(args.host) and not args.allowed_host:
        return None
    return [*LOOPBACK_HOSTS, args.host, *args.allowed_host]


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
