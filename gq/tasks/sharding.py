"""Sharded queues in the task layer (docs/deployment.md, "One queue over many masters"):
``gq.App(url, shards={"emails": 8})`` writes the tasks of queue "emails" to its shards.

Which shard (gq/store/shards.py has the function): a job by its id; a grouped job by its
group, a ``unique_for`` job by its lock, their ids minted so that the id routes to the
same shard (an id given with ``using(id=...)`` cannot be: such a job is found by asking
every shard); a workflow's jobs by the workflow's id (their ids are ``<workflow>.<i>``),
so that the ack that writes a successor stays in one slot.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Callable

from gq.errors import ConfigurationError
from gq.store.reshard import REFRESH as RESHARD_REFRESH
from gq.store.reshard import serving
from gq.store.shards import Layout, adeclare, check_shards, declare, positions, route_key
from gq.tasks.ids import new_id

if TYPE_CHECKING:
    from gq.tasks.enqueuer import Batch

#: The most ids drawn to find one that routes to a shard (each draw hits it with
#: probability 1/N, N <= 256: running out is a chance below 1e-30).
MINT_TRIES = 20_000


def check_app_shards(shards: Mapping[str, int] | None) -> dict[str, int]:
    """``gq.App(shards=...)`` checked: queue name -> its count of shards."""
    if shards is None:
        return {}
    if not isinstance(shards, Mapping):
        raise ConfigurationError(f"shards is a dict of queue name -> count, not {shards!r}")
    return {name: check_shards(name, count) for name, count in shards.items()}


class Sharding:
    """An app's sharded queues: their layouts, declared in Redis at their first use."""

    def __init__(self, counts: dict[str, int], client: Callable[[], Any]) -> None:
        self.counts = counts
        self._client = client
        self._plans: dict[str, Layout] = {}
        self._until: dict[str, float] = {}  # when to look at each layout in Redis again

    def plan(self, queue: str) -> Layout | None:
        """The layout of ``queue`` if it is sharded (declared once), else None."""
        plan = self._plans.get(queue)
        stale = self._until.get(queue, 0.0) <= time.monotonic()  # a reshard may move it
        if (plan is None or stale) and queue in self.counts:
            plan = self._plans[queue] = declare(self._client(), queue, self.counts[queue])
            self._until[queue] = time.monotonic() + RESHARD_REFRESH
        return plan

    async def aplan(self, queue: str, aclient: Any) -> Layout | None:
        """``plan`` from asyncio code, declared through ``aclient`` (redis.asyncio)."""
        plan = self._plans.get(queue)
        stale = self._until.get(queue, 0.0) <= time.monotonic()  # a reshard may move it
        if (plan is None or stale) and queue in self.counts:
            plan = self._plans[queue] = await adeclare(aclient, queue, self.counts[queue])
            self._until[queue] = time.monotonic() + RESHARD_REFRESH
        return plan

    def home(self, queue: str) -> str:
        """A physical queue for reads that are not a job's (the server's clock): the first
        shard of a sharded queue, else the queue."""
        plan = self.plan(queue)
        return queue if plan is None else plan.queues[0]

    def physical(self, queue: str, job_id: str) -> str:
        """Where job ``job_id`` of ``queue`` lives when routed by its id."""
        plan = self.plan(queue)
        return queue if plan is None else plan.for_id(job_id)

    def every(self, queue: str, job_id: str) -> list[str]:
        """Each physical queue of ``queue``, the shard of ``job_id`` first."""
        plan = self.plan(queue)
        if plan is None:
            return [queue]
        first = plan.for_id(job_id)
        every = serving(self._client(), queue, len(plan.queues)).queues  # old ones too
        return [first, *(name for name in every if name != first)]

    def locate(self, client: Any, job_id: str, queues: list[str]) -> str | None:
        """The physical queue of the first of ``queues`` that knows ``job_id``: where its
        id routes it, else (a grouped or unique job given its id) on any shard."""
        from gq.store.locate import locate

        found = locate(client, job_id, [self.physical(queue, job_id) for queue in queues])
        if found is None and any(queue in self.counts for queue in queues):
            every = [name for queue in queues for name in self.every(queue, job_id)]
            found = locate(client, job_id, every)
        return found

    def minter(self, queue: str) -> Callable[[str], str] | None:
        """For a sharded queue: a new id that routes where routing key ``key`` does."""
        plan = self.plan(queue)
        return None if plan is None else (lambda key: mint(plan, key))


def mint(plan: Layout, key: str) -> str:
    """A new job id (UUIDv7) whose shard is routing key ``key``'s."""
    wanted = plan.for_key(key)
    for _ in range(MINT_TRIES):
        job_id = new_id()
        if plan.for_id(job_id) == wanted:
            return job_id
    raise RuntimeError(f"no id routes to {wanted} after {MINT_TRIES} tries")  # pragma: no cover


def shards_of(batch: Batch, plan: Layout) -> list[str]:
    """The shard of each job of ``batch``: by its group or lock, else by its id."""
    keys = batch.keys or [None] * len(batch.jobs)
    return [plan.for_key(key or route_key(job.id)) for job, key in zip(batch.jobs, keys)]


def parts(batch: Batch, plan: Layout) -> list[tuple[str, list[int]]]:
    """The shards a batch writes to, each with the positions of its jobs."""
    return list(positions(shards_of(batch, plan)).items())
