"""Helpers of the group tests (SPEC section 17): grouped byte jobs written the way the task
layer writes them (push_group.lua), and what the group keys hold."""

from __future__ import annotations

from typing import Any

import gq
from gq.store.groupkeys import group_key
from gq.store.groups import push_group, waiting_groups
from gq.store.jobs import RedisQueue
from tests.helpers import Backend


def store(backend: Backend) -> RedisQueue:
    return RedisQueue(backend.client(), backend.queue)


def push(backend: Backend, jobs: list[tuple[str, str]], data: bytes = b"",
         mode: str = "now", at: float = 0.0) -> list[bool]:  # fmt: skip
    """Enqueue byte jobs (id, group) ("" for none) in their groups."""
    entries = [(job_id, gq.job.encode(gq.Job(job_id, data)), at, group) for job_id, group in jobs]
    return push_group(store(backend), mode, entries)


def waiting(backend: Backend) -> dict[str, int]:
    """Group -> its jobs waiting."""
    return waiting_groups(store(backend))


def held(backend: Backend) -> dict[str, int]:
    """Group -> its jobs held by gq consumers (the state hash's counts)."""
    state = backend.direct().hgetall(group_key(backend.queue, "state"))
    return {field.decode()[5:]: int(value) for field, value in state.items()
            if field.startswith(b"held\n")}  # fmt: skip


def group_of(job_id: str) -> str:
    """The group a test job's id names: "acme-3" is of group "acme"."""
    return job_id.rsplit("-", 1)[0]


def fetch_all(queue: RedisQueue, consumer: str, count: int) -> Any:
    """One fetch; the ids it took and its state."""
    fetched = queue.fetch(consumer, count)
    return [job_id for job_id, _ in fetched], fetched.state
