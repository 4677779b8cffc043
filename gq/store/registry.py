"""What consumers report about themselves, read back (SPEC section 10): their facts
(``Q:facts:<id>``), the throughput history (``Q:history:<hour>``) and the registry of
queue names (``gq:queues``). The operator's handle (``gq.store.admin.QueueAdmin``) is
one of these."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from gq.store.base import RedisClient, ScriptedQueue, as_text, each_key
from gq.store.keys import QUEUE_REGISTRY

# The most queue names read from the registry (a bound on one SSCAN walk).
MAX_REGISTERED_QUEUES = 10_000
# The per-minute counts a consumer writes (``<kind>:<minute>`` in ``Q:history:<hour>``).
HISTORY_KINDS = ("done", "failed", "retried")


class ConsumerReports(ScriptedQueue):
    """The facts and the history of queue ``name``'s consumers."""

    def consumer_facts(self, consumer_ids: Sequence[str]) -> list[dict[str, Any] | None]:
        """The facts each consumer wrote with its heartbeat; None where there are none
        (expired, a curlyq consumer, or not JSON)."""
        return [_json_object(raw) for raw in self.facts(consumer_ids)]

    def heartbeats(self) -> list[tuple[str, float]]:
        """Every registered consumer and its last heartbeat (server s), least recent first;
        one ZRANGE, whatever its in-flight keys hold."""
        prefix = self.keys.inflight("")
        reply = self.client.zrange(self.keys.consumers, 0, -1, withscores=True)
        members = [(as_text(member), float(score)) for member, score in reply]
        return [(k[len(prefix) :] if k.startswith(prefix) else k, at) for k, at in members]

    def history(self, now: float, minutes: int = 60) -> list[tuple[int, int, int, int]]:
        """(minute start, done, failed, retried) for the ``minutes`` minutes up to the one
        holding ``now`` (unix seconds), oldest first; one round trip over the hour keys
        involved. "failed" counts failed attempts, retried ones included (consumers of an
        earlier gq wrote no "retried": their minutes count every failure as dead)."""
        last = int(now // 60) * 60
        starts = [last - 60 * back for back in range(minutes - 1, -1, -1)]
        hours: dict[int, list[int]] = {}
        for minute in starts:
            hours.setdefault(minute - minute % 3600, []).append(minute)
        plan = [
            (hour, [f"{kind}:{m}" for kind in HISTORY_KINDS for m in in_hour])
            for hour, in_hour in hours.items()
        ]
        pipe = self.client.pipeline(transaction=False)
        for hour, fields in plan:
            pipe.hmget(self.keys.history(hour), fields)
        counts: dict[str, int] = {}
        for (_, fields), values in zip(plan, pipe.execute()):
            counts.update((f, _count(v)) for f, v in zip(fields, values))
        return [_minute(counts, m) for m in starts]

    def facts(self, consumer_ids: Sequence[str]) -> list[bytes | None]:
        """The stored facts (JSON) of each consumer, None where there are none."""
        if not consumer_ids:
            return []
        values = each_key(self.client, "get", map(self.keys.facts, consumer_ids))
        return [None if value is None else bytes(value) for value in values]

    def history_fields(self, hours: Sequence[int]) -> dict[str, int]:
        """The per-minute fields (``done:<minute>``, ``failed:<minute>``) of the given hours."""
        merged: dict[str, int] = {}
        for reply in each_key(self.client, "hgetall", map(self.keys.history, hours)):
            merged.update({as_text(field): int(value) for field, value in reply.items()})
        return merged


def _minute(counts: dict[str, int], m: int) -> tuple[int, int, int, int]:
    done, failed, retried = (counts.get(f"{kind}:{m}", 0) for kind in HISTORY_KINDS)
    return m, done, failed, retried


def registered_queues(client: RedisClient, limit: int = MAX_REGISTERED_QUEUES) -> list[str]:
    """The queue names in the registry (``gq:queues``), sorted; at most ``limit`` of them,
    read with SSCAN so that a huge registry cannot block Redis."""
    names: set[str] = set()
    for member in client.sscan_iter(QUEUE_REGISTRY, count=1000):
        names.add(as_text(member))
        if len(names) >= limit:
            break
    return sorted(names)


def _json_object(raw: Any) -> dict[str, Any] | None:
    if raw is None:
        return None
    try:
        value = json.loads(raw)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _count(raw: Any) -> int:
    try:
        return max(0, int(raw)) if raw is not None else 0
    except ValueError:
        return 0
