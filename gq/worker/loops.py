"""The runner shared by every loop of a consumer: the poller, the heartbeat, the
scheduler, the custodian, the canceller, the reporter and the periodic runner (huey's
shape).

Each loop is one small *step* that does one iteration and says whether to go again at
once (a full batch); the runner owns the interval, the failure count, the backoff and the
abort, so every loop behaves the same and a test can call a step directly.
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import gevent
from gevent import monkey
from gevent.event import Event

from gq.backoff import backoff
from gq.errors import MaxBackoffExceededError, PermissionDeniedError
from gq.store.base import describe

Step = Callable[[], bool]


class Loop:
    """Runs ``step`` until ``stopping`` is set; sleeps ``interval()`` unless the step says again.

    After ``max_attempts()`` failures in a row (0: never) it raises
    ``MaxBackoffExceededError(name, attempt)``; before that each failure is logged and
    followed by a jittered backoff capped at ``max_backoff()``. The callables are read on
    every iteration, so changes to ``consumer.opts`` apply to a running consumer.
    """

    def __init__(
        self,
        name: str,
        step: Step,
        *,
        interval: Callable[[], float],
        max_attempts: Callable[[], int],
        max_backoff: Callable[[], float],
        context: str,
        wake: Event | None = None,
    ) -> None:
        self.name = name
        self.wake = wake  # set: the sleep ends at once (a sooner time to act on)
        self.step = step
        self.interval = interval
        self.max_attempts = max_attempts
        self.max_backoff = max_backoff
        self.stopping = Event()
        self.log = logging.getLogger(f"gq.{name.lower()}")
        self.context = context

    def run(self) -> None:
        failures = 0
        while not self.stopping.is_set():
            try:
                again = self.step()
            except PermissionDeniedError as exc:
                # Retrying cannot help: stop the consumer and say what was refused.
                exc.process = self.name
                self.log.error("%s: %s stopped: %s", self.context, self.name, describe(exc))
                raise
            except Exception as exc:  # noqa: BLE001 - counted, backed off, or ends the run
                failures += 1
                self._after_failure(failures, exc)
                continue
            failures = 0
            if not again:
                self._pause()

    def _pause(self) -> None:
        if self.wake is None:
            self.stopping.wait(self.interval())
            return
        gevent.wait([self.stopping, self.wake], timeout=self.interval(), count=1)
        self.wake.clear()  # the step that follows reads every due time anew

    def _after_failure(self, failures: int, exc: Exception) -> None:
        """Give up after ``max_attempts()`` failures in a row, else back off."""
        limit = self.max_attempts()
        if limit and failures >= limit:
            self.log.error("%s: %s failed %d times in a row, giving up: %s", self.context,
                           self.name, failures, describe(exc))  # fmt: skip
            raise MaxBackoffExceededError(self.name, failures) from exc
        delay = backoff(failures, self.max_backoff())
        self.log.warning("%s: %s failed (%d in a row), retrying in %.2f s: %s", self.context,
                         self.name, failures, delay, describe(exc))  # fmt: skip
        self.stopping.wait(delay)


class ThreadHeartbeat:
    """A second heartbeat on a native OS thread, for when the gevent hub is starved.

    A handler that computes without yielding (CPU-bound code, a C call that holds the
    process) stops every greenlet, the Heartbeat loop included; after
    ``heartbeat_poll_interval + custodian_consumer_timeout`` another consumer's custodian
    would take this consumer for dead and run its jobs again. This thread does not need
    the hub: Python hands it the GIL every few milliseconds, and it beats (``beat``, on a
    client of its own) every ``interval / 4`` while the hub has not run (a ticker greenlet
    sets ``last``; a failing Redis is the Heartbeat loop's business, not this thread's).
    Its failures are only logged: the Heartbeat loop owns the retry and abort policy.

    It gives up once the hub has been blocked for ``give_up_after`` seconds (the consumer
    timeout): code that holds the hub that long (a C call that cannot be interrupted) also
    holds every job buffered behind it, so the lease must end and other consumers recover
    them. A handler that computes in Python past its ``job_timeout`` is interrupted before
    that (gq.worker.watchdog).
    """

    def __init__(
        self, beat: Callable[[], object], interval: float, context: str, give_up_after: float
    ) -> None:
        self._beat = beat
        self.interval = interval
        self.give_up_after = give_up_after
        self._context = context
        self._stopped = False
        self.last = time.monotonic()  # when the hub last ran the ticker
        self.beats = 0  # beats this thread had to give (the hub was starved)
        self._gave_up = False

    def start(self) -> None:
        start_new_thread = monkey.get_original("_thread", "start_new_thread")
        start_new_thread(self._run, ())

    def stop(self) -> None:
        # No join: the thread may be inside a slow Redis call, and joining would block
        # the hub. One late beat after a deregister leaves an empty registration, which
        # the custodians drop.
        self._stopped = True

    def _run(self) -> None:
        sleep = monkey.get_original("time", "sleep")
        log = logging.getLogger("gq.heartbeat")
        while not self._stopped:
            sleep(self.interval / 4)
            blocked = time.monotonic() - self.last
            if self._stopped or blocked < self.interval / 4 or self._give_up(blocked, log):
                continue
            try:
                self._beat()
            except Exception as exc:  # noqa: BLE001 - the Heartbeat loop reports failures that last
                log.debug("%s: thread heartbeat failed: %s", self._context, describe(exc))
                continue
            self.beats += 1
            self._gave_up = False
            if self.beats == 1:
                log.warning(
                    "%s: the gevent hub is blocked (a handler that does not yield?); "
                    "heartbeating from a native thread so that no custodian recovers "
                    "this consumer's jobs while they run",
                    self._context,
                )

    def _give_up(self, blocked: float, log: logging.Logger) -> bool:
        if blocked < self.give_up_after:
            return False
        if not self._gave_up:
            self._gave_up = True
            log.error(
                "%s: the gevent hub has been blocked for %.1f s (more than the consumer "
                "timeout): no more heartbeats, so that other consumers recover this "
                "consumer's jobs",
                self._context,
                blocked,
            )
        return True
