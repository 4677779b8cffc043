"""``gq stats`` and ``gq consumers``: what a queue holds and who works on it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gq import job as jobs
from gq.cli import EXIT_OK, facts_view
from gq.cli.formatting import age, local_time, print_json_lines, relative, table
from gq.redis_admin import QueueAdmin


def stats(args: argparse.Namespace, rq: QueueAdmin) -> int:
    report, ready_age = _stats(rq, args.consumer_timeout)
    print(json.dumps(report) if args.json else _stats_text(report, ready_age))
    return EXIT_OK


def _stats(rq: QueueAdmin, consumer_timeout: float) -> tuple[dict[str, Any], float | None]:
    """The report of ``gq stats --json``, and the seconds the next job has been ready."""
    counts = rq.counts()
    consumers = rq.consumers()
    now = rq.server_time()
    alive = sum(1 for _, seen, _ in consumers if now - seen <= consumer_timeout)
    head = rq.oldest_ready()
    ready_at = _ready_at(head[1]) if head else None
    ready_age = None if ready_at is None else now - ready_at
    report = {
        "queue": rq.keys.name,
        **counts,
        "in_flight": sum(inflight for _, _, inflight in consumers),
        "consumers_alive": alive,
        "consumers_dead": len(consumers) - alive,
        "next_ready": head[0] if head else None,
        # Seconds the next job has been ready; None for none, or a message without
        # ReadyAt (written by curlyq).
        "oldest_ready_age": None if ready_age is None else round(max(0.0, ready_age), 3),
    }
    return report, ready_age


def _stats_text(report: dict[str, Any], ready_age: float | None) -> str:
    next_ready = ""
    if report["next_ready"] is not None:
        waited = f", ready for {age(ready_age)}" if ready_age is not None else ""
        next_ready = f"  (next: {report['next_ready']}{waited})"
    rows = [
        ("queue", report["queue"]),
        ("ready", f"{report['ready']}{next_ready}"),
        ("scheduled", f"{report['scheduled']}  ({report['due']} due)"),
        ("in flight", str(report["in_flight"])),
        ("dead", str(report["dead"])),
        ("consumers", f"{report['consumers_alive']} alive, {report['consumers_dead']} dead"),
    ]
    return "\n".join(f"{name:<11}{value}" for name, value in rows)


def _ready_at(message: bytes | None) -> float | None:
    try:
        return None if message is None else jobs.decode_ready_at(message)
    except jobs.MessageDecodeError:
        return None


def consumers(args: argparse.Namespace, rq: QueueAdmin) -> int:
    found = rq.consumers()
    now = rq.server_time()
    facts = facts_view.read_facts(rq, [consumer_id for consumer_id, _, _ in found])
    entries = [
        _entry(consumer, fact, now, args.consumer_timeout) for consumer, fact in zip(found, facts)
    ]
    if args.json:
        print_json_lines(entries)
    elif not entries:
        print(f"no consumers registered on queue {rq.keys.name}")
    else:
        _print_consumers(entries, facts, now, args.consumer_timeout)
    return EXIT_OK


def _entry(
    consumer: tuple[str, float, int], facts: dict[str, Any], now: float, consumer_timeout: float
) -> dict[str, Any]:
    """One line of ``gq consumers --json``."""
    consumer_id, seen, inflight = consumer
    return {
        "consumer": consumer_id,
        "last_heartbeat": seen,
        "seconds_since_heartbeat": round(max(0.0, now - seen), 3),
        "in_flight": inflight,
        "alive": now - seen <= consumer_timeout,
        **facts_view.json_fields(facts),
    }


def _print_consumers(
    entries: list[dict[str, Any]], facts: list[dict[str, Any]], now: float, consumer_timeout: float
) -> None:
    rows = [
        (
            e["consumer"],
            *facts_view.cells(fact),
            local_time(e["last_heartbeat"]),
            relative(e["last_heartbeat"], now),
            str(e["in_flight"]),
            "alive" if e["alive"] else "dead",
        )
        for e, fact in zip(entries, facts)
    ]
    headers = ("CONSUMER", *facts_view.HEADERS, "LAST HEARTBEAT", "", "IN FLIGHT", "STATE")
    print(table(headers, rows))
    if not all(e["alive"] for e in entries):
        print(
            f"(dead: silent for more than {age(consumer_timeout)}, see "
            "--consumer-timeout; a live worker's custodian recovers their jobs)"
        )
