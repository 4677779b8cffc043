"""``gq demo``: register a task on a ``gq.App``, enqueue N calls of it, drain them with a
consumer in this process, and compare the run with an ideal one. It works with no Redis
at all: when none answers at --url it says so and uses the embedded in-process server
(fakeredis).

The default workload is I/O-bound, as gq's are: 5,000 jobs that each wait 200 ms, 1,000
at once, an ideal of 5,000 jobs/s that one gevent worker comes close to (the demo's first
number should read as what gq is for, not as a shortfall; docs/decisions.md)."""

from __future__ import annotations

import argparse
import math
import sys
import time
import uuid
from typing import Callable, TextIO

import gevent

import gq
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_UNREACHABLE
from gq.cli.common import (
    CliError,
    Parser,
    add_url_flag,
    duration,
    positive_int,
    queue_on,
    unreachable,
)
from gq.store.admin import QueueAdmin
from gq.store.base import MAX_BATCH
from gq.store.connection import FAKEREDIS_SCHEME, client_from_url, redact_url

EMBEDDED_URL = f"{FAKEREDIS_SCHEME}://"
DEFAULT_URL_HINT = "redis://HOST:6379/0"
DEFAULT_JOBS = 5_000
DEFAULT_CONCURRENCY = 1_000
DEFAULT_WAIT = 0.2
BAR_WIDTH = 30
TASK_NAME = "demo.simulated_io"
DESCRIPTION = (
    f"Enqueue N calls of a task ({TASK_NAME}(index), which waits a little: simulated "
    "I/O) with enqueue_many, drain them with a consumer in this process, and print the "
    "throughput and the time an ideal run would take. Uses the Redis at --url when one "
    "answers, else the embedded in-process server (fakeredis://); the queue "
    "(gq-demo-<random>) is deleted after."
)


def add_parser(commands: argparse._SubParsersAction[Parser]) -> None:
    help = "enqueue sample tasks, drain them with a worker in this process, show throughput"
    parser = commands.add_parser("demo", help=help, allow_abbrev=False, description=DESCRIPTION)
    add_url_flag(parser, "Redis to use if it answers")
    _add_workload_flags(parser)


def _add_workload_flags(parser: argparse.ArgumentParser) -> None:
    """How many jobs, how many at once, and how long each one waits."""
    parser.add_argument(
        "--jobs",
        type=positive_int,
        default=DEFAULT_JOBS,
        metavar="N",
        help=f"default {DEFAULT_JOBS:,}",
    )
    parser.add_argument(
        "--concurrency",
        type=positive_int,
        default=DEFAULT_CONCURRENCY,
        metavar="N",
        help=f"handlers at once; default {DEFAULT_CONCURRENCY}",
    )
    parser.add_argument(
        "--wait",
        type=duration,
        default=DEFAULT_WAIT,
        metavar="SECONDS",
        help=f"each job's simulated I/O; default {DEFAULT_WAIT:g} s",
    )


def run(args: argparse.Namespace) -> int:
    url, backend = choose_backend(args.url)
    embedded = url.lower().startswith(f"{FAKEREDIS_SCHEME}:")
    rq = QueueAdmin(
        client_from_url(url, socket_connect_timeout=5.0, socket_timeout=10.0),
        f"gq-demo-{uuid.uuid4().hex[:8]}",
    )
    _announce(args, backend)
    try:
        done, elapsed = _enqueue_and_drain(url, rq, args)
    finally:
        _clean_up(rq)
    if done < args.jobs:
        print(f"interrupted: {done:,} of {args.jobs:,} jobs done", file=sys.stderr)
        return EXIT_FATAL
    _report(args.jobs, elapsed, args.wait, args.concurrency)
    _next_step(embedded, args.url)
    return EXIT_OK


def _announce(args: argparse.Namespace, backend: str) -> None:
    print(
        f"gq demo: {args.jobs:,} jobs of task {TASK_NAME}, each waiting "
        f"{args.wait * 1000:g} ms (simulated I/O), {args.concurrency:,} at once",
        flush=True,
    )
    print(f"backend: {backend}", flush=True)


def _enqueue_and_drain(url: str, rq: QueueAdmin, args: argparse.Namespace) -> tuple[int, float]:
    """(jobs done, seconds); (0, 0.0) when Ctrl-C interrupts."""
    n = args.jobs
    countdown = Countdown(n, args.wait)
    app = gq.App(url=url, queue=rq.keys.name)
    simulated_io = app.task(name=TASK_NAME)(countdown.simulated_io)
    try:
        seconds = _enqueue(simulated_io, n)
        print(f"enqueued {n:,} jobs in {seconds:.2f} s ({n / seconds:,.0f} jobs/s)", flush=True)
        return _drain(url, app, countdown, args)
    except KeyboardInterrupt:
        return 0, 0.0
    except gq.GQError as exc:
        raise CliError(EXIT_FATAL, f"the demo's consumer failed: {exc}") from None


