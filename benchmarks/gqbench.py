"""Running gq's worker and the ceiling loop as subprocesses against a dedicated Redis."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import redis
from common import WORKERS, run_json

import gq

PYTHON = sys.executable


def prefill(url: str, queue: str, n: int, data: bytes = b"x" * 16) -> None:
    """Put ``n`` jobs on ``queue`` with perform_many (not timed)."""
    producer = gq.Producer(queue, url=url)
    step = 10_000
    for start in range(0, n, step):
        producer.perform_many([data] * min(step, n - start))


def delete_queue(url: str, queue: str) -> None:
    client = redis.Redis.from_url(url)
    keys = list(client.scan_iter(match=f"{queue}:*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i : i + 500])


def gq_drain(url: str, n: int, concurrency: int, buffer: int, sleep_ms: float = 0,
             timeout: float = 300, hiredis: bool = True,
             watchdog: bool = True,
             extra_env: dict[str, str] | None = None) -> dict[str, Any]:
    """Pre-fill ``n`` jobs, then run one gq worker process until it has run them all."""
    queue = f"bench-gq-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    try:
        env = {"BENCH_N": str(n), "BENCH_SLEEP_MS": str(sleep_ms)}
        if not hiredis:
            env["BENCH_NO_HIREDIS"] = "1"
        if not watchdog:
            env["BENCH_NO_WATCHDOG"] = "1"
        env.update(extra_env or {})
        return run_json(
            [PYTHON, str(WORKERS / "gq_worker.py"), url, queue, str(concurrency), str(buffer)],
            timeout, env,
        )
    finally:
        delete_queue(url, queue)


def ceiling_drain(url: str, n: int, batch: int, timeout: float = 300) -> dict[str, Any]:
    queue = f"bench-ceiling-{uuid.uuid4().hex[:8]}"
    prefill(url, queue, n)
    try:
        return run_json([PYTHON, str(WORKERS / "ceiling_worker.py"), url, queue, str(batch)],
                        timeout, {"BENCH_N": str(n)})
    finally:
        delete_queue(url, queue)


def strip(result: dict[str, Any]) -> dict[str, Any]:
    """A result without its raw latency list (kept out of the JSON when not needed)."""
    return {k: v for k, v in result.items() if k != "latencies"}
