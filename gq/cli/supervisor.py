"""``gq-worker HANDLER --processes N``: N worker processes under one supervisor.

The supervisor is a plain process: no monkey-patching, no consumer, one Redis PING at
start. It checks what it can once (usage, handler import, options, Redis), then starts
each child as a fresh interpreter running ``gq-worker`` with the same arguments plus
``--supervisor-pid``/``--child-slot`` (gq/cli/supervised.py is the child's side). Fresh
interpreters rather than fork: a fork of a patched process must re-initialise the gevent
hub and inherits its threads, greenlets, connections and RNG state (gevent's maintainer
advises against it); a fresh interpreter patches first like any gq-worker, and its memory
is its own, so a memory limit measures the child and nothing shared. The cost is one
start-up per child (measured in benchmarks/processes.py).

Its loop sleeps on a self-pipe that signals (SIGINT, SIGTERM, SIGCHLD) write to, so it
reacts at once to a signal or a dead child and otherwise wakes once a second: a crash
loop cannot spin the CPU.

- A child that died is restarted after a jittered backoff (gq/backoff.py) that grows
  while children keep dying young; one that asks to be recycled is replaced at once.
  Children that die within START_SECONDS of their start MAX_START_FAILURES times in a
  row mean the workers cannot start: everything stops and the supervisor exits 1. A
  child exiting 2 (bad usage) stops everything with exit 2.
- First SIGINT/SIGTERM: no more restarts, SIGTERM to every child (a graceful stop).
  Second: SIGQUIT to every child (stop now), SIGKILL to any still alive KILL_AFTER
  seconds later. Third: SIGKILL at once.
- Exit code: 0 only when every child's last exit was clean (0, or a recycle); 2 on a
  child's usage error; otherwise 1.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import selectors
import signal
import subprocess
import sys
import time
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from gq.backoff import backoff
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE, logs
from gq.cli.common import CliError, open_queue
from gq.cli.options import consumer_options
from gq.cli.supervised import EXIT_RECYCLE, STOP_SIGNALS
from gq.cli.worker_args import load_handler, parse, worker_queues
from gq.errors import ConfigurationError
from gq.options import ConsumerOptions
from gq.store.connection import redact_url

log = logging.getLogger("gq.supervisor")

# How a child is started; the test suite's launcher points this at itself.
CHILD_COMMAND = [sys.executable, "-m", "gq.cli.worker"]
START_SECONDS = 5.0  # a child that dies sooner than this after its start failed to start
MAX_START_FAILURES = 5  # ... this many times in a row: the workers cannot start, give up
STABLE_SECONDS = 60.0  # a child that ran this long resets its slot's restart backoff
RESTART_BACKOFF_CAP = 30.0
KILL_AFTER = 10.0  # seconds between SIGQUIT (second signal) and SIGKILL
TICK = 1.0  # the longest the loop sleeps without a signal


def main(argv: list[str]) -> int:
    args = parse(argv)  # bad usage exits 2 here
    secrets = logs.url_secrets(args.url)
    logs.configure(args.log_level, args.log_format, secrets)
    try:
        names = _check(args)
    except CliError as exc:
        print(f"gq-worker: error: {logs.scrub(exc.message, secrets)}", file=sys.stderr)
        return exc.code
    log.info(
        "gq-worker supervisor pid=%d starting %d process(es): queue=%s handler=%s url=%s%s",
        os.getpid(),
        args.processes,
        ",".join(names),
        args.handler,
        redact_url(args.url),
        " burst" if args.burst else "",
    )
    return Supervisor(argv, args.processes, args.burst).run()


def _check(args: argparse.Namespace) -> list[str]:
    """Everything a child would refuse at start, checked once before any child starts.

    The handler is imported here, in a process that is not monkey-patched: the module
    only has to import and name a callable; it never runs here."""
    if args.url.startswith("fakeredis:"):
        raise CliError(
            EXIT_USAGE, "--processes needs a Redis server: fakeredis:// lives in one process"
        )
    handler = load_handler(args.handler)
    names = _queue_names(args, handler)
    try:
        ConsumerOptions(**consumer_options(args))
    except ConfigurationError as exc:
        raise CliError(EXIT_USAGE, str(exc)) from None
    open_queue(args.url, names[0], max_connections=1).client.close()  # exit 3 if not there
    return names


def _queue_names(args: argparse.Namespace, handler: object) -> list[str]:
    specs = worker_queues(args, handler)
    return [specs] if isinstance(specs, str) else list(specs)


@dataclass
class Slot:
    """One place for a child; its process changes when a child is replaced."""

    index: int
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0
    failures: int = 0  # deaths in a row of children that ran less than STABLE_SECONDS
    young_deaths: int = 0  # deaths in a row within START_SECONDS of the start
    restart_at: float | None = None
    finished: bool = False  # a --burst child that ran out of work: not restarted
    last_code: int | None = None


class Supervisor:
    def __init__(self, argv: list[str], processes: int, burst: bool) -> None:
        self.argv = list(argv)
        self.burst = burst
        self.slots = [Slot(i) for i in range(processes)]
        self.signals_received = 0
        self.stopping = False
        self.fatal: int | None = None
        self.kill_at: float | None = None
        self._signals: deque[int] = deque()

    # -- the loop --------------------------------------------------------------------------

    def run(self) -> int:
        read_end, write_end = os.pipe()
        os.set_blocking(read_end, False)
        os.set_blocking(write_end, False)
        previous = self._install_signals(write_end)
        try:
            with selectors.DefaultSelector() as selector:
                selector.register(read_end, selectors.EVENT_READ)
                self._loop(selector, read_end)
        finally:
            self._abandon()
            self._restore_signals(previous)
            os.close(read_end)
            os.close(write_end)
        code = self.exit_code()
        log.info("supervisor pid=%d: every child stopped; exit code %d", os.getpid(), code)
        return code

    def _loop(self, selector: selectors.BaseSelector, read_end: int) -> None:
        for slot in self.slots:
            self._spawn(slot)
        while not self.finished():
            if selector.select(self._timeout()):
                _drain(read_end)
            self._handle_signals()
            self._reap()
            self._restart_due()
            self._escalate()

    def finished(self) -> bool:
        return all(slot.proc is None and slot.restart_at is None for slot in self.slots)

    def exit_code(self) -> int:
        if self.fatal is not None:
            return self.fatal
        clean = all(slot.last_code in (EXIT_OK, EXIT_RECYCLE) for slot in self.slots)
        return EXIT_OK if clean else EXIT_FATAL

    def _timeout(self) -> float:
        now = time.monotonic()
        deadlines = [slot.restart_at for slot in self.slots if slot.restart_at is not None]
        if self.kill_at is not None:
            deadlines.append(self.kill_at)
        return max(0.0, min([now + TICK, *deadlines]) - now)

    # -- signals -----------------------------------------------------------------------------

    def _install_signals(self, write_end: int) -> tuple[dict[signal.Signals, Any], int]:
        def on_signal(signum: int, frame: FrameType | None) -> None:
            self._signals.append(signum)

        watched = (signal.SIGINT, signal.SIGTERM, signal.SIGCHLD)
        previous = {sig: signal.signal(sig, on_signal) for sig in watched}
        # The C-level handler writes the signal's number here, waking the select at once.
        return previous, signal.set_wakeup_fd(write_end)

    @staticmethod
    def _restore_signals(previous: tuple[dict[signal.Signals, Any], int]) -> None:
        handlers, wakeup_fd = previous
        signal.set_wakeup_fd(wakeup_fd)
        for sig, handler in handlers.items():
            signal.signal(sig, handler)

    def _handle_signals(self) -> None:
        while self._signals:
            signum = self._signals.popleft()
            if signum in (signal.SIGINT, signal.SIGTERM):
                self._on_stop_signal(signal.Signals(signum).name)

    def _on_stop_signal(self, name: str) -> None:
        self.signals_received += 1
        if self.signals_received == 1:
            log.info("supervisor: %s: stopping every child gracefully (again to stop now)", name)
            self._stop_all()
        elif self.signals_received == 2:
            log.warning("supervisor: second %s: stopping every child now", name)
            self._send_all(signal.SIGQUIT)
            self.kill_at = time.monotonic() + KILL_AFTER
        else:
            log.warning("supervisor: %s again: killing every child", name)
            self._send_all(signal.SIGKILL)

    def _stop_all(self) -> None:
        self.stopping = True
        for slot in self.slots:
            slot.restart_at = None
        self._send_all(signal.SIGTERM)

    def _send_all(self, signum: int) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.returncode is None:
                slot.proc.send_signal(signum)

    def _escalate(self) -> None:
        if self.kill_at is not None and time.monotonic() >= self.kill_at:
            self.kill_at = None
            alive = [slot for slot in self.slots if slot.proc is not None]
            for slot in alive:
                log.warning("slot %d: child pid=%d still running: SIGKILL", slot.index, _pid(slot))
            self._send_all(signal.SIGKILL)

    def _abandon(self) -> None:
        """Only after an unexpected error in the loop: leave no child running without us."""
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is None:
                log.error("slot %d: supervisor failing: SIGTERM to pid=%d", slot.index, _pid(slot))
                slot.proc.terminate()

    # -- children ----------------------------------------------------------------------------

    def _spawn(self, slot: Slot) -> None:
        command = [
            *CHILD_COMMAND,
            *self.argv,
            "--supervisor-pid",
            str(os.getpid()),
            "--child-slot",
            str(slot.index),
        ]
        slot.restart_at = None
        slot.started = time.monotonic()
        try:
            with stop_signals_blocked():
                slot.proc = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        except OSError as exc:  # no memory, no pids left: as good as dying at start
            log.error("slot %d: cannot start a child: %s", slot.index, exc)
            self._crashed(slot, 0.0)
            return
        log.info("slot %d: started child pid=%d", slot.index, slot.proc.pid)

    def _reap(self) -> None:
        for slot in self.slots:
            if slot.proc is not None and slot.proc.poll() is not None:
                self._exited(slot)

    def _exited(self, slot: Slot) -> None:
        assert slot.proc is not None
        code, pid = slot.proc.returncode, slot.proc.pid
        ran = time.monotonic() - slot.started
        slot.proc, slot.last_code = None, code
        log.log(
            logging.INFO if code in (EXIT_OK, EXIT_RECYCLE) else logging.WARNING,
            "slot %d: child pid=%d %s after %.1f s",
            slot.index,
            pid,
            describe(code),
            ran,
        )
        if self.stopping:
            return
        if code == EXIT_RECYCLE:
            slot.failures = slot.young_deaths = 0
            self._spawn(slot)
        elif code == EXIT_OK and self.burst:
            slot.finished = True
        elif code == EXIT_USAGE:
            self._give_up(EXIT_USAGE, f"child pid={pid} refused its arguments (exit 2)")
        else:
            self._crashed(slot, ran)

    def _crashed(self, slot: Slot, ran: float) -> None:
        slot.failures = slot.failures + 1 if ran < STABLE_SECONDS else 1
        slot.young_deaths = slot.young_deaths + 1 if ran < START_SECONDS else 0
        if slot.young_deaths >= MAX_START_FAILURES:
            self._give_up(
                EXIT_FATAL,
                f"slot {slot.index}: {slot.young_deaths} children in a row died within "
                f"{START_SECONDS:g} s of their start",
            )
            return
        delay = backoff(slot.failures - 1, RESTART_BACKOFF_CAP)
        slot.restart_at = time.monotonic() + delay
        log.info("slot %d: restarting in %.1f s", slot.index, delay)

    def _give_up(self, code: int, reason: str) -> None:
        log.error("supervisor: %s; stopping every child and exiting %d", reason, code)
        self.fatal = code
        self.signals_received = max(self.signals_received, 1)  # a signal now stops at once
        self._stop_all()

    def _restart_due(self) -> None:
        now = time.monotonic()
        for slot in self.slots:
            if slot.restart_at is not None and slot.restart_at <= now and not self.stopping:
                self._spawn(slot)


@contextlib.contextmanager
def stop_signals_blocked() -> Iterator[None]:
    """Block the stop signals around starting a child, which inherits the mask across
    exec and unblocks them once its handlers are in place (supervised.Child.consume):
    a SIGTERM sent while it imports waits for it instead of killing it mid-start."""
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def describe(code: int) -> str:
    """A child's exit status in words: ``exited with code 1``, ``killed by SIGKILL``."""
    if code == EXIT_RECYCLE:
        return "recycled (exit code 155)"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with code {code}"


def _pid(slot: Slot) -> int:
    return slot.proc.pid if slot.proc is not None else 0


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 512):
            pass
    except BlockingIOError:
        pass
