"""The poller gets a turn while half the buffer still waits, even when no handler yields.

gevent does not preempt: handlers that never yield (short CPU jobs) ran the whole buffer
before the poller got a turn, and a woken poller also waited for every idle handler
greenlet to have had its own. The next fetch then left only once the buffer was empty,
and the handlers idled for its round trip (with results on, a fetch that writes a batch
of outcomes: the drain idled about a quarter of its time). Now, with an "auto" buffer, a
handler lets the others run when the buffer is down to half, and idle handlers wait for
jobs one at a time, so the poller (woken by the first job taken) runs then.
"""

from __future__ import annotations

import gevent
import pytest

import gq
from gq.options import ConsumerOptions
from gq.store.keys import QueueKeys
from gq.worker.processor import Processor
from tests.helpers import wait_until


class _NoRedis:
    """The queue a Processor is built with; nothing here reaches Redis (no acker runs)."""

    keys = QueueKeys("q")


def _jobs(prefix: str, n: int) -> list[gq.Job]:
    made = [gq.Job(f"{prefix}{i}", b"") for i in range(n)]
    for job in made:
        job.queue = "q"
    return made


def _processor(opts: ConsumerOptions, ran: list[str]) -> Processor:
    return Processor(
        {"q": _NoRedis()},  # type: ignore[dict-item]
        "c", opts, ran.append, lambda error: None, "test",  # (ran.append never yields)
    )  # fmt: skip


def _poller_woke_with(processor: Processor) -> list[int]:
    """As gq's poller does: put a fetch's 1,000 jobs, then wait at once for room (600 or
    fewer buffered); how many were buffered when it woke."""
    woke_with: list[int] = []

    def poller() -> None:
        processor.put(_jobs("j", 1000))
        processor.wait_for_room(lambda: int(processor.buffered() <= 600))
        woke_with.append(processor.buffered())

    gevent.spawn(poller).join(10)
    return woke_with


@pytest.mark.parametrize("concurrency", [1, 100])
def test_a_poller_waiting_for_room_runs_while_half_the_buffer_waits(concurrency: int) -> None:
    ran: list[str] = []
    # poller_buffer_size "auto"
    processor = _processor(ConsumerOptions(processor_concurrency=concurrency), ran)
    processor.put(_jobs("warm", 100))  # starts the handler greenlets; then they idle
    wait_until(lambda: len(ran) == 100)

    woke_with = _poller_woke_with(processor)
    wait_until(lambda: len(ran) == 1100)
    assert woke_with, "the poller never woke"
    assert woke_with[0] == 500, f"the poller ran with {woke_with[0]} of 1000 jobs buffered"


def test_a_fixed_buffer_is_run_whole_before_the_poller_gets_a_turn() -> None:
    # curlyq's fixed buffer keeps its batches whole (halved, a small buffer lost more to
    # twice the fetches than it gained: benchmarks/README.md).
    ran: list[str] = []
    opts = ConsumerOptions(processor_concurrency=100, poller_buffer_size=1000)
    woke_with = _poller_woke_with(_processor(opts, ran))
    wait_until(lambda: len(ran) == 1000)
    assert woke_with == [0]
