"""How ``gq consumers`` shows the facts each consumer writes every few seconds (host, pid,
version, handlers running, jobs done, retried and dead, memory, CPU). A consumer without facts (a
curlyq consumer, one that has not beaten yet, or facts that expired) shows "-", and so does
a retried or dead count an earlier gq did not report (it counted both as "failed")."""

from __future__ import annotations

from typing import Any

HEADERS = ("HOST", "PID", "VERSION", "RUNNING", "DONE", "RETRIED", "DEAD", "RSS", "CPU")
# The facts copied into `gq consumers --json` (null when the consumer has none).
JSON_FIELDS = ("host", "pid", "version", "started_at", "concurrency", "running", "jobs_done",
               "jobs_failed", "jobs_retried", "jobs_dead", "rss_bytes", "cpu_percent",
               "updated_at")  # fmt: skip


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
        _cell(facts.get("jobs_retried")),  # a retry is no failure of the job (issue 32)
        _cell(facts.get("jobs_dead")),
        f"{rss / 2**20:.0f}M" if isinstance(rss, (int, float)) else "-",
        f"{cpu:.0f}%" if isinstance(cpu, (int, float)) else "-",
    )


def _cell(value: Any) -> str:
    return "-" if value is None or value == "" else str(value)
