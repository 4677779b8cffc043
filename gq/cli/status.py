"""``gq stats`` and ``gq consumers``: what a queue holds and who works on it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gq.cli import EXIT_OK, facts_view, flow_cmd
from gq.cli.formatting import age, local_time, print_json_lines, relative, table
from gq.queue import stats as queue_stats
from gq.store.admin import QueueAdmin


def stats(args: argparse.Namespace, rq: QueueAdmin) -> int:
    report = queue_stats(rq, args.consumer_timeout)
    print(json.dumps(report) if args.json else _stats_text(report))
    return EXIT_OK


def _stats_text(report: dict[str, Any]) -> str:
    next_ready = ""
    if report["next_ready"] is not None:
        ready_age = report["oldest_ready_age"]
        waited = f", ready for {age(ready_age)}" if ready_age is not None else ""
        next_ready = f"  (next: {report['next_ready']}{waited})"
    rows = [
        ("queue", report["queue"]),
        ("ready", f"{report['ready']}{next_ready}"),
        ("scheduled", f"{report['scheduled']}  ({report['due']} due)"),
        ("in flight", str(report["in_flight"])),
        ("dead", str(report["dead"])),
        ("consumers", f"{report['consumers_alive']} alive, {report['consumers_dead']} dead"),
        *flow_cmd.stats_rows(report),
    ]
    return "\n".join(f"{name:<11}{value}" for name, value in rows)


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
