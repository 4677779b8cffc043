"""A workflow's id, kept so that a handle can be rebuilt from it (``app.workflow(id)``,
a status endpoint that was given the id): the chain's steps, or the group's home queue,
members and callback, as (queue, id, task) triples, under ``<home>:workflow:<id>`` for as
long as the workflow keeps its results."""

from __future__ import annotations

from typing import Any

import msgpack

from gq.store.keys import QueueKeys

Step = tuple[str, str, str]  # (queue, id, task)


def remember(store: Any, workflow_id: str, shape: dict[str, Any], keep: float) -> None:
    """Keep ``shape`` ({"kind": "chain", "steps": [...]} or a group's) on ``store``'s queue."""
    key = QueueKeys(store.keys.name).workflow(workflow_id)
    store.client.set(key, msgpack.packb(shape), px=max(1, int(keep * 1000)))


def recall(store: Any, queues: list[str], workflow_id: str) -> dict[str, Any] | None:
    """The shape kept for ``workflow_id`` on the first of ``queues`` that has it."""
    pipe: Any = store.client.pipeline(transaction=False)
    for queue in queues:
        pipe.get(QueueKeys(queue).workflow(workflow_id))
    found = next((raw for raw in pipe.execute() if raw is not None), None)
    return None if found is None else dict(msgpack.unpackb(found, raw=False))


def steps(raw: list[Any]) -> list[Step]:
    return [(str(q), str(i), str(t)) for q, i, t in raw]