def choose_backend(url: str) -> tuple[str, str]:
    """The URL to use and how to name it: ``url`` if Redis answers there, else embedded."""
    if url.lower().startswith(f"{FAKEREDIS_SCHEME}:"):
        return url, f"embedded in-process server ({url})"
    rq = queue_on(url, "gq-demo", socket_connect_timeout=2.0)
    try:
        problem = unreachable(rq.store, url)
    finally:
        rq.client.close()
    if problem is None:
        return url, f"Redis at {redact_url(url)}"
    reason = f"no Redis at {redact_url(url)}: {problem.rstrip('.')}"
    try:  # fakeredis is there, and runs Lua (fakeredis[lua])
        QueueAdmin(client_from_url(EMBEDDED_URL), "gq-demo-probe").backlog("probe")
    except Exception:  # noqa: BLE001 - whatever failed, there is no embedded server to use
        raise CliError(
            EXIT_UNREACHABLE,
            f"{reason}; and the embedded server needs fakeredis "
            "with Lua: start Redis, or pip install 'fakeredis[lua]'",
        ) from None
    return EMBEDDED_URL, f"embedded in-process server ({EMBEDDED_URL})\n  ({reason})"


def _enqueue(task: gq.Task[[int], None], n: int) -> float:
    """Enqueue ``task(0)`` … ``task(n - 1)``, a batch (one round trip) at a time."""
    start = time.perf_counter()
    for first in range(0, n, MAX_BATCH):
        task.enqueue_many([(index,) for index in range(first, min(first + MAX_BATCH, n))])
    return max(time.perf_counter() - start, 1e-9)


def _drain(
    url: str, app: gq.App, countdown: Countdown, args: argparse.Namespace
) -> tuple[int, float]:
    """Run a consumer on the app until every job is done; (jobs done, seconds)."""
    consumer = gq.Consumer(
        app.queue,
        url=url,
        processor_concurrency=args.concurrency,
        poller_buffer_size=min(args.concurrency, MAX_BATCH),
    )
    countdown.consumer = consumer
    countdown.start = time.perf_counter()  # the drain's time: the enqueue was timed apart
    progress = Progress(args.jobs, sys.stderr)
    watcher = gevent.spawn(progress.follow, lambda: countdown.done, countdown.start)
    try:
        consumer.consume(app)  # the app dispatches each job to its task; Ctrl-C stops it
    finally:
        watcher.kill()
    elapsed = (countdown.end or time.perf_counter()) - countdown.start
    progress.show(countdown.done, elapsed, final=True)
    return countdown.done, max(elapsed, 1e-9)


class Countdown:
    """The demo task's body: waits ``wait`` seconds, counts, and stops the consumer once
    ``total`` jobs are done."""

    def __init__(self, total: int, wait: float) -> None:
        self.consumer: gq.Consumer | None = None
        self.total = total
        self.wait = wait
        self.done = 0
        self.start = time.perf_counter()
        self.end = 0.0

    def simulated_io(self, index: int) -> None:
        gevent.sleep(self.wait)
        self.done += 1
        if self.done == self.total and self.consumer is not None:
            self.end = time.perf_counter()
            self.consumer.stop()  # graceful: the last acknowledgements still go out


def _clean_up(rq: QueueAdmin) -> None:
    try:
        rq.delete_queue()
    except Exception as exc:  # noqa: BLE001 - best effort on the way out: reported, not raised
        print(f"gq demo: could not delete queue {rq.keys.name}: {exc}", file=sys.stderr)
    finally:
        rq.client.close()


def _report(n: int, elapsed: float, wait: float, concurrency: int) -> None:
    """The run's rate next to the ideal one: every handler busy all the time, so that
    ``concurrency`` jobs end every ``wait`` seconds (fewer in a last, partial wave)."""
    ideal = math.ceil(n / concurrency) * wait
    print(f"processed {n:,} jobs in {elapsed:.2f} s: {n / elapsed:,.0f} jobs/s")
    print(
        f"ideal: {n / ideal:,.0f} jobs/s ({concurrency:,} at once, {wait * 1000:g} ms each: "
        f"{n:,} jobs in {ideal:.2f} s); this run reached {100 * ideal / elapsed:.0f}% of it"
    )


def _next_step(embedded: bool, url: str) -> None:
    if embedded:
        print(
            "ran on the embedded server, inside this process (its Redis work shared the "
            "worker's CPU)\nnext: start Redis (redis-server) and run `gq demo` again, "
            f"or point it at yours: gq demo --url {DEFAULT_URL_HINT}"
        )
        return
    print(
        f"ran on the Redis at {redact_url(url)}\nnext: run tasks of your own with a worker "
        f"(README.md, Quick example): gq-worker webhooks:app --url {redact_url(url)}"
    )


class Progress:
    """A bar redrawn in place on a terminal; a plain line a second otherwise."""

    def __init__(self, total: int, stream: TextIO) -> None:
        self.total = total
        self.stream = stream
        self.tty = stream.isatty()

    def follow(self, done: Callable[[], int], start: float) -> None:
        while True:
            gevent.sleep(0.1 if self.tty else 1.0)
            self.show(done(), time.perf_counter() - start)

    def show(self, done: int, elapsed: float, final: bool = False) -> None:
        rate = done / elapsed if elapsed > 0 else 0.0
        share = done / self.total
        if self.tty:
            filled = int(BAR_WIDTH * share)
            bar = "#" * filled + "-" * (BAR_WIDTH - filled)
            line = f"\r[{bar}] {done:,}/{self.total:,} {share:4.0%} {rate:,.0f} jobs/s"
            self.stream.write(line + ("\n" if final else ""))
        else:
            self.stream.write(
                f"progress: {done:,}/{self.total:,} jobs ({share:.0%}), {rate:,.0f} jobs/s\n"
            )
        self.stream.flush()
