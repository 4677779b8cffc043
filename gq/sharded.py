"""``gq.Queue("emails", shards=8)``: an operator's handle on a sharded queue (docs/
deployment.md, "One queue over many masters"), one ``gq.Queue`` per shard behind it.

Counts are summed over the shards, consumers counted once (a worker registers on every
shard), dead and scheduled listings merged by time; ``shards`` holds the handle of each
shard for what is shown or done per shard. Pause and resume reach every shard (one
write each: while they spread, ``paused_shards`` says how many hold). Group limits are
set on every shard (a group lives on one shard: its limit holds exactly). A queue-wide
rate or concurrency limit is split into shares, one per shard, which the consumers'
balancer moves to the demand (gq/store/shard_limits.py, gq/worker/shard_limits.py).
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator, Sequence
from typing import Any

from gq import events as job_events
from gq import schedules, sharded_reads
from gq.errors import ConfigurationError
from gq.history import HistoryPage
from gq.jobfilter import JobFilter
from gq.options import DEFAULT_CONSUMER_TIMEOUT
from gq.queue import UNCHANGED, Queue, Rate, flow_report
from gq.queue import _limit_changes as limit_changes
from gq.sharded_jobs import ShardedIds, ShardedJobs
from gq.store import schedules as periodic_store
from gq.store.admin import Entry, FlowState
from gq.store.config import resolve_client
from gq.store.locate import locate
from gq.store.reshard import Serving, reshard, retire, serving, serving_or_given
from gq.store.shard_limits import merged_flow, queue_limits, set_queue_limits
from gq.store.shards import check_shards
from gq.tasks import groups

#: Counts of ``stats`` that are summed over the shards.
SUMMED = ("ready", "scheduled", "due", "dead", "grouped", "in_flight", "held")
_RANK = {"alive": 0, "silent": 1, "dead": 2}


class ShardedQueue(ShardedJobs, Queue):
    """Sharded queue ``name`` over ``shards`` shards (``gq.Queue(name, shards=N)``)."""

    def __init__(self, name: str, url: str | None = None, *, client: Any = None,
                 shards: int | None = None) -> None:  # fmt: skip
        count = check_shards(name, shards)
        redis_client = resolve_client(url, client)
        self.name = name
        found = serving_or_given(redis_client, name, count)
        self.layout = found.current
        #: Each shard's own handle, in order (while a reshard drains, the old ones after).
        self.shards = [Queue(shard, client=redis_client) for shard in found.queues]
        #: What the CLI reads beyond this class's operations, merged over the shards.
        self.store: Any = ShardedAdmin(self)

    def __repr__(self) -> str:
        return f"gq.Queue({self.name!r}, shards={len(self.shards)})"

    def reshard(self, count: int) -> None:
        """Move to ``count`` shards: new jobs to the new layout, the old one served until
        ``retire`` (gq/store/reshard.py; docs/deployment.md, "Resharding")."""
        reshard(self.shards[0].client, self.name, count)

    def retire(self) -> bool:
        """Drop the old layout once drained; whether none is left."""
        return retire(self.shards[0].client, self.name)

    def pause(self) -> None:
        """Every shard's consumers fetch nothing from now on (one write per shard)."""
        for shard in self.shards:
            shard.pause()

    def resume(self) -> None:
        for shard in self.shards:
            shard.resume()

    @property
    def paused(self) -> bool:
        """Whether every shard is paused (``paused_shards()`` says how many are)."""
        return self.paused_shards() == len(self.shards)

    def paused_shards(self) -> int:
        return sum(1 for shard in self.shards if shard.paused)

    def set_limits(self, rate: Rate | None = UNCHANGED,
                   concurrency: int | None = UNCHANGED) -> None:  # fmt: skip
        """Queue-wide limits over every shard: each shard holds a share, which the
        consumers' balancer moves to where the jobs wait (gq/store/shard_limits.py)."""
        changes = limit_changes(rate, concurrency)
        if changes:
            admins = [shard.store for shard in self.shards]
            set_queue_limits(self.shards[0].client, self.name, admins, changes)

    def limits(self) -> dict[str, Rate | int | None]:
        """The queue-wide limits (each shard's share: ``shards[i].limits()``)."""
        wide = queue_limits(self.shards[0].client, self.name)
        rate = None if wide.rate is None or wide.period is None else (wide.rate, wide.period / 1000)
        return {"rate": rate, "concurrency": wide.concurrency}

    def enable_events(self, maxlen: int = job_events.DEFAULT_MAXLEN) -> None:
        """Every shard writes its own job events from now on, about ``maxlen`` kept each
        (a stream lives in its shard's slot: ``events`` merges them)."""
        for shard in self.shards:
            shard.enable_events(maxlen)

    def disable_events(self) -> None:
        for shard in self.shards:
            shard.disable_events()

    def events(self, since: str | None = None, *, block: float | None = None,
               count: int = job_events.DEFAULT_COUNT) -> Iterator[job_events.Event]:  # fmt: skip
        """The job events of every shard after ``since`` (a cursor an event of this queue
        gave, one stream id for every shard, "0": all kept; None: from now on), merged by
        stream id: the order across shards is by each master's clock, not a global one.
        Each event names its ``shard`` and the ``cursor`` that resumes after it; with
        ``block``, an event on any shard is seen within ``block / shards`` seconds."""
        return sharded_reads.read_events(self.shards, since, block=block, count=count)

    def history(
        self, filter: JobFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> HistoryPage:
        """Up to ``limit`` jobs that ended on any shard, newest first, each naming its
        ``shard``; the ``cursor`` resumes every shard where the page stopped."""
        return sharded_reads.history_page(self.shards, filter, limit, cursor)

    def history_settings(
        self, history_max: int | None = None, history_ttl: float | None = None
    ) -> tuple[int, float]:
        """The history's bounds, set on every shard (each keeps its own history)."""
        found = [shard.history_settings(history_max, history_ttl) for shard in self.shards]
        return found[0]

    def set_group_limits(self, concurrency: int | None = UNCHANGED, rate: Rate | None = UNCHANGED,
                         group: str | None = None) -> None:  # fmt: skip
        """Set on every shard: a group lives on one shard, so its limit holds exactly."""
        for shard in self.shards:
            shard.set_group_limits(concurrency, rate, group)

    def group_limits(self, group: str | None = None) -> dict[str, Rate | int | None]:
        return self.shards[0].group_limits(group)

    def groups(self, count: int = groups.BUSIEST) -> dict[str, Any]:
        return merged_groups([shard.groups(count) for shard in self.shards], count)

    def shard_of(self, job_id: str) -> Queue:
        """The shard that holds ``job_id`` (or its outcome): its id's shard, else the one
        that knows it (two round trips over all: gq.store.locate), else its id's."""
        order = [shard.name for shard in self.shards_for([job_id])]
        found = locate(self.shards[0].client, job_id, order) or order[0]
        return next(shard for shard in self.shards if shard.name == found)

    def shards_for(self, ids: list[str]) -> list[Queue]:
        """The shards to ask for ``ids``: the first id's own first, then the others."""
        if not ids:
            return []
        first = self.layout.for_id(ids[0])
        return sorted(self.shards, key=lambda shard: shard.name != first)

    def stats(self, consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT) -> dict[str, Any]:
        """``Queue.stats`` over every shard: counts summed, consumers counted once, the
        oldest ready job of any shard; ``per_shard`` holds each shard's own report."""
        reports = [shard.stats(consumer_timeout) for shard in self.shards]
        merged = merged_stats(self.name, reports, self.consumers(consumer_timeout))
        return {**merged, **flow_report(self.store.flow()), "paused": merged["paused"]}

    def consumers(self, consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT) -> list[dict[str, Any]]:
        """Every consumer of any shard, once, with its jobs in flight over all shards."""
        return merged_consumers([shard.consumers(consumer_timeout) for shard in self.shards])

    def recover_consumer(self, consumer_id: str, *, force: bool = False) -> int:
        registered = [s for s in self.shards if any(e["id"] == consumer_id for e in s.consumers())]
        if not registered:
            raise ConfigurationError(f"no consumer {consumer_id!r} is registered on {self.name}")
        return sum(s.recover_consumer(consumer_id, force=force) for s in registered)

    # -- periodic schedules at runtime, each on its name's shard (issue 35) ---------------
    # (gq/schedules.py; the shard as gq/worker/arguments.py periodic_on_shards puts a code
    # schedule: one cursor, so each occurrence is enqueued once by the consumers, which
    # serve every shard; gq/store/reshard.py settle moves them on a reshard.)

    def add_periodic(self, name: str, task: str, *, cron: str | None = None,
                     every: int | None = None, args: list[Any] | None = None,
                     kwargs: dict[str, Any] | None = None, tz: str = "UTC") -> bool:  # fmt: skip
        """``Queue.add_periodic`` on the shard that keeps ``name``, else on the one its name
        routes to in the current layout; a name a code schedule holds on any shard is
        refused."""
        found = schedules.Schedule(name, task, cron, every, list(args or []),
                                   dict(kwargs or {}), tz)  # fmt: skip
        served = self._served()
        home = periodic_store.holder(self.client, served.queues, name)
        code = schedules.code_names(self.store.periodic_state(), self.periodic_schedules())
        return schedules.add(self.client, home or served.current.for_key(name), found, code)

    def pause_periodic(self, name: str) -> None:
        schedules.set_paused(self.client, self._holder(name), name, True)

    def resume_periodic(self, name: str) -> None:
        schedules.set_paused(self.client, self._holder(name), name, False)

    def remove_periodic(self, name: str) -> bool:
        return schedules.remove(self.client, self._holder(name), name)

    def periodic_schedules(self) -> list[schedules.Schedule]:
        """The runtime schedules of every shard, by name (each once)."""
        found = {s.name: s for queue in reversed(self._served().queues)
                 for s in schedules.listed(self.client, queue)}  # fmt: skip
        return [found[name] for name in sorted(found)]

    def _served(self) -> Serving:
        """The shards Redis lists now (a reshard since this handle was made moves them)."""
        return serving(self.client, self.name, len(self.layout.queues))

    def _holder(self, name: str) -> str:
        """The shard that keeps runtime schedule ``name`` (its name's, if none does: the
        callers then find it missing there)."""
        served = self._served()
        found = periodic_store.holder(self.client, served.queues, name)
        return found or served.current.for_key(name)


def merged_stats(name: str, reports: list[dict[str, Any]],
                 consumers: list[dict[str, Any]]) -> dict[str, Any]:  # fmt: skip
    """One report of a sharded queue from its shards' ``reports``."""
    oldest = max(reports, key=lambda r: -1.0 if r["oldest_ready_age"] is None
                 else r["oldest_ready_age"])  # fmt: skip
    states = [entry["state"] for entry in consumers]
    paused = sum(1 for report in reports if report["paused"])
    return {
        **reports[0],
        "queue": name,
        **{field: sum(report[field] for report in reports) for field in SUMMED},
        "consumers_alive": len(states) - states.count("dead"),
        "consumers_silent": states.count("silent"),
        "consumers_dead": states.count("dead"),
        "next_ready": oldest["next_ready"],
        "oldest_ready_age": oldest["oldest_ready_age"],
        "paused": paused == len(reports),
        "paused_shards": paused,
        "held_back_seconds": max(report["held_back_seconds"] for report in reports),
        "groups": merged_groups([report["groups"] for report in reports], groups.BUSIEST),
        "shards": len(reports),
        "per_shard": reports,
    }


def merged_consumers(per_shard: list[list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Each consumer once: its best state over the shards, its jobs in flight summed."""
    merged: dict[str, dict[str, Any]] = {}
    for entries in per_shard:
        for entry in entries:
            seen = merged.get(entry["id"])
            if seen is None:
                merged[entry["id"]] = dict(entry)
                continue
            seen["in_flight"] += entry["in_flight"]
            if _RANK[entry["state"]] < _RANK[seen["state"]]:
                merged[entry["id"]] = {**entry, "in_flight": seen["in_flight"]}
    return sorted(merged.values(), key=lambda entry: entry["heartbeat_at"])


def merged_groups(reports: list[dict[str, Any]], count: int) -> dict[str, Any]:
    """The groups of the shards' reports: groups waiting summed, the busiest of all."""
    rows = [row for report in reports for row in report["busiest"]]
    return {
        "waiting_groups": sum(report["waiting_groups"] for report in reports),
        "limits": reports[0]["limits"],
        "busiest": heapq.nlargest(count, rows, key=lambda row: row["waiting"]),
    }


class ShardedAdmin(ShardedIds):
    """The reads ``gq dead list``, ``gq scheduled list`` and ``gq stats`` make of
    ``queue.store``, over every shard: listings merged by time, counts summed."""

    def __init__(self, queue: ShardedQueue) -> None:
        self._queue = queue
        self._admins = [shard.store for shard in queue.shards]
        self.plan = queue.layout
        self.by_name = {shard.name: shard.store for shard in queue.shards}
        self.client = self._admins[0].client
        self.keys = _Named(queue.name)

    def __getattr__(self, name: str) -> Any:
        """An operation not built over shards yet: said, with the way round it."""
        if name.startswith("__"):
            raise AttributeError(name)
        raise ConfigurationError(
            f"{name} is not built for sharded queue {self._queue.name!r} yet: name one of "
            f"its shards instead ({', '.join(self._queue.layout.queues)})"
        )

    def ping(self) -> None:
        for admin in self._admins:
            admin.ping()

    def server_time(self) -> float:
        return self._admins[0].server_time()

    def flow(self) -> FlowState:
        """The queue-wide flow (gq limit, gq resume): its limits, the jobs held summed."""
        wide = queue_limits(self.client, self._queue.name)
        return merged_flow([admin.flow() for admin in self._admins], wide)

    def counts(self) -> dict[str, int]:
        every = [admin.counts() for admin in self._admins]
        return {state: sum(counts[state] for counts in every) for state in every[0]}

    def dead_jobs(self, limit: int, *, newest_first: bool = True) -> list[Entry]:
        """Up to ``limit`` dead jobs of all shards, newest first (or oldest)."""
        lists = [admin.dead_jobs(limit, newest_first=newest_first) for admin in self._admins]
        return _merged(lists, limit, newest_first)

    def scheduled_jobs(self, limit: int) -> list[Entry]:
        """Up to ``limit`` scheduled jobs of all shards, soonest first."""
        return _merged([admin.scheduled_jobs(limit) for admin in self._admins], limit, False)

    # -- periodic schedules (issue 35): `gq periodic list|delete` over the shards ---------

    def periodic_state(self) -> dict[str, tuple[str | None, int | None, int | None]]:
        """Each schedule any shard knows, from the shard with its latest cursor (a
        schedule moved by a reshard leaves a "moved" mark behind: not shown)."""
        found: dict[str, tuple[str | None, int | None, int | None]] = {}
        for admin in self._admins:
            for name, state in admin.periodic_state().items():
                seen = found.get(name)
                if state[0] != periodic_store.MOVED and (seen is None or
                                                         (state[1] or 0) > (seen[1] or 0)):
                    found[name] = state
        return dict(sorted(found.items()))

    def delete_periodic(self, names: Sequence[str]) -> int:
        """Forget the schedules on every shard; the count of names that were known."""
        known = {name for admin in self._admins for name in admin.periodic_state()}
        for admin in self._admins:
            admin.delete_periodic(names)
        return len(known & set(names))


class _Named:
    """``keys.name`` of a sharded queue: its logical name (it has no keys of its own)."""

    def __init__(self, name: str) -> None:
        self.name = name


def _merged(lists: list[list[Entry]], limit: int, newest_first: bool) -> list[Entry]:
    """Sorted lists of (id, time, message) merged by time, the first ``limit``."""
    key = (lambda entry: -entry[1]) if newest_first else (lambda entry: entry[1])
    return list(heapq.merge(*lists, key=key))[:limit]
