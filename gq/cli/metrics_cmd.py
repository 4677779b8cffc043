"""Prometheus on the command line: ``gq-worker --metrics-port`` (the worker's own metrics)
and ``gq metrics`` (the queue-wide gauges). The names live in ``gq.metrics``."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.app_flag import add_app_flag
from gq.cli.common import (
    CliError,
    Parser,
    add_consumer_timeout_flag,
    add_url_flag,
    cannot_use,
    is_refusal,
    open_queue,
    queue_on,
)
from gq.cli.logs import scrub, url_secrets
from gq.serving import stop_signals
from gq.store.admin import registered_queues
from gq.store.connection import redact_url

log = logging.getLogger("gq.worker")

DEFAULT_HOST = "127.0.0.1"
DESCRIPTION = """\
Serve Prometheus gauges of whole queues at http://HOST:PORT/metrics: jobs ready,
scheduled, in flight and dead, the oldest ready job's age, consumers alive and dead.
One Redis round trip per queue per scrape. Without --queue, the queues are those the
workers registered (gq:queues), read again at each scrape. Stops on SIGINT or SIGTERM.
"""


# -- gq-worker --metrics-port -------------------------------------------------------------


def add_worker_flags(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (needs gq[metrics])",
    )
    parser.add_argument(
        "--metrics-host",
        default=DEFAULT_HOST,
        metavar="HOST",
        help=f"address the metrics server binds to; default {DEFAULT_HOST}",
    )
    parser.add_argument(
        "--no-metrics-histograms",
        dest="metrics_histograms",
        action="store_false",
        help="leave the job duration and wait histograms empty: they cost each job two "
        "clock reads, which shows only when handlers take a few microseconds",
    )


def start_worker_metrics(args: argparse.Namespace, consumer: Any) -> Any:
    """Count ``consumer``'s jobs and serve the metrics, if asked; the server or None."""
    if args.metrics_port is None:
        return None
    from gq import metrics

    _require_prometheus()
    metrics.enable(consumer, histograms=args.metrics_histograms)
    server = _serve(args.metrics_host, args.metrics_port, None)
    log.info("metrics at http://%s:%d/metrics", args.metrics_host, server.server_port)
    return server


def _require_prometheus() -> None:
    """Exit 2 unless prometheus_client (gq[metrics]) can be imported."""
    from gq import metrics

    try:
        metrics.prometheus()
    except metrics.MetricsUnavailableError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None


def _serve(host: str, port: int, app: Any) -> Any:
    from gq import metrics

    try:
        return metrics.serve(host, port, app)
    except OSError as exc:
        raise CliError(EXIT_USAGE, f"cannot serve metrics on {host}:{port}: {exc}") from None


# -- gq metrics ------------------------------------------------------------------------------


def add_parser(commands: argparse._SubParsersAction[Parser]) -> None:
    help = "serve Prometheus gauges of whole queues (needs gq[metrics])"
    parser: argparse.ArgumentParser = commands.add_parser(
        "metrics",
        help=help,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        allow_abbrev=False,
    )
    add_url_flag(parser)
    add_app_flag(parser)
    parser.add_argument(
        "--queue",
        dest="queues",
        action="extend",
        nargs="+",
        metavar="Q",
        help="queues to export (repeatable); default: every registered queue",
    )
    parser.add_argument("--port", type=int, required=True, help="port to serve on")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"default {DEFAULT_HOST}")
    add_consumer_timeout_flag(parser)


def run(args: argparse.Namespace) -> int:
    from gq import metrics

    _require_prometheus()
    rq = _connect(args.url, args.queues)
    app = metrics.queue_metrics_wsgi_app(rq.client, args.queues, args.consumer_timeout)
    with stop_signals() as stopping:  # before the server answers: a client may then stop it
        server = _serve(args.host, args.port, app)
        print(
            f"gq metrics: serving http://{args.host}:{server.server_port}/metrics for "
            f"{', '.join(args.queues) if args.queues else 'the registered queues'} "
            f"at {scrub(redact_url(args.url), url_secrets(args.url))}",
            file=sys.stderr,
            flush=True,
        )
        stopping.wait()
    server.stop(timeout=5)
    rq.client.close()
    return EXIT_OK


def _connect(url: str, queues: list[str] | None) -> Any:
    """Reachable and accepted now (exit 3 if not); later failures are scrape errors.
    Below Prometheus' default scrape timeout (10 s), so a slow Redis fails the scrape of
    its queues rather than the whole scrape."""
    if queues:  # the rights on the first queue's keys, as every gq command checks them
        return open_queue(url, queues[0], socket_timeout=5.0)
    rq = queue_on(url, "gq-metrics", socket_timeout=5.0)
    try:
        registered_queues(rq.client)  # the registry is all this exporter reads then
    except Exception as exc:
        rq.client.close()
        if not is_refusal(exc):
            raise
        raise cannot_use(url, exc) from None
    return rq
