"""gq's async tasks as a benchmark row: pre-fill a queue with task jobs of an ``async def``
task, then run one worker process of workers/async_task_worker.py until all ran."""

from __future__ import annotations

import subprocess
import uuid
from typing import Any

from common import WORKERS, run_json
from gqbench import PYTHON, delete_queue


def gq_async_task_drain(url: str, n: int, concurrency: int, buffer: int, sleep_ms: float,
                        task: str, timeout: float = 300) -> dict[str, Any]:
    queue = f"bench-gqa-{uuid.uuid4().hex[:8]}"
    worker = [PYTHON, str(WORKERS / "async_task_worker.py"), url, queue, str(concurrency),
              str(buffer)]
    try:
        subprocess.run([*worker, task, str(n)], check=True, capture_output=True, timeout=timeout)
        return run_json(worker, timeout, {"BENCH_N": str(n), "BENCH_SLEEP_MS": str(sleep_ms)})
    finally:
        delete_queue(url, queue)
