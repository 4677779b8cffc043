"""Fault scenario 15 in a loop, timed: ``python -m tests.sigstop_probe [RUNS] [--early]``.

A worker holding jobs is SIGSTOPped until another worker recovers them, then SIGCONTed;
each run prints how long after the SIGCONT the stopped worker logged its "stood still"
report. ``--early`` stops it the moment its first jobs are in flight (a busy wait), mostly
before all its greenlets have run once: the window where scenario 15 used to miss the
report. A run with no report after ``GQ_PROBE_SLOW`` seconds (default 5) gets the
worker's native thread stacks (SIGUSR2) and greenlet stacks (SIGUSR1) written into its
log (see tests/fault_worker.py), and that log is kept and its path printed. A diagnostic
for a person, not a test.
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from tests import faults
from tests.faults import FAST, Fleet, Server
from tests.helpers import wait_until

SLOW = float(os.environ.get("GQ_PROBE_SLOW") or 5)
GIVE_UP = 30.0
REPORT = "stood still for"


def one_run(workdir: Path, early: bool) -> float | None:
    """Seconds from the SIGCONT to the report; None if it never came."""
    server = Server(workdir)
    server.start()
    fleet = Fleet(server, workdir, [*FAST, "--custodian-consumer-timeout", "2"])
    try:
        paused = fleet.start("--concurrency", "5", "--buffer-size", "10")
        fleet.enqueue(200, b"0.5")
        rescuer = fleet.start("--concurrency", "20")
        consumer = paused.consumer_id()
        enough = 1 if early else 10
        wait_until(lambda: len(fleet.inflight(consumer)) >= enough, 15, 0 if early else 0.01)
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: "dead consumer(s)" in rescuer.output, 20)
        finally:
            paused.proc.send_signal(signal.SIGCONT)
        return _time_the_report(paused)
    finally:
        fleet.close()
        faults.stop_all(server.proc)


def _time_the_report(worker: faults.Worker) -> float | None:
    continued = time.monotonic()
    dumped = False
    while time.monotonic() - continued < GIVE_UP:
        if REPORT in worker.output:
            return time.monotonic() - continued
        if not dumped and time.monotonic() - continued > SLOW:
            dumped = True
            worker.proc.send_signal(signal.SIGUSR2)  # threads, even with the hub blocked
            time.sleep(0.2)
            worker.proc.send_signal(signal.SIGUSR1)  # greenlets, once the hub runs
        time.sleep(0.02)
    print(f"  no report: {worker.log}")
    return None


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--early"]
    runs = int(args[0]) if args else 10
    missed = 0
    for run in range(runs):
        tmp = Path(tempfile.mkdtemp(prefix="gq-probe-"))
        took = one_run(tmp, early="--early" in sys.argv)
        if took is None:
            missed += 1  # its logs stay for a look
            print(f"run {run + 1}: no 'stood still' report within {GIVE_UP:g} s", flush=True)
            continue
        shutil.rmtree(tmp, ignore_errors=True)
        print(f"run {run + 1}: 'stood still' {took:.2f} s after SIGCONT", flush=True)
    print(f"{missed} of {runs} runs without the report")


if __name__ == "__main__":
    main()
