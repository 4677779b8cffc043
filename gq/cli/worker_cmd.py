"""``gq-worker HANDLER [options]``: run one consumer until a signal (or, with --burst, until
the queue is drained). Imported by ``gq.cli.worker.main`` once gevent has patched."""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from typing import Any, Callable

import gevent
import redis

import gq
from gq.cli import (
    ENV_QUEUE,
    ENV_URL,
    EXIT_CODES_HELP,
    EXIT_FATAL,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    logs,
    metrics_cmd,
)
from gq.cli.common import (
    CliError,
    Parser,
    add_connection_flags,
    duration,
    open_queue,
    queue_specs,
)
from gq.cli.monitor import burst_loop, report_loop
from gq.cli.options import add_option_flags, add_retries_flag, consumer_options
from gq.cli.periodic_cmd import add_worker_flag, load_schedules
from gq.cli.supervised import Child, check_flags, child_for  # a child of --processes
from gq.cli.supervisor import add_flags as add_process_flags
from gq.errors import ConfigurationError
from gq.periodic import Periodic
from gq.store.base import ScriptedQueue
from gq.store.connection import DEFAULT_URL, redact_url
from gq.store.jobs import RedisQueue
from gq.worker.handler_checks import refuse_async

log = logging.getLogger("gq.worker")

DESCRIPTION = """\
Run one gq consumer: take jobs from a Redis queue and call HANDLER for each, hundreds
at once on gevent. HANDLER is package.module:function (the current directory is on the
import path); it gets a gq.Job (id, data, attempt); returning means success, raising
means failure (retried with backoff, then moved to dead).

The first SIGINT or SIGTERM stops gracefully: fetching stops, buffered jobs go back to
the queue, running jobs get the grace period to finish. A second signal stops at once:
running jobs stay in flight and another worker recovers them (exit code 1).
"""


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="gq-worker",
        usage="%(prog)s HANDLER [options]",
        description=DESCRIPTION,
        epilog=EXIT_CODES_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    parser.add_argument(
        "handler",
        metavar="HANDLER",
        help="package.module:function to call, or package.module:app for a gq.App's tasks",
    )
    add_connection_flags(parser, several_queues=True)
    parser.add_argument(
        "--burst",
        action="store_true",
        help="exit (code 0) once nothing is ready, nothing is due and nothing "
        "is in flight for this worker",
    )
    _add_logging_flags(parser)
    add_worker_flag(parser)
    metrics_cmd.add_worker_flags(parser)
    parser.add_argument("--version", action="version", version=f"gq-worker {gq.__version__}")
    add_retries_flag(parser)
    add_option_flags(parser)
    add_process_flags(parser)
    return parser


def _add_logging_flags(parser: argparse.ArgumentParser) -> None:
    """What the worker logs, how, and how often it logs its counts."""
    parser.add_argument(
        "--log-level", default="INFO", type=str.upper, choices=logs.LEVELS, help="default INFO"
    )
    parser.add_argument(
        "--log-format",
        default="text",
        choices=logs.FORMATS,
        help="text, or json (one object per line); default text",
    )
    parser.add_argument(
        "--stats-interval",
        type=duration,
        default=60.0,
        metavar="SECONDS",
        help="log done/failed/retried/killed and the rate this often; 0 turns it off; default 60",
    )


def run(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)  # bad usage exits 2 here
    secrets = logs.url_secrets(args.url)
    logs.configure(args.log_level, args.log_format, secrets)
    try:
        return _run(args)
    except CliError as exc:
        print(f"gq-worker: error: {logs.scrub(exc.message, secrets)}", file=sys.stderr)
        return exc.code


def _run(args: argparse.Namespace) -> int:
    check_flags(args)
    handler = load_handler(args.handler)
    queue = worker_queues(args, handler)
    periodic = load_schedules(args.periodic) + app_schedules(handler)  # exit 2 if one is bad
    consumer = _consumer(args, queue, periodic)
    rq = open_queue(args.url, consumer.queue, max_connections=2)  # exit 3 if unreachable
    child = child_for(args, consumer)  # None unless run by --processes
    _log_start(args, consumer)
    server = _start_metrics(args, consumer, rq)
    rqs = [RedisQueue(rq.client, name) for name in consumer.queues]
    watchers = _start_watchers(args, consumer, rqs) + (child.start() if child else [])
    try:
        clean = _consume(consumer, child, handler)
    finally:
        gevent.killall(watchers)
        if server is not None:
            server.stop(timeout=1)
        rq.client.close()
    if not clean:
        return EXIT_FATAL
    return child.exit_code if child else EXIT_OK


