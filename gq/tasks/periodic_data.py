"""The data of a periodic entry's job (``app.periodic``): its task's envelope, written once
for every occurrence."""

from __future__ import annotations

import time
from typing import Any

from gq.tasks.options import TaskOptions
from gq.tasks.task import Signature


def periodic_data(sig: Signature[Any]) -> bytes:
    """The envelope of a periodic entry's job: its task's options, but ``expires`` and
    ``unique_for``, which are relative to an enqueue and so have no meaning in data
    written once for every occurrence."""
    from gq.tasks import envelope
    from gq.tasks.options import wire

    task = sig.task
    binds = task.binder.check(sig.args, sig.kwargs)
    if binds is not None:
        raise TypeError(f"task {task.name}: the arguments do not bind: {binds}")
    options = TaskOptions(
        retries=task.options.retries, backoff=task.options.backoff, timeout=task.options.timeout
    )
    return envelope.encode(task.name, sig.args, sig.kwargs, wire(options, time.time, None))
