"""Rescue for a test whose code never yields to the gevent hub (a busy loop).

The per-test ``gevent.Timeout`` needs the hub to run; a greenlet spinning in pure Python
keeps it from ever running, and the session would hang until CI kills it. This native
thread raises ``WatchdogTimeout`` asynchronously in the thread of the tests once a phase
outlives its limit plus a grace period: it lands in whatever code is spinning, the hub
runs again, and the ordinary timeout fails the test.
"""

from __future__ import annotations

import ctypes
import time
from collections.abc import Iterator
from contextlib import contextmanager

from gevent import monkey

# The real primitives: the patched ones would run a second gevent hub in this thread.
_sleep = monkey.get_original("time", "sleep")
_start_new_thread = monkey.get_original("_thread", "start_new_thread")
_get_ident = monkey.get_original("_thread", "get_ident")


class WatchdogTimeout(BaseException):
    """Raised into spinning code; a BaseException so that `except Exception` cannot eat it."""

    message = "the test kept the gevent hub from running past its timeout"

    def __str__(self) -> str:
        return self.message


class Watchdog:
    def __init__(self, interval: float = 0.05) -> None:
        self._target = _get_ident()  # the thread that runs the tests and the hub
        self._interval = interval
        self._armed: tuple[float, type[WatchdogTimeout]] | None = None
        self.fired = False
        _start_new_thread(self._run, ())

    @contextmanager
    def armed(self, seconds: float, message: str) -> Iterator[None]:
        """Interrupt the body if it still runs after ``seconds``; sets ``fired`` if it did."""
        exc = type("WatchdogTimeout", (WatchdogTimeout,), {"message": message})
        self.fired = False
        self._armed = (time.monotonic() + seconds, exc)
        try:
            yield
        finally:
            self._armed = None
            if self.fired:  # drop it if it is still pending (stuck in C): not for later code
                ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(self._target), None)

    def _run(self) -> None:
        while True:
            _sleep(self._interval)
            armed = self._armed
            if armed is None or time.monotonic() < armed[0] or self._armed is not armed:
                continue
            self._armed = None  # once per phase
            self.fired = True
            ctypes.pythonapi.PyThreadState_SetAsyncExc(
                ctypes.c_ulong(self._target), ctypes.py_object(armed[1])
            )