def _consumer(
    args: argparse.Namespace, queue: str | list[str] | dict[str, int], periodic: list[Periodic]
) -> gq.Consumer:
    """The consumer the flags describe (exit 2 for a bad option, 3 if Redis is refused)."""
    try:
        return gq.Consumer(queue, url=args.url, periodic=periodic, **consumer_options(args))
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    except redis.RedisError as exc:  # a cluster client connects as it is built
        raise CliError(
            EXIT_UNREACHABLE, f"cannot use Redis at {redact_url(args.url)}: {exc}"
        ) from None


def _start_metrics(args: argparse.Namespace, consumer: gq.Consumer, rq: ScriptedQueue) -> Any:
    """The metrics server, or None; ``rq``'s connections are closed if it cannot start."""
    try:
        return metrics_cmd.start_worker_metrics(args, consumer)
    except CliError:
        rq.client.close()
        raise


def _consume(consumer: gq.Consumer, child: Child | None, handler: Callable[..., Any]) -> bool:
    """Run until stopped; False after logging the error that ended the run."""
    try:
        (child.consume if child else consumer.consume)(handler)
    except gq.PermissionDeniedError as exc:
        if exc.process is None:  # refused at start (the registration): as unreachable
            raise CliError(EXIT_UNREACHABLE, str(exc)) from None
        log.error("%s: stopped on a fatal error: %s", consumer.context, exc)
        return False
    except Exception as exc:
        expected = isinstance(exc, (gq.GQError, redis.RedisError))
        log.error("%s: stopped on a fatal error: %s", consumer.context, exc, exc_info=not expected)
        return False
    return True


def worker_queues(args: argparse.Namespace, handler: Any) -> str | list[str] | dict[str, int]:
    """The queues to consume: ``--queue`` (or $GQ_QUEUE) as given; for a ``gq.App``
    without them, every queue its tasks name, with equal weights. An app with no Redis
    of its own enqueues (from its tasks) on the worker's ``--url``; without ``--url``
    (or $GQ_URL) the worker uses the app's."""
    if not isinstance(handler, gq.App):
        return queue_specs(args.queue)
    if handler.connected() and args.url == DEFAULT_URL and not os.environ.get(ENV_URL):
        url, client, _ = handler.connection()
        if url is None:
            raise CliError(EXIT_USAGE, "an app built with client= needs the worker's --url")
        args.url = url
    elif not handler.connected():
        handler.connect(args.url)
    if args.queue or os.environ.get(ENV_QUEUE):
        return queue_specs(args.queue)
    names = handler.queues
    return names[0] if len(names) == 1 else dict.fromkeys(names, 1)


def app_schedules(handler: Any) -> list[Periodic]:
    """The periodic entries of a ``gq.App`` (``app.periodic``), none for a byte handler."""
    return list(handler.schedules) if isinstance(handler, gq.App) else []


def load_handler(spec: str) -> Callable[..., Any]:
    """Import ``package.module:function`` (attributes may be dotted); CliError(2) if not."""
    module_name, sep, attr = spec.partition(":")
    if not sep or not module_name or not attr:
        raise CliError(EXIT_USAGE, f"HANDLER must be package.module:function, not {spec!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())  # as `python -m` would, and as rq and celery do
    try:
        target: Any = importlib.import_module(module_name)
    except Exception as exc:
        log.debug("importing %s failed", module_name, exc_info=True)
        raise CliError(
            EXIT_USAGE, f"cannot import handler module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None
    for part in attr.split("."):
        if not hasattr(target, part):
            raise CliError(
                EXIT_USAGE,
                f"cannot find handler {spec!r}: {module_name}.{attr} has no attribute {part!r}",
            )
        target = getattr(target, part)
    if not callable(target):
        raise CliError(
            EXIT_USAGE, f"handler {spec!r} is not callable (it is {type(target).__name__})"
        )
    try:
        refuse_async(target)
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    return target  # type: ignore[no-any-return]


def _log_start(args: argparse.Namespace, consumer: gq.Consumer) -> None:
    opts = consumer.opts
    log.info(
        "gq-worker %s starting: queue=%s consumer=%s handler=%s concurrency=%d "
        "buffer=%s pid=%d url=%s%s",
        gq.__version__,
        ",".join(consumer.queues),
        consumer.id,
        args.handler,
        opts.processor_concurrency,
        opts.poller_buffer_size,
        os.getpid(),
        redact_url(args.url),
        " burst" if args.burst else "",
    )


def _start_watchers(
    args: argparse.Namespace, consumer: gq.Consumer, rqs: list[RedisQueue]
) -> list[gevent.Greenlet]:
    watchers = []
    if args.stats_interval > 0:
        watchers.append(gevent.spawn(report_loop, consumer, args.stats_interval))
        watchers[-1].name = "gq-report"
    if args.burst:
        watchers.append(gevent.spawn(burst_loop, consumer, rqs))
        watchers[-1].name = "gq-burst"
    return watchers
