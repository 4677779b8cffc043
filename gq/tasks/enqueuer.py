"""Writing task jobs: envelopes built and checked, then stored by the producer's scripts
(``push``, ``schedule``) or, for a task with ``unique_for``, by ``push_unique``, or, for
jobs with a group (SPEC section 17), by ``push_group``.

Every call of a batch is checked (arguments bind, values encode, size) before the first
is written, so a refused batch writes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Callable

from gq.errors import ConfigurationError, JobAlreadyExistsError
from gq.job import Job
from gq.producer import ProducerCore, _seconds, _unix_time
from gq.store.groups import GroupEntry, push_group
from gq.tasks import envelope
from gq.tasks.groups import group_of
from gq.tasks.ids import new_id as _new_id
from gq.tasks.options import lock_name, wire
from gq.tasks.results import Result

if TYPE_CHECKING:
    from gq.store.aio import AsyncRedisQueue
    from gq.store.tasks import TaskQueue
    from gq.tasks.hooks import EnqueueRun
    from gq.tasks.task import Call

Calls = Sequence[tuple[Sequence[Any], dict[str, Any]]]


class Batch:
    """The jobs of one enqueue call, built and checked, with how to store them."""

    __slots__ = ("call", "jobs", "locks", "mode", "at", "groups", "keys", "queues")

    def __init__(
        self,
        call: Call[Any, Any],
        calls: Calls,
        now: Callable[[], float],
        hooks: EnqueueRun | None = None,
        mint: Callable[[str], str] | None = None,
    ) -> None:
        self.call = call
        self.mode, self.at = _timing(call)
        self.jobs, self.locks, self.keys, self.queues = self._fresh()
        self.groups: list[str] = []  # "" for none; empty when no job of the batch has one
        task = call.task
        options = call.options
        name, check, headers = task.name, task.binder.check, call.headers
        varying = options.expires is not None or options.unique_for is not None
        fixed = None if varying else wire(options, now, None)
        if call.id is not None and len(calls) > 1:
            raise TypeError("using(id=...) names one job: enqueue it with enqueue(), not many")
        for args, kwargs in calls:
            why = check(args, kwargs)
            if why is not None:
                raise TypeError(f"task {name}: the arguments do not bind: {why}")
            lock = lock_name(name, options, args, kwargs) if varying else None
            opts = fixed if fixed is not None else wire(options, now, lock)
            if options.group is not None:
                if lock is not None:
                    raise ConfigurationError(f"task {name}: group with unique_for is not "
                                             "supported yet")  # fmt: skip
                opts = self._grouped(opts, group_of(options.group, args, kwargs, name))
            job_id = (call.id or _new_id()) if mint is None else self._routed(lock, opts, mint)
            stamped = headers if hooks is None else hooks.stamp(job_id, args, kwargs, headers)
            data = envelope.encode(name, args, kwargs, opts, stamped)
            self.jobs.append(Job(job_id, data))
            self.locks.append(lock)

    @staticmethod
    def _fresh() -> tuple[list[Job], list[str | None], list[str | None], list[str] | None]:
        """Empty: the jobs (ids with their enqueue time in them: gq.tasks.ids), their
        locks, and for a sharded queue (gq/tasks/sharding.py) each job's routing key (its
        group or lock; None: its id; filled only when ids are minted) and each job's
        queue (once written over several)."""
        return [], [], [], None

    def _routed(self, lock: str | None, opts: dict[str, Any],
                mint: Callable[[str], str]) -> str:  # fmt: skip
        """A sharded queue's job id: routed by its group or lock, a new id minted to agree."""
        key = opts.get("group") or lock
        self.keys.append(key)
        if self.call.id is not None:
            return self.call.id
        return _new_id() if key is None else mint(key)

    def part(self, where: Sequence[int]) -> Batch:
        """The jobs at positions ``where`` as a batch of their own (one shard's)."""
        part = object.__new__(Batch)
        part.call, part.mode, part.at, part.queues = self.call, self.mode, self.at, None
        part.jobs = [self.jobs[i] for i in where]
        part.locks = [self.locks[i] for i in where]
        part.groups = [self.groups[i] for i in where] if self.groups else []
        part.keys = []
        return part

    def _grouped(self, opts: dict[str, Any], group: str | None) -> dict[str, Any]:
        """The opts of a job with ``group`` (noted for push_group)."""
        self.groups.append(group or "")
        if group is None:
            return {k: v for k, v in opts.items() if k != "group"}
        return {**opts, "group": group}

    def messages(self, core: ProducerCore) -> list[bytes]:
        """Each job's message (``MessageTooLargeError`` before anything is written)."""
        ready_at = self.at if self.mode == "at" else time.time() + self.at
        encode = core._encode
        return [encode(job, ready_at) for job in self.jobs]

    def results(self, replies: Sequence[bool | str]) -> list[Result[Any]]:
        """A Result per job: the new job, or the unfinished one holding its lock."""
        name = self.call.task.name
        app, keeps = self.call.task.app, bool(self.call.options.result_ttl)
        refused = [job for job, reply in zip(self.jobs, replies) if reply is False]
        if refused:
            raise JobAlreadyExistsError(refused[0], refused)
        queues = self.queues or [self.call.queue] * len(self.jobs)
        return [
            Result(job.id if reply is True else str(reply), queue, name, app=app, keeps=keeps)  # type: ignore[arg-type]
            for job, reply, queue in zip(self.jobs, replies, queues)
        ]

    def unique_entries(self, messages: list[bytes]) -> list[Any]:
        ttl = self.call.options.unique_for
        assert ttl is not None
        return [
            (job.id, message, self.at, lock, ttl)
            for job, message, lock in zip(self.jobs, messages, self.locks)
        ]

    def group_entries(self, messages: list[bytes]) -> list[GroupEntry]:
        """push_group's entries: (id, message, time, group or "")."""
        return [(job.id, message, self.at, group)
                for job, message, group in zip(self.jobs, messages, self.groups)]  # fmt: skip


