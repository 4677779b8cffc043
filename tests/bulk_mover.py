"""A move across Cluster slots (copy, then delete) run in a process of its own, for the
SIGKILL test of tests/test_bulk_kill.py: ``python -m tests.bulk_mover URL SOURCE TARGET``.
A single Redis holds every key in one place, so the copy-then-delete path is chosen here
as a cluster with two slots would choose it."""

from __future__ import annotations

import sys

import gq
from gq import bulk
from gq.jobfilter import JobFilter
from gq.store.connection import client_from_url


def main(url: str, source: str, target: str) -> None:
    bulk.bulk.same_slot = lambda *_: False  # type: ignore[assignment]
    result = gq.Queue(source, client=client_from_url(url)).move(JobFilter(task="app.t"), to=target)
    print(f"moved {result.done}")


if __name__ == "__main__":
    main(*sys.argv[1:4])
