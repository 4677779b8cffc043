"""The app of benchmarks/results.py and its worker (workers/results_worker.py): noop
tasks that keep their results for ``ttl`` seconds (0: none). No gevent here: the
benchmark's own process imports it too."""

from __future__ import annotations

from typing import Any

import gq


def build(queue: str, ttl: float, probe: Any = None) -> gq.App:
    app = gq.App(queue=queue)
    keep = {"result_ttl": ttl} if ttl > 0 else {}

    @app.task(name="noop", **keep)
    def noop(n: int) -> None:
        if probe is not None:
            probe.start()
            probe.end()

    @app.task(name="step", **keep)
    def step(previous: object = None) -> int:
        return 1

    @app.task(name="total", **keep)
    def total(values: list[int]) -> int:
        return len(values)

    return app
