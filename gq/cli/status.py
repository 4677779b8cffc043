"""``gq stats`` and ``gq consumers``: what a queue holds and who works on it."""

from __future__ import annotations

import argparse
import json

from gq.cli import EXIT_OK, facts_view, flow_cmd
from gq.cli.formatting import age, local_time, print_json_lines, relative, table
from gq.queue import stats as queue_stats
from gq.redis_admin import QueueAdmin

# A consumer is dead once silent for heartbeat_poll_interval + custodian_consumer_timeout,
# 60 + 60 seconds by default; workers run with other values need --consumer-timeout.
DEFAULT_CONSUMER_TIMEOUT = 120.0


def stats(args: argparse.Namespace, rq: QueueAdmin) -> int:
    report = queue_stats(rq, args.consumer_timeout)
    if args.json:
        print(json.dumps(report))
        return EXIT_OK
    next_ready = f"  (next: {report['next_ready']}" if report["next_ready"] else ""
    if next_ready:
        waited = report["oldest_ready_age"]
        next_ready += f", ready for {age(waited)})" if waited is not None else ")"
    rows = [
        ("queue", report["queue"]),
        ("ready", f"{report['ready']}{next_ready}"),
        ("scheduled", f"{report['scheduled']}  ({report['due']} due)"),
        ("in flight", str(report["in_flight"])),
        ("dead", str(report["dead"])),
        ("consumers", f"{report['consumers_alive']} alive, {report['consumers_dead']} dead"),
        *flow_cmd.stats_rows(report),
    ]
    print("\n".join(f"{name:<11}{value}" for name, value in rows))
    return EXIT_OK


def consumers(args: argparse.Namespace, rq: QueueAdmin) -> int:
    found = rq.consumers()
    now = rq.server_time()
    facts = facts_view.read_facts(rq, [consumer_id for consumer_id, _, _ in found])
    entries = [
        {
            "consumer": consumer_id,
            "last_heartbeat": seen,
            "seconds_since_heartbeat": round(max(0.0, now - seen), 3),
            "in_flight": inflight,
            "alive": now - seen <= args.consumer_timeout,
            **facts_view.json_fields(fact),
        }
        for (consumer_id, seen, inflight), fact in zip(found, facts)
    ]
    if args.json:
        print_json_lines(entries)
        return EXIT_OK
    if not entries:
        print(f"no consumers registered on queue {rq.keys.name}")
        return EXIT_OK
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
            f"(dead: silent for more than {age(args.consumer_timeout)}, see "
            "--consumer-timeout; a live worker's custodian recovers their jobs)"
        )
    return EXIT_OK
