"""Handlers of benchmarks/processes.py, run by ``gq-worker procs_handlers:NAME --processes N``.

``noop`` does nothing; ``cpu`` spins BENCH_CPU_LOOPS iterations of pure Python (about 1 ms,
calibrated by the benchmark), never yielding: the handler that needs more than one core.
"""

import os

import gq

LOOPS = int(os.environ.get("BENCH_CPU_LOOPS", "20000"))


def spin(loops: int) -> int:
    total = 0
    for i in range(loops):
        total += i * i
    return total


def noop(job: gq.Job) -> None:
    pass


def cpu(job: gq.Job) -> None:
    spin(LOOPS)
