"""Sharded queues (docs/deployment.md, "One queue over many masters"): one logical queue
``emails`` made of N plain curlyq queues, its shards, each under a hash tag of its own
chosen by its slot so that the shards spread over a Cluster's masters.

- **Names**: shard i of N is ``{emails~i~k}``, k the first of 0, 1, 2... for which the
  tag's slot (CRC16, as Redis Cluster hashes it) falls in the i-th of N equal ranges of
  the 16384 slots. A Cluster whose masters hold equal ranges (``redis-cli --cluster
  create`` makes them) then has shard i on master ``i * masters // N``.
- **Routing**: a job goes to shard ``crc32(key) mod N`` (zlib/IEEE CRC-32 of the key's
  UTF-8 bytes), its key being its id, or for an id ``<uuid>.<suffix>`` (a workflow's
  step, member or callback) the 36 characters of the uuid, so that a workflow's jobs
  share its shard. The task layer routes grouped and unique jobs by their group or lock
  (gq/tasks/sharding.py) and mints their ids to agree.
- **Descriptor**: ``gq:sharded:<name>``, a hash (``shards``, ``queues``, ``version``,
  ``routing``) written by the first producer that declares the queue, read by workers and
  operators that name it (docs/decisions.md).
"""

from __future__ import annotations

import functools
import re
import zlib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

from gq.errors import ConfigurationError
from gq.store.base import as_text
from gq.store.keys import sharded_key

#: The most shards of one queue: far more than any Cluster's masters.
MAX_SHARDS = 256
#: The layout's version (names and routing as this module's docstring says).
VERSION = "1"
ROUTING = "crc32"
_HEX = frozenset("0123456789abcdefABCDEF")


@dataclass(frozen=True)
class Layout:
    """The shards of logical queue ``name``, in order."""

    name: str
    queues: tuple[str, ...]

    def for_key(self, key: str) -> str:
        """The shard of routing key ``key``."""
        return self.queues[shard_index(key, len(self.queues))]

    def for_id(self, job_id: str) -> str:
        """The shard a job routed by its id lives on."""
        return self.for_key(route_key(job_id))


def check_shards(name: str, shards: object) -> int:
    """``shards`` as a count of shards of ``name``, or ``ConfigurationError``."""
    if isinstance(shards, bool) or not isinstance(shards, int) or not 1 <= shards <= MAX_SHARDS:
        raise ConfigurationError(
            f"shards of queue {name!r} must be an int from 1 to {MAX_SHARDS}, not {shards!r}"
        )
    if "{" in name or "}" in name:
        raise ConfigurationError(
            f"a sharded queue's name has no braces (each shard has a hash tag of its own), "
            f"not {name!r}: name it {name.replace('{', '').replace('}', '')!r}"
        )
    return shards


@functools.lru_cache(maxsize=256)
def layout(name: str, shards: int) -> Layout:
    """The layout of ``name`` over ``shards`` shards (names chosen by slot)."""
    check_shards(name, shards)
    return Layout(name, tuple(shard_name(name, i, shards) for i in range(shards)))


def shard_name(name: str, index: int, shards: int) -> str:
    """Shard ``index`` of ``shards``: the first tag ``name~index~k`` in its slot range."""
    low = index * REDIS_CLUSTER_HASH_SLOTS // shards
    high = (index + 1) * REDIS_CLUSTER_HASH_SLOTS // shards
    k = 0
    while not low <= key_slot(f"{name}~{index}~{k}".encode()) < high:
        k += 1
    return f"{{{name}~{index}~{k}}}"


def shard_index(key: str, shards: int) -> int:
    """The routing function: CRC-32 (IEEE) of ``key``'s UTF-8 bytes, modulo ``shards``."""
    return zlib.crc32(key.encode()) % shards


