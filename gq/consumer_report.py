"""What operators see of a queue's consumers (``gq consumers``, ``gq stats``, the
dashboard): each consumer's state (alive, silent, dead) judged by the lease and heartbeat
interval its facts state, and when its jobs in flight may be recovered."""

from __future__ import annotations

from typing import Any

from gq.store.admin import QueueAdmin


def consumer_report(admin: QueueAdmin, consumer_timeout: float) -> list[dict[str, Any]]:
    """One dict per registered consumer of ``admin``'s queue, least recently seen first:
    ``id``, ``name`` (the worker's name, None without), ``in_flight``, ``heartbeat_at``
    (server time of its last heartbeat), ``updated_at`` (of its last facts, None without),
    ``silent_for`` (s since the later of the two), ``silent`` (facts past two report
    intervals and SILENT_SLACK, or heartbeat past its interval and SILENT_SLACK; without
    facts, as curlyq's, past ``consumer_timeout``), ``alive`` (heartbeat within the lease
    its facts state, else ``consumer_timeout``, as ``stats`` counts it), ``state``
    ("alive", "silent" or "dead"), ``recover_at`` (when a
    custodian may take its jobs back: the heartbeat plus the lease its facts state, else
    ``consumer_timeout``), ``recover_in`` (s from the server's now until then; negative once
    due) and ``facts`` (None without). Three round trips, whatever the number of consumers."""
    found = admin.consumers()
    facts = admin.consumer_facts([consumer_id for consumer_id, _, _ in found])
    now = admin.server_time()
    return [_consumer_entry(now, consumer_timeout, *row, fact) for row, fact in zip(found, facts)]


#: Beyond two report intervals, how late a consumer's facts may be before it is "silent"
#: (a round trip, a busy hub).
SILENT_SLACK = 2.0


def _consumer_entry(
    now: float,
    timeout: float,
    consumer_id: str,
    heartbeat_at: float,
    in_flight: int,
    facts: dict[str, Any] | None,
) -> dict[str, Any]:
    given = facts or {}
    updated = _number(given.get("updated_at"))
    interval = _number(given.get("report_interval"))
    beat = _number(given.get("heartbeat_interval"))
    lease = _number(given.get("lease_seconds")) or timeout
    silent_for = max(0.0, now - max(heartbeat_at, updated or 0.0))
    limit = 2 * interval + SILENT_SLACK if interval else timeout
    # Silent too once it missed its heartbeats: its facts may be fresh from a native
    # thread's beat, but a consumer that beats every 5 s and has not for 8 is in trouble.
    missed = beat is not None and now - heartbeat_at > beat + SILENT_SLACK
    alive = now - heartbeat_at <= lease
    return {
        "id": consumer_id,
        "name": given.get("name"),
        "in_flight": in_flight,
        "heartbeat_at": heartbeat_at,
        "updated_at": updated,
        "silent_for": round(silent_for, 3),
        "silent": silent_for > limit or missed,
        "alive": alive,
        "state": _state(alive, silent_for > limit or missed),
        "recover_at": heartbeat_at + lease,
        "recover_in": round(heartbeat_at + lease - now, 3),
        "facts": facts,
    }


def _state(alive: bool, silent: bool) -> str:
    """What the displays call a consumer: "dead" past its lease (``gq stats`` counts it
    so), "silent" while its heartbeats or facts are overdue within it, else "alive"."""
    return "dead" if not alive else "silent" if silent else "alive"


def _number(value: Any) -> float | None:
    """A positive number from JSON facts (written by any version, or by hand), else None."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if value > 0 else None
