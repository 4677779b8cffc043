"""The child side of ``gq-worker --processes N``: one consumer run by the supervisor.

A child is an ordinary ``gq-worker`` (a fresh interpreter that patched first) started
with the hidden ``--supervisor-pid`` and ``--child-slot`` flags. Compared with a lone
worker it differs in four ways, all here:

- signals: SIGINT is ignored (Ctrl-C reaches the whole process group, and the
  supervisor passes it on once, as SIGTERM); SIGTERM asks for a graceful stop and a
  repeat changes nothing (systemd's default KillMode signals every process of the
  unit *and* the supervisor forwards: that must not become a forced stop); SIGQUIT,
  sent by the supervisor on a second signal, stops at once;
- recycling: past ``--max-jobs-per-child`` finished jobs or ``--max-memory-per-child``
  MiB of resident memory it stops gracefully (stops fetching, gives back its buffer,
  finishes its running jobs) and exits with ``EXIT_RECYCLE``, which tells the
  supervisor "start another" rather than "crashed";
- it never outlives the supervisor: on Linux the kernel sends it SIGTERM when the
  supervisor dies (``PR_SET_PDEATHSIG``), and everywhere it checks ``getppid()``;
- its log lines carry its slot, pid and consumer id.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import random
import signal
import sys
from typing import Any

import gevent
import psutil

from gq.cli import EXIT_OK, EXIT_USAGE
from gq.cli.common import CliError
from gq.worker.consumer import Consumer
from gq.worker.processor import Handler

log = logging.getLogger("gq.worker.child")

# Exit code of a child that stopped to be replaced (billiard's EX_RECYCLE, 0x9B): outside
# gq-worker's 0-3, and distinct from a crash.
EXIT_RECYCLE = 155
# How often the child compares its resident memory with the limit: reading it costs a
# /proc read, and a leak that matters grows over many jobs, not within seconds.
MEMORY_CHECK_INTERVAL = 2.0
# How often it compares its finished jobs with the limit (reading two counters): a child
# overshoots the limit by what it finishes in this time, plus the jobs already running.
JOBS_CHECK_INTERVAL = 0.02
# How often it checks that the supervisor is still its parent (where prctl is missing).
PARENT_CHECK_INTERVAL = 1.0
PR_SET_PDEATHSIG = 1
# Blocked while the supervisor starts a child, unblocked by the child once it handles them.
STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGQUIT}
MIB = 1024 * 1024


def check_flags(args: argparse.Namespace) -> None:
    """Recycling flags only mean something under a supervisor: refuse them alone."""
    if args.supervisor_pid is None:
        for flag in ("max_jobs_per_child", "max_memory_per_child"):
            if getattr(args, flag) is not None:
                name = "--" + flag.replace("_", "-")
                raise CliError(EXIT_USAGE, f"{name} needs --processes N")


def child_for(args: argparse.Namespace, consumer: Consumer) -> Child | None:
    """The supervised-child behaviour for this run, or None for a lone worker."""
    if args.supervisor_pid is None:
        return None
    return Child(
        consumer,
        slot=args.child_slot,
        parent_pid=args.supervisor_pid,
        max_jobs=args.max_jobs_per_child,
        max_memory_mb=args.max_memory_per_child,
    )


class Child:
    def __init__(
        self,
        consumer: Consumer,
        *,
        slot: int,
        parent_pid: int,
        max_jobs: int | None,
        max_memory_mb: int | None,
    ) -> None:
        self.consumer = consumer
        self.slot = slot
        self.parent_pid = parent_pid
        # Jitter (gunicorn's max_requests_jitter): children started together do not all
        # recycle together and leave the queue without workers at once.
        self.max_jobs = max_jobs + random.randint(0, max_jobs // 10) if max_jobs else None
        self.max_memory = max_memory_mb * MIB if max_memory_mb else None
        self.recycling = False
        self._stopping = False
        tag_logs(f"slot={slot} pid={os.getpid()}", f"consumer={consumer.id}")

    @property
    def exit_code(self) -> int:
        return EXIT_RECYCLE if self.recycling else EXIT_OK

    def start(self) -> list[gevent.Greenlet]:
        """Arm the parent-death signal and start the watchers (killed by the caller)."""
        die_with_parent()
        watchers = [self._spawn("gq-parent", self._watch_parent)]
        if self.max_jobs:
            watchers.append(self._spawn("gq-recycle-jobs", self._watch_jobs))
        if self.max_memory:
            watchers.append(self._spawn("gq-recycle-memory", self._watch_memory))
        return watchers

    def consume(self, handler: Handler) -> None:
        """``consumer.run`` with a supervised child's signals (see the module docstring)."""
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # a pending one is discarded
        watchers = [
            gevent.signal_handler(signal.SIGTERM, self._on_term),
            gevent.signal_handler(signal.SIGQUIT, self._on_quit),
        ]
        # Blocked since the supervisor started this process: one that came meanwhile
        # is delivered now, to the handlers above.
        signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
        try:
            self.consumer.run(handler)
        finally:
            for watcher in watchers:
                watcher.cancel()
            # The stop is over and the process is leaving: a late SIGTERM must not kill it
            # with the default action (the supervisor would count a crash). Ignored, not
            # blocked: a mask is per thread, and the heartbeat thread would take it.
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            signal.signal(signal.SIGQUIT, signal.SIG_IGN)

    def _on_term(self) -> None:
        if self._stopping:
            log.info("SIGTERM again: already stopping gracefully (SIGQUIT stops now)")
            return
        log.info("SIGTERM: stopping gracefully")
        self._stop()

    def _on_quit(self) -> None:
        log.warning("SIGQUIT: stopping now; running jobs stay in flight for recovery")
        self.consumer.stop_now()

    def _stop(self) -> None:
        self._stopping = True
        self.consumer.stop()

    def _recycle(self, reason: str) -> None:
        if self._stopping:
            return
        log.info("recycling: %s; stopping gracefully, a new child takes this slot", reason)
        self.recycling = True
        self._stop()

    def _watch_jobs(self) -> None:
        limit = self.max_jobs or 0
        while not self._stopping:
            stats = self.consumer.stats
            finished = stats.done + stats.failed
            if finished >= limit:
                self._recycle(f"{finished} jobs finished (--max-jobs-per-child {limit})")
                return
            gevent.sleep(JOBS_CHECK_INTERVAL)

    def _watch_memory(self) -> None:
        process, limit = psutil.Process(), self.max_memory or 0
        while not self._stopping:
            rss = process.memory_info().rss
            if rss > limit:
                self._recycle(
                    f"resident memory {rss / MIB:.0f} MiB over --max-memory-per-child "
                    f"{limit // MIB}"
                )
                return
            gevent.sleep(MEMORY_CHECK_INTERVAL)

    def _watch_parent(self) -> None:
        # The portable twin of PR_SET_PDEATHSIG, and the cover for a supervisor that died
        # before prctl was armed: an orphan is re-parented, so getppid() changes.
        while os.getppid() == self.parent_pid:
            gevent.sleep(PARENT_CHECK_INTERVAL)
        if not self._stopping:
            log.warning("supervisor pid=%d is gone: stopping gracefully", self.parent_pid)
            self._stop()

    @staticmethod
    def _spawn(name: str, target: Any) -> gevent.Greenlet:
        greenlet = gevent.spawn(target)
        greenlet.name = name
        return greenlet


def die_with_parent() -> None:
    """Ask Linux to send this process SIGTERM when its parent dies (a graceful stop)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0) != 0:
            log.debug("prctl(PR_SET_PDEATHSIG) failed: errno %d", ctypes.get_errno())


class _Tag(logging.Filter):
    """Prefixes every emitted line with the child's slot and pid, and with its consumer
    id unless the line names it already (the consumer's own lines do)."""

    def __init__(self, process: str, consumer: str) -> None:
        super().__init__()
        self.process = process
        self.consumer = consumer

    def filter(self, record: logging.LogRecord) -> bool:
        if not getattr(record, "gq_tagged", False):
            with contextlib.suppress(Exception):  # a bad %-format is the formatter's to report
                message = record.getMessage()
                tag = (
                    self.process if self.consumer in message else f"{self.process} {self.consumer}"
                )
                record.msg, record.args = f"[{tag}] {message}", None
                record.gq_tagged = True
        return True


def tag_logs(process: str, consumer: str) -> None:
    """Tag the lines of this process's log handlers (set up by logs.configure)."""
    for handler in logging.getLogger().handlers:
        handler.addFilter(_Tag(process, consumer))