def route_key(job_id: str) -> str:
    """A job id's routing key: the id, or the uuid of a workflow's ``<uuid>.<suffix>``."""
    if len(job_id) > 36 and job_id[36] == "." and _is_uuid(job_id[:36]):
        return job_id[:36]
    return job_id


def _is_uuid(text: str) -> bool:
    dashes = all(text[i] == "-" for i in (8, 13, 18, 23))
    return dashes and all(ch in _HEX for ch in text.replace("-", ""))


def positions(queues: Sequence[str]) -> dict[str, list[int]]:
    """Queue -> the positions in ``queues`` (each job's queue) that name it, in order."""
    parts: dict[str, list[int]] = {}
    for position, queue in enumerate(queues):
        parts.setdefault(queue, []).append(position)
    return parts


# -- the descriptor --------------------------------------------------------------------


def declare(client: Any, name: str, shards: int) -> Layout:
    """Record ``name``'s layout in Redis unless it is there, and return the layout Redis
    holds: a count the queue had before a reshard (gq/store/reshard.py) follows Redis;
    any other count is refused (``ConfigurationError``)."""
    key = sharded_key(name)
    if client.hsetnx(key, "shards", str(shards)):
        client.hset(key, mapping=descriptor(layout(name, shards)))
        return layout(name, shards)
    stored, history = (as_text(v or b"") for v in client.hmget(key, ["shards", "history"]))
    return layout(name, held_count(name, shards, stored, history))


async def adeclare(client: Any, name: str, shards: int) -> Layout:
    """``declare`` on a ``redis.asyncio`` client (gq.aio's producers)."""
    key = sharded_key(name)
    if await client.hsetnx(key, "shards", str(shards)):
        await client.hset(key, mapping=descriptor(layout(name, shards)))
        return layout(name, shards)
    found = await client.hmget(key, ["shards", "history"])
    stored, history = (as_text(v or b"") for v in found)
    return layout(name, held_count(name, shards, stored, history))


def held_count(name: str, shards: int, stored: str, history: str) -> int:
    """The count Redis holds (``stored``), when ``shards`` is it or a count the queue had
    before a reshard (``history``, gq/store/reshard.py); else ``ConfigurationError``."""
    if stored != str(shards) and str(shards) not in history.split():
        raise ConfigurationError(
            f"queue {name!r} has {stored} shards in Redis ({sharded_key(name)}), not "
            f"{shards}: every producer and worker must give the same count (or reshard it: "
            "gq shards --queue NAME --reshard COUNT)"
        )
    return int(stored)


def descriptor(plan: Layout) -> dict[str, str]:
    """The descriptor's fields besides the count."""
    return {"queues": " ".join(plan.queues), "version": VERSION, "routing": ROUTING}


def declared(client: Any, names: Iterable[str]) -> dict[str, int]:
    """The shard counts Redis holds for those of ``names`` that are sharded (one round
    trip; the descriptors live outside any queue's slot)."""
    names = [name for name in names if "{" not in name]
    if not names:
        return {}
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.hget(sharded_key(name), "shards")
    found = {name: raw for name, raw in zip(names, pipe.execute()) if raw is not None}
    return {name: check_shards(name, int(as_text(raw))) for name, raw in found.items()}


def forget(client: Any, name: str) -> None:
    """Delete ``name``'s descriptor (tests, and an operator who removed the queue)."""
    client.delete(sharded_key(name))


_SHARD_NAME = re.compile(r"^\{(.+)~[0-9]+~[0-9]+\}$")


def fold(client: Any, names: Iterable[str]) -> list[str]:
    """Queue names (the registry's, where workers register each shard) with the shards of
    a declared sharded queue replaced by its logical name, in order, each once."""
    names = list(names)
    logical = {n: m.group(1) for n in names for m in [_SHARD_NAME.fullmatch(n)] if m}
    sharded = declared(client, dict.fromkeys(logical.values()))
    return list(dict.fromkeys(
        logical[n] if logical.get(n) in sharded else n for n in names
    ))  # fmt: skip
