"""Handlers of the ``--processes`` tests (tests/test_cli_processes.py).

``leak``: keeps ``job.data`` MiB of written memory for the life of the process (a handler
that leaks), waits 0.3 s (so that a child runs a few jobs between two memory checks, not
all of them), then records the job's id as tests/handlers.py does.
"""

from __future__ import annotations

import gq
from tests import handlers

MIB = 1024 * 1024
_kept: list[bytes] = []


def leak(job: gq.Job) -> None:
    _kept.append(b"\x01" * (int(job.data) * MIB))  # written, so it is resident
    handlers.record(gq.Job(id=job.id, data=b"0.3"))
