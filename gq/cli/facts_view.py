"""How ``gq consumers`` shows the facts each consumer writes with its heartbeat (host, pid,
version, handlers running, jobs done, memory, CPU). A consumer without facts (a curlyq
consumer, one that has not beaten yet, or facts that expired) shows "-"."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import redis

from gq.store.admin import QueueAdmin

HEADERS = ("HOST", "PID", "VERSION", "RUNNING", "DONE", "RSS", "CPU")
# The facts copied into `gq consumers --json` (null when the consumer has none).
JSON_FIELDS = ("host", "pid", "version", "started_at", "concurrency", "running", "jobs_done",
               "jobs_failed", "rss_bytes", "cpu_percent", "updated_at")  # fmt: skip


def read_facts(rq: QueueAdmin, consumer_ids: Sequence[str]) -> list[dict[str, Any]]:
    """Each consumer's facts ({} when it has none or they cannot be read), one round trip."""
    try:
        found = rq.facts(consumer_ids)
    except redis.exceptions.NoPermissionError:  # an ACL rule from before facts existed
        return [{} for _ in consumer_ids]
    return [_parse(raw) for raw in found]


def _parse(raw: bytes | None) -> dict[str, Any]:
    if raw is None:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:  # written by something else: show nothing rather than fail
        return {}
    return value if isinstance(value, dict) else {}


def json_fields(facts: dict[str, Any]) -> dict[str, Any]:
    return {name: facts.get(name) for name in JSON_FIELDS}


def cells(facts: dict[str, Any]) -> tuple[str, ...]:
    """The table cells under HEADERS."""
    rss, cpu = facts.get("rss_bytes"), facts.get("cpu_percent")
    return (
        _cell(facts.get("host")),
        _cell(facts.get("pid")),
        _cell(facts.get("version")),
        _cell(facts.get("running")),
        _cell(facts.get("jobs_done")),
        f"{rss / 2**20:.0f}M" if isinstance(rss, (int, float)) else "-",
        f"{cpu:.0f}%" if isinstance(cpu, (int, float)) else "-",
    )


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)
