"""Which queue a job id belongs to, for a Result rebuilt from an id alone (a status
endpoint: ``app.result(job_id)``, Django's ``get_result``), SPEC section 16.

Two round trips whatever the number of queues, no scan: the first asks every queue at
once whether it holds the id's message, has it in dead, or kept its outcome under an
earlier gq's key, and lists its live result slots; the second asks those slots for the
id. An id is a queue's when any of these answers yes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gq.store.keys import QueueKeys


def locate(client: Any, job_id: str, queues: Sequence[str]) -> str | None:
    """The first of ``queues`` that knows ``job_id`` (in their order), else None."""
    keys = [QueueKeys(name) for name in queues]
    pipe: Any = client.pipeline(transaction=False)
    for k in keys:
        pipe.hexists(k.data, job_id)
        pipe.zscore(k.dead, job_id)
        pipe.exists(k.result(job_id))
        pipe.zrange(k.result_slots, 0, -1)
    replies = pipe.execute()
    slots: list[tuple[str, Any]] = []
    for i, k in enumerate(keys):
        message, dead, earlier, listed = replies[4 * i : 4 * i + 4]
        if message or dead is not None or earlier:
            return k.name  # (a queue before it in the order knew nothing of it)
        slots.extend((k.name, slot) for slot in listed)
    return _in_slots(client, job_id, slots)


def _in_slots(client: Any, job_id: str, slots: list[tuple[str, Any]]) -> str | None:
    """The queue of the first live result slot that holds ``job_id``'s record."""
    if not slots:
        return None
    pipe: Any = client.pipeline(transaction=False)
    for _, slot in slots:
        pipe.hexists(slot, job_id)
    for (name, _), found in zip(slots, pipe.execute()):
        if found:
            return name
    return None
