"""The Redis side of periodic schedules added at runtime (gq/schedules.py): a hash of
records (``QueueKeys.periodic_runtime``) and one of paused names
(``QueueKeys.periodic_paused``). Each change is one command on one hash, atomic as it
is; a removal also forgets the schedule's cursor (as ``gq periodic delete`` does)."""

from __future__ import annotations

from typing import Any

from gq.store.base import as_text
from gq.store.keys import QueueKeys


def put(client: Any, queue: str, name: str, record: bytes) -> bool:
    """Keep ``record`` as schedule ``name``; True if it is new, False if it replaced one."""
    return bool(client.hset(QueueKeys(queue).periodic_runtime, name, record))


def exists(client: Any, queue: str, name: str) -> bool:
    return bool(client.hexists(QueueKeys(queue).periodic_runtime, name))


def set_paused(client: Any, queue: str, name: str, paused: bool) -> None:
    key = QueueKeys(queue).periodic_paused
    if paused:
        client.hset(key, name, "1")
    else:
        client.hdel(key, name)


def remove(client: Any, queue: str, name: str) -> bool:
    """Forget schedule ``name``: its record, its pause and its cursor; whether it existed."""
    k = QueueKeys(queue)
    found = client.hdel(k.periodic_runtime, name)
    client.hdel(k.periodic_paused, name)
    for key in (k.periodic, k.periodic_rules, k.periodic_enqueued):
        client.hdel(key, name)
    return bool(found)


def read(client: Any, queue: str) -> dict[str, tuple[bytes, bool]]:
    """Every runtime schedule of ``queue``: name -> (record, paused)."""
    k = QueueKeys(queue)
    records = client.hgetall(k.periodic_runtime)
    paused = {as_text(name) for name in client.hgetall(k.periodic_paused)}
    return {as_text(name): (bytes(value), as_text(name) in paused)
            for name, value in records.items()}  # fmt: skip
