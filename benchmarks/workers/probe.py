"""Counts handler calls inside a benchmark worker and writes the figures once N are done.

Every worker (gq's, the ceiling loop's and each peer's) calls ``start()`` when a handler
begins and ``end()`` when it returns, so all of them are timed the same way: from the
first handler's start to the N-th handler's end, with the process's own CPU and memory.
Settings come from the environment: BENCH_N, BENCH_OUT (a file for the JSON), BENCH_SLEEP_MS.
"""

from __future__ import annotations

import json
import os
import resource
import time
from typing import Any, Callable

import psutil

_proc = psutil.Process()


class Probe:
    def __init__(self) -> None:
        self.n = int(os.environ.get("BENCH_N", "1000"))
        self.out = os.environ.get("BENCH_OUT")
        self.sleep = float(os.environ.get("BENCH_SLEEP_MS", "0")) / 1000.0
        # Stop counting after this many seconds even if fewer than N jobs ran (slow peers).
        self.deadline = float(os.environ.get("BENCH_DEADLINE", "0"))
        self.count = 0
        self.running = 0
        self.max_running = 0
        self.t0 = 0.0
        self.cpu0 = 0.0
        self.rss_base = _proc.memory_info().rss
        self.rss_peak = self.rss_base
        self.latencies: list[float] = []
        self.result: dict[str, Any] | None = None
        self.on_done: Callable[[], None] | None = None

    def start(self) -> None:
        if not self.t0:
            self.t0 = time.perf_counter()
            times = os.times()
            self.cpu0 = times.user + times.system
            self.rss_base = _proc.memory_info().rss
        self.running += 1
        if self.running > self.max_running:
            self.max_running = self.running
            if self.running % 500 == 0:
                self.rss_peak = max(self.rss_peak, _proc.memory_info().rss)

    def end(self, latency: float | None = None) -> None:
        self.running -= 1
        self.count += 1
        if latency is not None:
            self.latencies.append(latency)
        # All done, or (looked at every 16th job) past the deadline with no result yet.
        if self.count == self.n or (
            self.deadline
            and self.result is None
            and not self.count % 16
            and time.perf_counter() - self.t0 > self.deadline
        ):
            self.finish()

    def finish(self) -> None:
        if self.result is not None:
            return
        elapsed = time.perf_counter() - self.t0
        times = os.times()
        rss = _proc.memory_info().rss
        self.result = {
            "n": self.count,
            "capped": self.count < self.n,
            "elapsed": elapsed,
            "rate": self.count / elapsed if elapsed > 0 else 0.0,
            "cpu_s": times.user + times.system - self.cpu0,
            "cpu_us_per_job": (times.user + times.system - self.cpu0) / self.count * 1e6,
            "rss_base_mb": self.rss_base / 2**20,
            "rss_peak_mb": max(self.rss_peak, rss) / 2**20,
            "ru_maxrss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "max_running": self.max_running,
            "latencies": self.latencies,
            "pid": os.getpid(),
        }
        if self.out:
            tmp = self.out + ".tmp"
            with open(tmp, "w") as fh:
                json.dump(self.result, fh)
            os.replace(tmp, self.out)
        if self.on_done is not None:
            self.on_done()
