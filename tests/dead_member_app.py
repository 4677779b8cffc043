"""The app of tests/test_group_dead_members.py's process test, run by real ``gq-worker``
processes (tests.fault_worker): the task "doom" SIGKILLs its own worker every time it runs,
as a job that crashes its worker does, until the recovery limit sends it to dead."""

from __future__ import annotations

import os
import signal

import gq

app = gq.App(queue=os.environ.get("GQ_QUEUE", "dead_members"))


@app.task(name="doom")
def doom() -> None:
    os.kill(os.getpid(), signal.SIGKILL)


@app.task(name="fine")
def fine(x: int) -> int:
    return x
