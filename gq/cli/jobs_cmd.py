"""``gq enqueue``, ``gq dead list|retry|delete`` and ``gq scheduled list|delete``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator, Sequence
from itertools import islice
from typing import Any, Callable, TypeVar

from gq import job as jobs
from gq.bulk import reset_attempts
from gq.cli import EXIT_FATAL, EXIT_OK, EXIT_USAGE, bulk_cmd
from gq.cli.common import CliError
from gq.cli.formatting import (
    ERROR_CHARS,
    MessageView,
    data_fields,
    data_preview,
    print_json_lines,
    read_message,
    shorten,
    table,
)
from gq.display import local_time, relative
from gq.errors import JobAlreadyExistsError
from gq.producer import Producer
from gq.queue import Queue
from gq.sharded import ShardedQueue
from gq.store.admin import Entry, QueueAdmin
from gq.store.base import MAX_BATCH
from gq.tasks import envelope

T = TypeVar("T")
Entries = list[Entry]
Operation = Callable[[Sequence[str]], list[bool]]
Listed = tuple[str, float, MessageView]  # id, killed at or due at, what its message says

# -- enqueue -----------------------------------------------------------------------------


def enqueue(args: argparse.Namespace, queue: Queue) -> int:
    # A sharded queue's jobs go to its shards, routed by id as every producer does: its
    # logical name's own keys are read by no worker.
    sharded = queue.layout if isinstance(queue, ShardedQueue) else None
    producer = Producer(queue.name, client=queue.client,
                        shards=None if sharded is None else len(sharded.queues))  # fmt: skip
    payloads = _payloads_of(args)
    try:
        if args.id is not None:
            data = next(payloads, None)
            if data is None or next(payloads, None) is not None:
                raise CliError(EXIT_USAGE, "--id needs exactly one job")
            print(_perform(producer, args, jobs.Job(id=args.id, data=data)))
        elif args.at is None and args.after is None:
            for batch in _batches(payloads):
                print("\n".join(producer.perform_many(batch)))
        else:
            for data in payloads:
                print(_perform(producer, args, jobs.Job(data=data)))
    except JobAlreadyExistsError as exc:
        print(f"gq: error: {exc} (until it is acknowledged or deleted)", file=sys.stderr)
        return EXIT_FATAL
    return EXIT_OK


def _perform(producer: Producer, args: argparse.Namespace, job: jobs.Job) -> str:
    if args.at is not None:
        return producer.perform_at(args.at, job)
    if args.after is not None:
        return producer.perform_after(args.after, job)
    return producer.perform(job)


def _payloads_of(args: argparse.Namespace) -> Iterator[bytes]:
    if args.task is not None:
        return _task_payload(args)
    if args.args is not None or args.kwargs is not None:
        raise CliError(EXIT_USAGE, "--args and --kwargs need --task NAME")
    return _payloads(args.data)


def json_array(text: str) -> list[Any]:
    """argparse type of ``--args``: a JSON array."""
    return _json_of(text, list, "a JSON array, such as '[\"https://a\", 3]'")


def json_object(text: str) -> dict[str, Any]:
    """argparse type of ``--kwargs``: a JSON object."""
    return _json_of(text, dict, 'a JSON object, such as \'{"tenant": "acme"}\'')


def _json_of(text: str, kind: type[T], wanted: str) -> T:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON ({exc}): {text!r}; give {wanted}") from None
    if not isinstance(value, kind):
        found = _JSON_NAMES.get(type(value), type(value).__name__)
        raise argparse.ArgumentTypeError(f"a JSON {found} is not {wanted}: {text!r}")
    return value


_JSON_NAMES = {dict: "object", list: "array", str: "string", int: "number", float: "number",
               bool: "boolean", type(None): "null"}  # fmt: skip


def _task_payload(args: argparse.Namespace) -> Iterator[bytes]:
    """The one task job ``--task`` describes, its envelope built (and so checked) before
    anything is written."""
    if args.data:
        raise CliError(EXIT_USAGE, "--task takes its arguments from --args/--kwargs, not DATA")
    if not args.task:
        raise CliError(EXIT_USAGE, "--task needs a task name")
    try:
        data = envelope.encode(args.task, args.args or [], args.kwargs or {})
    except (TypeError, ValueError, OverflowError) as exc:  # an int past 64 bits, ...
        raise CliError(EXIT_USAGE, f"cannot build task {args.task!r}: {exc}") from None
    return iter([data])


def _payloads(arguments: Sequence[str]) -> Iterator[bytes]:
    """Each argument, or else each non-empty line of stdin, as bytes."""
    if arguments:
        yield from (arg.encode("utf-8", "surrogateescape") for arg in arguments)
        return
    if sys.stdin.isatty():
        print("gq: reading jobs from stdin, one a line; end with Ctrl-D", file=sys.stderr)
    for line in sys.stdin.buffer:
        line = line.rstrip(b"\r\n")
        if line:
            yield line


def _batches(payloads: Iterator[bytes]) -> Iterator[list[bytes]]:
    batch = list(islice(payloads, MAX_BATCH))
    while batch:
        yield batch
        batch = list(islice(payloads, MAX_BATCH))


# -- dead and scheduled --------------------------------------------------------------------


def dead_list(args: argparse.Namespace, queue: Queue) -> int:
    entries = queue.store.dead_jobs(args.limit)
    return _list(args, queue.store, entries, "dead", "KILLED", "killed_at")


def scheduled_list(args: argparse.Namespace, queue: Queue) -> int:
    entries = queue.store.scheduled_jobs(args.limit)
    return _list(args, queue.store, entries, "scheduled", "DUE", "due_at")


def _list(
    args: argparse.Namespace,
    rq: QueueAdmin,
    entries: Entries,
    state: str,
    when_header: str,
    when_field: str,
) -> int:
    listed = [(job_id, when, read_message(message)) for job_id, when, message in entries]
    if args.json:
        print_json_lines([_json_line(entry, when_field) for entry in listed])
    elif not listed:
        print(f"no {state} jobs on queue {rq.keys.name}")
    else:
        _print_table(rq, listed, state, when_header)
    return EXIT_OK


def _json_line(entry: Listed, when_field: str) -> dict[str, Any]:
    job_id, when, view = entry
    return {
        "id": job_id,
        when_field: when,
        "attempt": view.attempt,
        "error": view.error or view.problem,
        **data_fields(view.data),
    }


def _print_table(rq: QueueAdmin, listed: list[Listed], state: str, when_header: str) -> None:
    now = rq.server_time()
    rows = [
        (
            job_id,
            relative(when, now),
            local_time(when),
            "?" if view.attempt is None else str(view.attempt),
            data_preview(view.data),
            shorten(view.error or view.problem or "", ERROR_CHARS),
        )
        for job_id, when, view in listed
    ]
    print(table(("ID", when_header, "", "ATTEMPT", "DATA", "ERROR"), rows))
    total = rq.counts()[state]
    if total > len(listed):
        print(f"... {len(listed)} of {total} {state} jobs shown (--limit N for more)")


def dead_retry(args: argparse.Namespace, queue: Queue) -> int:
    rq = queue.store

    def retry(ids: Sequence[str]) -> list[bool]:
        messages = rq.messages(ids) if args.reset_attempts else [None] * len(ids)
        return rq.retry_dead(
            [(job_id, reset_attempts(message)) for job_id, message in zip(ids, messages)]
        )

    return _apply(args, queue, retry, "dead", "retried")


def dead_delete(args: argparse.Namespace, queue: Queue) -> int:
    return _apply(args, queue, queue.store.delete_dead, "dead", "deleted")


def scheduled_delete(args: argparse.Namespace, queue: Queue) -> int:
    return _apply(args, queue, queue.store.delete_scheduled, "scheduled", "deleted")


def scheduled_run(args: argparse.Namespace, queue: Queue) -> int:
    return _apply(args, queue, queue.store.run_scheduled, "scheduled", "queued")


# What each action's past tense is the past of (bulk_cmd.by_filter's verbs).
_VERBS = {"retried": "retry", "deleted": "delete", "queued": "run"}


def _apply(
    args: argparse.Namespace,
    queue: Queue,
    operation: Operation,
    state: str,
    verb: str,
) -> int:
    """Run ``operation`` on the given ids, with --all on every job of the set, or on the
    jobs the filter flags match (gq/cli/bulk_cmd.py); --dry-run counts, with filters or
    --all."""
    rq = queue.store
    filtered = bulk_cmd.filtered(args)
    if filtered or args.dry_run:
        if args.ids or args.all == filtered:
            raise CliError(EXIT_USAGE, "give job ids or --all, or filter flags (one of them); "
                           "--dry-run counts with --all or filters")  # fmt: skip
        return bulk_cmd.by_filter(args, queue, state, _VERBS[verb])
    if args.all == bool(args.ids):
        raise CliError(EXIT_USAGE, "give job ids or --all, or filter flags (one of them)")
    if args.all:
        done = rq.work_through(state, operation)
        print(f"{verb} {done} job(s)")
        return EXIT_OK
    ids = list(dict.fromkeys(args.ids))  # each id once, in order
    flags = [
        flag
        for chunk in range(0, len(ids), MAX_BATCH)
        for flag in operation(ids[chunk : chunk + MAX_BATCH])
    ]
    missing = [job_id for job_id, ok in zip(ids, flags) if not ok]
    print(f"{verb} {len(ids) - len(missing)} job(s)")
    for job_id in missing:
        print(f"gq: not in the {state} set: {job_id}", file=sys.stderr)
    return EXIT_FATAL if missing else EXIT_OK
