"""The runner shared by the poller and the three maintenance loops (huey's shape).

Each loop is one small *step* that does one iteration and says whether to go again at
once (a full batch); the runner owns the interval, the failure count, the backoff and the
abort, so every loop behaves the same and a test can call a step directly.
"""

from __future__ import annotations

import logging
from typing import Callable

from gevent.event import Event

from gq.backoff import backoff
from gq.errors import MaxBackoffExceededError

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
    ) -> None:
        self.name = name
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
            except Exception as exc:
                failures += 1
                limit = self.max_attempts()
                if limit and failures >= limit:
                    self.log.error(
                        "%s: %s failed %d times in a row, giving up: %s",
                        self.context,
                        self.name,
                        failures,
                        exc,
                    )
                    raise MaxBackoffExceededError(self.name, failures) from exc
                delay = backoff(failures, self.max_backoff())
                self.log.warning(
                    "%s: %s failed (%d in a row), retrying in %.2f s: %r",
                    self.context,
                    self.name,
                    failures,
                    delay,
                    exc,
                )
                self.stopping.wait(delay)
                continue
            failures = 0
            if not again:
                self.stopping.wait(self.interval())
