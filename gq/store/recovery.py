"""An operator's recovery of one consumer's jobs (``gq consumers --recover``, the
dashboard's consumer row): what a custodian does at the end of the consumer's lease, now."""

from __future__ import annotations

from collections.abc import Callable

from gq.options import ConsumerOptions
from gq.store.base import ScriptedQueue
from gq.store.jobs import RedisQueue

#: The in-flight key an operator's recovery names as its own (recover.lua never recovers
#: the caller's): no consumer has this id.
OPERATOR = "gq-operator"


def until_empty(recover_batch: Callable[[], int]) -> int:
    """Run ``recover_batch`` (recover.lua takes a bounded batch a call) until it moves
    nothing: how many jobs it moved in all. Shared by the operator's recovery and a
    worker's take-over of a crashed namesake's jobs (gq.worker.identity)."""
    total = moved = recover_batch()
    while moved:
        moved = recover_batch()
        total += moved
    return total


def recover_now(store: ScriptedQueue, consumer_id: str) -> int:
    """Hand back every job in flight of ``consumer_id`` on ``store``'s queue, a batch at a
    time, with the default limits (recoveries in a row, the dead set's size and age);
    how many jobs were moved."""
    queue = RedisQueue(store.client, store.keys.name)
    opts = ConsumerOptions()
    key = queue.keys.inflight(consumer_id)
    return until_empty(lambda: queue.recover(
        OPERATOR,
        [key],
        timeout=0,
        max_jobs=opts.custodian_max_jobs,
        max_recoveries=opts.job_max_recoveries,
        dead_max_jobs=opts.dead_max_jobs,
        dead_max_age=opts.dead_max_age,
    ))  # fmt: skip
