"""A gq Consumer run in a greenlet of the (monkey-patched) test process, with timings far
below the option floors, for the interop and asyncio-producer tests."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Callable

import gevent

import gq

# Set on consumer.opts after construction (tests may go below the floors, SPEC 2).
FAST = {
    "heartbeat_poll_interval": 0.3,
    "custodian_consumer_timeout": 1.0,
    "custodian_poll_interval": 0.2,
    # A Go consumer states no lease: these tests' custodian takes one silent for as long as
    # its own short lease for dead, as every custodian did before leases were stated.
    "custodian_unstated_lease": 1.3,
    "scheduler_poll_interval": 0.1,
    "poller_poll_duration": 0.5,
}


@contextmanager
def consuming(
    queue: str, url: str, handler: Callable[[gq.Job], object], **options: Any
) -> Iterator[gq.Consumer]:
    """Run a Consumer on ``queue`` while the block runs; stop it cleanly at the end and
    fail if ``run`` raised."""
    consumer = gq.Consumer(queue, url=url, **{k: v for k, v in options.items() if k not in FAST})
    for name, value in {**FAST, **options}.items():
        setattr(consumer.opts, name, value)
    greenlet = gevent.spawn(consumer.run, handler)
    try:
        yield consumer
    finally:
        consumer.stop()
        greenlet.join(timeout=15)
        if not greenlet.ready():
            greenlet.kill()
            raise AssertionError("the gq consumer did not stop within 15 s")
    greenlet.get()  # re-raise what run raised, if anything
