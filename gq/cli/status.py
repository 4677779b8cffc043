"""``gq stats`` and ``gq consumers``: what a queue holds and who works on it."""

from __future__ import annotations

import argparse
import json
from typing import Any

from gq.cli import EXIT_FATAL, EXIT_OK, facts_view, flow_cmd, group_cmd
from gq.cli.common import CliError
from gq.cli.formatting import print_json_lines, table
from gq.display import age, json_safe, local_time, relative
from gq.errors import ConfigurationError, ConsumerAlive
from gq.queue import Queue

# What a line of `gq consumers --json` copies from gq.queue.consumer_report.
REPORT_FIELDS = ("state", "alive", "silent", "silent_for", "in_flight", "recover_at", "recover_in")


def stats(args: argparse.Namespace, queue: Queue) -> int:
    report = queue.stats(args.consumer_timeout)
    shards = report.pop("per_shard", None)
    if args.json:
        print(json.dumps(json_safe({**report, "per_shard": shards} if args.shards else report)))
        return EXIT_OK
    print(_stats_text(report))
    if args.shards and shards:
        print(shard_table(shards))
    return EXIT_OK


def shard_table(reports: list[dict[str, Any]]) -> str:
    """``gq stats --shards``: a line per shard of a sharded queue."""
    fields = ("ready", "scheduled", "in_flight", "dead", "grouped")
    rows = [(r["queue"], *(str(r[f]) for f in fields), "yes" if r["paused"] else "no")
            for r in reports]  # fmt: skip
    return "\n" + table(("SHARD", "READY", "SCHEDULED", "IN FLIGHT", "DEAD", "GROUPED", "PAUSED"),
                        rows)  # fmt: skip


def _stats_text(report: dict[str, Any]) -> str:
    next_ready = ""
    if report["next_ready"] is not None:
        ready_age = report["oldest_ready_age"]
        waited = f", ready for {age(ready_age)}" if ready_age is not None else ""
        next_ready = f"  (next: {report['next_ready']}{waited})"
    rows = [
        ("queue", report["queue"]),
        *_shard_rows(report),
        ("ready", f"{report['ready']}{next_ready}"),
        ("grouped", f"{report['grouped']}  (waiting in groups' lines)"),
        ("scheduled", f"{report['scheduled']}  ({report['due']} due)"),
        ("in flight", str(report["in_flight"])),
        ("dead", str(report["dead"])),
        ("consumers", _consumer_counts(report)),
        *flow_cmd.stats_rows(report),
        *group_cmd.stats_rows(report),
    ]
    return "\n".join(f"{name:<11}{value}" for name, value in rows)


def _shard_rows(report: dict[str, Any]) -> list[tuple[str, str]]:
    """The "shards" row of a sharded queue (its counts below are summed over them)."""
    if "shards" not in report:
        return []
    paused = report["paused_shards"]
    note = f", paused on {paused} of {report['shards']}" if 0 < paused < report["shards"] else ""
    return [("shards", f"{report['shards']} (counts summed; --shards for each){note}")]


def _consumer_counts(report: dict[str, Any]) -> str:
    silent = report.get("consumers_silent", 0)
    alive = report["consumers_alive"] - silent
    return f"{alive} alive, {silent} silent, {report['consumers_dead']} dead"


def consumers(args: argparse.Namespace, queue: Queue) -> int:
    if args.recover is not None:
        return _recover(queue, args.recover, args.force)
    entries = [_entry(report) for report in queue.consumers(args.consumer_timeout)]
    if args.json:
        print_json_lines(entries)
    elif not entries:
        print(f"no consumers registered on queue {queue.name}")
    else:
        _print_consumers(entries, args.consumer_timeout)
    return EXIT_OK


def _entry(report: dict[str, Any]) -> dict[str, Any]:
    """One line of ``gq consumers --json``: gq.queue.consumer_report's entry with the facts
    flattened (null where the consumer wrote none)."""
    facts = report["facts"] or {}
    return {
        "consumer": report["id"],
        "last_heartbeat": report["heartbeat_at"],
        "seconds_since_heartbeat": round(max(0.0, _now(report) - report["heartbeat_at"]), 3),
        **{name: report[name] for name in REPORT_FIELDS},
        **facts_view.json_fields(facts),
        "updated_at": report["updated_at"],
    }


def _print_consumers(entries: list[dict[str, Any]], consumer_timeout: float) -> None:
    rows = [
        (
            e["consumer"],
            *facts_view.cells(e),
            _ago(e["updated_at"], e),
            _ago(e["last_heartbeat"], e),
            str(e["in_flight"]),
            _state(e),
        )
        for e in entries
    ]
    headers = ("CONSUMER", *facts_view.HEADERS, "REPORTED", "HEARTBEAT", "IN FLIGHT", "STATE")
    print(table(headers, rows))
    for e in entries:
        if e["state"] != "alive" and e["in_flight"]:
            print(f"{e['consumer']}: {_recovery(e)}")
    if any(e["state"] != "alive" for e in entries):
        print(
            "(silent: its facts are overdue, its counts are as it last reported; dead: no "
            f"heartbeat for {age(consumer_timeout)}, see --consumer-timeout)"
        )


def _state(entry: dict[str, Any]) -> str:
    if entry["state"] == "alive":
        return "alive"
    return f"{entry['state']}: silent for {age(entry['silent_for'])}"


def _ago(when: float | None, entry: dict[str, Any]) -> str:
    return "-" if when is None else relative(when, _now(entry))


def _now(entry: dict[str, Any]) -> float:
    """The server's time when the report was read: its recovery time is ``recover_in``
    seconds ahead of it (so the ages shown do not depend on this machine's clock)."""
    return float(entry["recover_at"] - entry["recover_in"])


def _recovery(entry: dict[str, Any]) -> str:
    jobs = f"{entry['in_flight']} job(s) in flight, to be recovered"
    if entry["recover_in"] <= 0:
        due = age(-entry["recover_in"])
        return f"{jobs} at a live worker's custodian's next pass (due {due} ago)"
    return f"{jobs} at {local_time(entry['recover_at'])} (in {age(entry['recover_in'])})"


def _recover(queue: Queue, consumer_id: str, force: bool) -> int:
    try:
        moved = queue.recover_consumer(consumer_id, force=force)
    except ConsumerAlive as exc:
        raise CliError(EXIT_FATAL, f"{exc} (--force)") from None
    except ConfigurationError as exc:
        raise CliError(EXIT_FATAL, str(exc)) from None
    print(f"recovered {moved} job(s) of consumer {consumer_id} on queue {queue.name}")
    return EXIT_OK
