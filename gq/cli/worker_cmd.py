"""``gq-worker HANDLER [options]``: run one consumer until a signal (or, with --burst, until
the queue is drained). Imported by ``gq.cli.worker.main`` once gevent has patched."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from typing import Any, Callable

import gevent
import redis

import gq
from gq.cli import (
    EXIT_FATAL,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_USAGE,
    logs,
    metrics_cmd,
)
from gq.cli.common import (
    CliError,
    cannot_use,
    open_queue,
)
from gq.cli.monitor import burst_loop, report_loop
from gq.cli.options import consumer_options
from gq.cli.periodic_cmd import load_schedules
from gq.cli.supervised import Child, check_flags, child_for  # a child of --processes
from gq.cli.worker_args import (
    load_handler,
    parse,
    worker_name,
    worker_queues,
    worker_shards,
)
from gq.errors import ConfigurationError
from gq.periodic import Periodic
from gq.store.base import describe
from gq.store.connection import redact_url
from gq.store.jobs import RedisQueue
from gq.worker.identity import NameInUse

log = logging.getLogger("gq.worker")


def run(argv: list[str] | None = None) -> int:
    args = parse(argv)  # bad usage exits 2 here
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
    consumer = _consumer(args, queue, periodic, worker_shards(args.url, queue, handler))
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
    args: argparse.Namespace, queue: str | list[str] | dict[str, int], periodic: list[Periodic],
    shards: dict[str, int] | None = None,
) -> gq.Consumer:
    """The consumer the flags describe (exit 2 for a bad option, 3 if Redis is refused)."""
    try:
        return gq.Consumer(queue, url=args.url, periodic=periodic, name=worker_name(args),
                           shards=shards, **consumer_options(args))  # fmt: skip
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    except redis.RedisError as exc:  # a cluster client connects as it is built
        raise cannot_use(args.url, exc) from None


def _start_metrics(args: argparse.Namespace, consumer: gq.Consumer, rq: gq.Queue) -> Any:
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
    except NameInUse as exc:  # refused at start, before any job: as a bad flag
        raise CliError(EXIT_USAGE, str(exc)) from None
    except gq.PermissionDeniedError as exc:
        if exc.process is None:  # refused at start (the registration): as unreachable
            raise CliError(EXIT_UNREACHABLE, str(exc)) from None
        log.error("%s: stopped on a fatal error: %s", consumer.context, describe(exc))
        return False
    except Exception as exc:
        trace = not isinstance(exc, (gq.GQError, redis.RedisError))  # unexpected: the stack
        shown = describe(exc)
        log.error("%s: stopped on a fatal error: %s", consumer.context, shown, exc_info=trace)
        return False
    return True


def app_schedules(handler: Any) -> list[Periodic]:
    """The periodic entries of a ``gq.App`` (``app.periodic``), none for a byte handler."""
    return list(handler.schedules) if isinstance(handler, gq.App) else []


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