def _timing(call: Call[Any, Any]) -> tuple[str, float]:
    """("now", 0), ("at", unix seconds) or ("after", seconds on the Redis clock)."""
    if call.at is not None and call.after is not None:
        raise TypeError("using(): give at= or after=, not both")
    if call.at is not None:
        return "at", _unix_time(call.at)
    if call.after is not None:
        return "after", _seconds(call.after)
    return "now", 0.0


def write(queue: TaskQueue, core: ProducerCore, batch: Batch) -> list[Result[Any]]:
    """Store a built batch on ``queue``; its Results."""
    if not batch.jobs:
        return []
    return batch.results(store(queue, core, batch))


def write_parts(
    parts: Sequence[tuple[TaskQueue, Sequence[int]]], core: ProducerCore, batch: Batch
) -> list[Result[Any]]:
    """Store a built batch over several queues (a sharded queue's: ``parts`` names each
    with the positions of its jobs); its Results, in the batch's order."""
    replies: list[bool | str] = [False] * len(batch.jobs)
    queues = batch.queues = [batch.call.queue] * len(batch.jobs)
    for queue, where in parts:
        _place(queues, replies, where, store(queue, core, batch.part(where)), queue.keys.name)
    return batch.results(replies)


def _place(queues: list[str], replies: list[bool | str], where: Sequence[int],
           got: Sequence[bool | str], queue: str) -> None:  # fmt: skip
    """A part's replies at their positions in the batch, with the shard they went to."""
    for position, reply in zip(where, got):
        replies[position] = reply
        queues[position] = queue


def store(queue: TaskQueue, core: ProducerCore, batch: Batch) -> list[bool | str]:
    """Store a built batch on ``queue``: each job's reply (True, False, or a lock's id)."""
    messages = batch.messages(core)
    if batch.groups:
        return list(push_group(queue, batch.mode, batch.group_entries(messages)))
    if batch.locks[0] is not None:
        return queue.push_unique(batch.unique_entries(messages), batch.mode)
    ids = [job.id for job in batch.jobs]
    if batch.mode == "now":
        return list(queue.push(list(zip(ids, messages))))
    entries = [(id_, message, batch.at) for id_, message in zip(ids, messages)]
    return list(queue.schedule(entries, relative=batch.mode == "after"))


async def awrite(queue: AsyncRedisQueue, core: ProducerCore, batch: Batch) -> list[Result[Any]]:
    """``write``, awaited on a ``redis.asyncio`` client."""
    if not batch.jobs:
        return []
    return batch.results(await astore(queue, core, batch))


async def awrite_parts(
    parts: Sequence[tuple[AsyncRedisQueue, Sequence[int]]], core: ProducerCore, batch: Batch
) -> list[Result[Any]]:
    """``write_parts``, awaited: a sharded queue's batch over its shards."""
    replies: list[bool | str] = [False] * len(batch.jobs)
    queues = batch.queues = [batch.call.queue] * len(batch.jobs)
    for queue, where in parts:
        got = await astore(queue, core, batch.part(where))
        _place(queues, replies, where, got, queue.keys.name)
    return batch.results(replies)


async def astore(queue: AsyncRedisQueue, core: ProducerCore, batch: Batch) -> list[bool | str]:
    """``store``, awaited."""
    messages = batch.messages(core)
    if batch.groups:
        return list(await queue.push_group(batch.mode, batch.group_entries(messages)))
    if batch.locks[0] is not None:
        return list(await queue.push_unique(batch.unique_entries(messages), batch.mode))
    ids = [job.id for job in batch.jobs]
    if batch.mode == "now":
        return list(await queue.push(list(zip(ids, messages))))
    entries = [(id_, message, batch.at) for id_, message in zip(ids, messages)]
    return list(await queue.schedule(entries, relative=batch.mode == "after"))
