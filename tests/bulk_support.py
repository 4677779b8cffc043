"""Jobs in every state, written as gq writes them, for the search and bulk-action tests
(tests/test_bulk*.py): task jobs with arguments, groups, uniqueness locks, dead jobs with
errors, and ids of a chosen age (UUIDv7)."""

from __future__ import annotations

import os
import time
from typing import Any

import redis

from gq import job as jobs
from gq.store.groups import push_group
from gq.tasks import envelope
from tests.queue_sides import BothSides


def v7(seconds_ago: float = 0.0, now: float | None = None) -> str:
    """A UUIDv7 made ``seconds_ago`` (its enqueue time, as gq/tasks/ids.py reads it)."""
    ms = int(((now or time.time()) - seconds_ago) * 1000)
    rand = int.from_bytes(os.urandom(10), "big")
    value = ms << 80 | 0x7 << 76 | (rand << 52) & (0xFFF << 64) | 0b10 << 62
    value |= rand & ((1 << 62) - 1)
    h = f"{value:032x}"
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def task_message(
    job_id: str, task: str, *args: Any, error: str | None = None, attempt: int = 0,
    opts: dict[str, Any] | None = None, **kwargs: Any,
) -> bytes:  # fmt: skip
    data = envelope.encode(task, list(args), kwargs, opts or {})
    return jobs.encode(jobs.Job(id=job_id, data=data, attempt=attempt), error=error)


class Jobs:
    """Writes jobs of queue ``name`` through gq's own scripts (push, schedule, push_group)
    or, for dead ones, as kill.lua leaves them."""

    def __init__(self, client: redis.Redis, name: str) -> None:
        self.q = BothSides(client, name)
        self.client = client

    def ready(self, task: str, *args: Any, job_id: str | None = None, **kwargs: Any) -> str:
        job_id = job_id or v7()
        assert self.q.push([(job_id, task_message(job_id, task, *args, **kwargs))]) == [True]
        return job_id

    def scheduled(self, task: str, *args: Any, at: float = 4e9, job_id: str | None = None,
                  **kwargs: Any) -> str:  # fmt: skip
        job_id = job_id or v7()
        message = task_message(job_id, task, *args, **kwargs)
        assert self.q.schedule([(job_id, message, at)], relative=False) == [True]
        return job_id

    def grouped(self, task: str, group: str, *args: Any, after: float | None = None,
                **kwargs: Any) -> str:  # fmt: skip
        job_id = v7()
        message = task_message(job_id, task, *args, opts={"group": group}, **kwargs)
        mode, at = ("after", after) if after is not None else ("now", 0.0)
        assert push_group(self.q, mode, [(job_id, message, at, group)]) == [True]
        return job_id

    def dead(self, task: str, *args: Any, error: str = "boom", died: float | None = None,
             job_id: str | None = None, **kwargs: Any) -> str:  # fmt: skip
        job_id = job_id or v7()
        message = task_message(job_id, task, *args, error=error, attempt=3, **kwargs)
        self.client.hset(self.q.keys.data, job_id, message)
        self.client.zadd(self.q.keys.dead, {job_id: died if died is not None else time.time()})
        return job_id

    def active(self) -> list[str]:
        return [i.decode() for i in self.client.lrange(self.q.keys.active, 0, -1)]

    def has_message(self, job_id: str) -> bool:
        return bool(self.client.hexists(self.q.keys.data, job_id))
