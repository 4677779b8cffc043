"""``gq.Queue``: an operator's handle on one queue (SPEC section 9): pause and resume it,
set its global rate and concurrency limits, cancel jobs, read its numbers.

The settings live in Redis (gq's own keys, gq/store/keys.py), so every consumer and every
operator sees the same ones and a change takes effect at the consumers' next fetch,
without a restart. curlyq consumers on the same queue do not know them.

    q = gq.Queue("emails", url="redis://localhost:6379/0")
    q.set_limits(rate=(100, 1.0), concurrency=20)   # 100 starts per second, 20 at once
    q.pause(); q.resume()
    q.cancel("id1", "id2")
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator
from typing import Any

from gq import bulk, history, jobsearch, schedules
from gq import events as job_events
from gq import job as jobs
from gq.consumer_report import SILENT_SLACK as SILENT_SLACK
from gq.consumer_report import consumer_report as consumer_report
from gq.errors import ConfigurationError, ConsumerAlive
from gq.jobfilter import JobFilter
from gq.options import DEFAULT_CONSUMER_TIMEOUT
from gq.store.admin import FlowState, QueueAdmin
from gq.store.config import resolve_client
from gq.store.groups import group_limits as get_group_limits
from gq.store.groups import set_group_limits
from gq.store.recovery import recover_now
from gq.tasks import groups

Rate = tuple[int, float]
# The bounds of a rate limit (lib/flow.lua holds the same): its period at most 30 days in
# seconds, at most a billion jobs per period, so that every number fetch.lua computes stays
# an exact integer in Redis's replies and expiries.
MAX_RATE_PERIOD = 30 * 86400
MAX_RATE_JOBS = 1_000_000_000


class _Unchanged:
    def __repr__(self) -> str:
        return "UNCHANGED"


#: ``set_limits``' default for a limit it leaves as it is.
UNCHANGED: Any = _Unchanged()


class Queue:
    """Queue ``name`` on ``url`` or an existing ``client`` (redis-py, decode_responses=False);
    with ``shards=N``, sharded queue ``name``'s handle (a ``gq.sharded.ShardedQueue``)."""

    def __new__(cls, name: str, url: str | None = None, *, client: Any = None,
                shards: int | None = None) -> Queue:  # fmt: skip
        if shards is None or cls is not Queue:
            return super().__new__(cls)
        # gq.sharded subclasses Queue: loaded by name when a sharded handle is asked for.
        sharded: type[Queue] = importlib.import_module("gq.sharded").ShardedQueue
        return super().__new__(sharded)

    def __init__(self, name: str, url: str | None = None, *, client: Any = None,
                 shards: int | None = None) -> None:  # fmt: skip
        self.name = name
        #: The store-level implementation (gq/store/admin.py): the reads and writes that
        #: the CLI and the dashboard show beyond the operations of this class.
        self.store = QueueAdmin(resolve_client(url, client), name)

    @property
    def client(self) -> Any:
        """The Redis client this handle uses."""
        return self.store.client

    def __repr__(self) -> str:
        return f"gq.Queue({self.name!r})"

    # -- pause -----------------------------------------------------------------------------

    def pause(self) -> None:
        """Consumers fetch nothing from now on; the jobs they run or hold finish."""
        self.store.set_paused(True)

    def resume(self) -> None:
        """Consumers fetch again, woken at once; this also lifts a handler's RateLimited hold
        (the jobs it put back stay scheduled for their time)."""
        self.store.set_paused(False)

    @property
    def paused(self) -> bool:
        return self.store.flow().paused

    # -- job events (gq/events.py, docs/operating.md) --------------------------------------

    def enable_events(self, maxlen: int = job_events.DEFAULT_MAXLEN) -> None:
        """Write this queue's job events to its stream from now on, about ``maxlen`` kept."""
        job_events.enable(self.client, self.name, maxlen)

    def disable_events(self) -> None:
        """Write no more events (those kept stay readable)."""
        job_events.disable(self.client, self.name)

    def events(self, since: str | None = None, *, block: float | None = None,
               count: int = job_events.DEFAULT_COUNT) -> Iterator[job_events.Event]:  # fmt: skip
        """The job events after stream id ``since`` ("0": all kept; None: from now on),
        oldest first; with ``block`` (seconds), wait for more without end."""
        return job_events.read(self.client, self.name, since, block=block, count=count)

    # -- periodic schedules at runtime (gq/schedules.py, docs/periodic.md) -----------------

    def add_periodic(self, name: str, task: str, *, cron: str | None = None,
                     every: int | None = None, args: list[Any] | None = None,
                     kwargs: dict[str, Any] | None = None, tz: str = "UTC") -> bool:  # fmt: skip
        """Add (or change) schedule ``name``: ``task(*args, **kwargs)`` at every ``cron``
        occurrence or ``every`` seconds; running workers pick it up within a heartbeat.
        True if new; ConfigurationError for a bad rule or a name a code schedule holds."""
        found = schedules.Schedule(name, task, cron, every, list(args or []),
                                   dict(kwargs or {}), tz)  # fmt: skip
        code = schedules.code_names(self.store.periodic_state(), self.periodic_schedules())
        return schedules.add(self.client, self.name, found, code)

    def pause_periodic(self, name: str) -> None:
        """Enqueue no occurrence of runtime schedule ``name`` until resumed (KeyError if none)."""
        schedules.set_paused(self.client, self.name, name, True)

    def resume_periodic(self, name: str) -> None:
        """Resume ``name``: the next occurrence (or the latest missed one) is enqueued."""
        schedules.set_paused(self.client, self.name, name, False)

    def remove_periodic(self, name: str) -> bool:
        """Remove runtime schedule ``name`` and its cursor; whether it existed."""
        return schedules.remove(self.client, self.name, name)

    def periodic_schedules(self) -> list[schedules.Schedule]:
        """The runtime schedules of this queue (code ones: ``gq.periodic.describe``)."""
        return schedules.listed(self.client, self.name)

    # -- limits ----------------------------------------------------------------------------

    def set_limits(
        self,
        rate: Rate | None = UNCHANGED,
        concurrency: int | None = UNCHANGED,
    ) -> None:
        """Set the queue-wide limits over all gq consumers: ``rate=(n, seconds)``, at most n
        jobs started per that many seconds; ``concurrency=n``, at most n jobs held (buffered
        or running) at once. ``None`` removes a limit; a limit not given is left as it is."""
        changes = _limit_changes(rate, concurrency)
        if changes:
            self.store.set_limits(changes)

    def limits(self) -> dict[str, Rate | int | None]:
        """``{"rate": (n, seconds) or None, "concurrency": n or None}``."""
        flow = self.store.flow()
        return {"rate": flow.rate, "concurrency": flow.concurrency}

    # -- groups (SPEC section 17, gq/groups.py) ---------------------------------------------

    def set_group_limits(
        self,
        concurrency: int | None = UNCHANGED,
        rate: Rate | None = UNCHANGED,
        group: str | None = None,
    ) -> None:
        """Limits per group: for every group (``group=None``), or one group's own, which
        win over every group's. ``concurrency=n``: at most n jobs of a group held at once;
        ``rate=(n, seconds)``: at most n of its jobs started per that many seconds.
        ``None`` removes a limit; a limit not given is left as it is. A crashed worker's
        jobs hold their group's slots until recovered: at once when it is restarted under
        its name (``gq-worker --name``), by ``recover_consumer``, else at its lease's end."""
        name = "" if group is None else groups.check_group(group)
        changes = _limit_changes(rate, concurrency)
        if changes:
            set_group_limits(self.store, name, changes)

    def group_limits(self, group: str | None = None) -> dict[str, Rate | int | None]:
        """``{"rate": ..., "concurrency": ...}`` of every group, or one group's own (None
        where it follows every group's)."""
        limits = get_group_limits(self.store, "" if group is None else groups.check_group(group))
        return {"rate": limits.rate, "concurrency": limits.concurrency}

    def groups(self, count: int = groups.BUSIEST) -> dict[str, Any]:
        """The groups of ``gq stats``: how many have jobs waiting, and the busiest."""
        return groups.report(self.store, count)

    # -- jobs ------------------------------------------------------------------------------

    def cancel(self, *ids: str) -> int:
        """Cancel jobs by id; how many were found. A ready or scheduled job is removed and
        its id freed; a running one has its handler interrupted with ``gq.JobCancelled``
        within a second and is acknowledged, not retried. Unknown and dead ids are not an
        error: they are not counted."""
        return sum(1 for outcome in self.store.cancel(list(ids)) if outcome)

    # -- by filter (issue 34: gq/jobfilter.py, gq/jobsearch.py, gq/bulk.py) ----------------

    def jobs(
        self, filter: JobFilter | None = None, limit: int = 50, cursor: str | None = None,
        budget: float | None = None,
    ) -> jobsearch.SearchPage:  # fmt: skip
        """Up to ``limit`` jobs matching ``filter`` (ready, scheduled, dead, running), from
        ``cursor`` (a page's ``cursor``: None at the end); ``budget`` seconds cap the scan.
        The state "finished" lists the history of ended jobs instead (``history``)."""
        if filter is not None and "finished" in filter.states:
            return history.as_search_page(self.store, filter, limit, cursor)
        return jobsearch.search(self.store, filter or JobFilter(), limit, cursor, budget)

    def history(
        self, filter: JobFilter | None = None, *, limit: int = 50, cursor: str | None = None
    ) -> history.HistoryPage:
        """Up to ``limit`` jobs that ended (done, dead, cancelled) matching ``filter``,
        newest first, from ``cursor`` (a page's ``cursor``: None at the end)."""
        return history.page(self.store, filter, limit, cursor)

    def history_settings(
        self, history_max: int | None = None, history_ttl: float | None = None
    ) -> tuple[int, float]:
        """The history's bounds (max entries, ttl seconds) after setting those given, for
        every consumer of the queue at once; 0 turns the history off."""
        return history.configure(self.store, history_max, history_ttl)

    def purge(
        self, filter: JobFilter, *, dry_run: bool = False, everything: bool = False
    ) -> bulk.BulkResult:
        """Remove the ready and scheduled jobs matching ``filter`` with their bookkeeping;
        a filter that narrows nothing needs ``everything=True``."""
        bulk.unfiltered_guard(filter, everything or dry_run, "purge")
        return bulk.purge(self.store, filter, dry_run)

    def move(self, filter: JobFilter, *, to: str, dry_run: bool = False) -> bulk.BulkResult:
        """Move the ready, scheduled and dead jobs matching ``filter`` to queue ``to`` (a
        sharded one: each job to the shard its group, lock or id routes it to)."""
        return bulk.move(self.store, bulk.move_target(self.client, self.name, to), filter,
                         dry_run)  # fmt: skip

    def retry_dead(
        self, filter: JobFilter, *, reset_attempts: bool = False, dry_run: bool = False
    ) -> bulk.BulkResult:
        """Queue again the dead jobs matching ``filter``."""
        return bulk.retry_dead(self.store, filter, reset_attempts, dry_run)

    def delete_dead(
        self, filter: JobFilter, *, dry_run: bool = False, everything: bool = False
    ) -> bulk.BulkResult:
        """Delete the dead jobs matching ``filter``; one narrowing nothing needs
        ``everything=True``."""
        bulk.unfiltered_guard(filter, everything or dry_run, "delete")
        return bulk.delete_dead(self.store, filter, dry_run)

    def run_scheduled(self, filter: JobFilter, *, dry_run: bool = False) -> bulk.BulkResult:
        """Run now the scheduled jobs matching ``filter`` (a grouped one joins its line)."""
        return bulk.run_scheduled(self.store, filter, dry_run)

    def reschedule(
        self, filter: JobFilter, *, at: float | None = None, after: float | None = None,
        dry_run: bool = False,
    ) -> bulk.BulkResult:  # fmt: skip
        """New due time for the scheduled jobs matching ``filter``: ``at`` unix seconds, or
        ``after`` seconds from the server's now."""
        if (at is None) == (after is None):
            raise ConfigurationError("reschedule needs one of at= and after=")
        when = float(after if at is None else at)  # type: ignore[arg-type]
        return bulk.reschedule(self.store, filter, when, relative=at is None, dry_run=dry_run)

    def stats(self, consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT) -> dict[str, Any]:
        """What ``gq stats --json`` prints: jobs per state, consumers alive, silent and dead, the
        next job and how long it has been ready, and the flow settings."""
        return stats(self.store, consumer_timeout)

    def recover_consumer(self, consumer_id: str, *, force: bool = False) -> int:
        """Hand back now the jobs in flight of consumer ``consumer_id``, known to be dead
        (the end of its lease would): they go back to ready (or to their group's line),
        counted as recovered from a crash. A consumer that is alive (its heartbeats on
        time) is refused with ``ConsumerAlive`` unless ``force``: its jobs would run
        twice. Returns how many jobs were handed back; ``ConfigurationError`` if no such
        consumer is registered."""
        entry = next((e for e in self.consumers() if e["id"] == consumer_id), None)
        if entry is None:
            raise ConfigurationError(f"no consumer {consumer_id!r} is registered on {self.name}")
        if entry["state"] == "alive" and not force:
            raise ConsumerAlive(consumer_id, entry["heartbeat_at"])
        return recover_now(self.store, consumer_id)

    def consumers(self, consumer_timeout: float = DEFAULT_CONSUMER_TIMEOUT) -> list[dict[str, Any]]:
        """Every registered consumer, least recently seen first, as an operator should
        see it during an incident: whether it is silent and for how long, its jobs in
        flight and when a custodian may recover them (``consumer_report``)."""
        return consumer_report(self.store, consumer_timeout)


def stats(admin: QueueAdmin, consumer_timeout: float) -> dict[str, Any]:
    """The numbers of ``gq stats`` for one queue (see ``Queue.stats``)."""
    report, _ = snapshot(admin, consumer_timeout)
    return {**report, **flow_report(admin.flow()), "groups": groups.report(admin)}


def snapshot(admin: QueueAdmin, consumer_timeout: float) -> tuple[dict[str, Any], float]:
    """Jobs per state, in flight, consumers alive and dead, the next job and how long it has
    been ready (the numbers ``gq stats`` and the dashboard share); and the server's time."""
    counts = admin.counts()
    consumers = consumer_report(admin, consumer_timeout)
    states = [entry["state"] for entry in consumers]
    now = admin.server_time()
    head = admin.oldest_ready()
    ready_at = _ready_at(head[1]) if head else None
    report = {
        "queue": admin.keys.name,
        **counts,
        # Waiting in a group's line (group=): not ready to any consumer until its turn.
        "grouped": admin.grouped(),
        "in_flight": sum(entry["in_flight"] for entry in consumers),
        # Alive: within its lease; silent ones (its heartbeats or facts overdue) included.
        "consumers_alive": len(states) - states.count("dead"),
        "consumers_silent": states.count("silent"),
        "consumers_dead": states.count("dead"),
        "next_ready": head[0] if head else None,
        # Seconds the next job has been ready; None for none, or a message without
        # ReadyAt (written by curlyq).
        "oldest_ready_age": None if ready_at is None else round(max(0.0, now - ready_at), 3),
    }
    return report, now


def flow_report(flow: FlowState) -> dict[str, Any]:
    """The flow settings as ``gq stats --json`` and the dashboard's API show them."""
    return {
        "paused": flow.paused,
        "rate_limit": None if flow.rate is None else {"jobs": flow.rate[0], "per": flow.rate[1]},
        "concurrency_limit": flow.concurrency,
        "held": flow.held,
        "held_back_seconds": round(flow.held_back, 3),
    }


def _ready_at(message: bytes | None) -> float | None:
    try:
        return None if message is None else jobs.decode_ready_at(message)
    except jobs.MessageDecodeError:
        return None


def _limit_changes(rate: Rate | None, concurrency: int | None) -> dict[str, int | None]:
    """The settings to write for ``set_limits`` and ``set_group_limits``, checked."""
    changes: dict[str, int | None] = {}
    if rate is not UNCHANGED:
        count, period_ms = _checked_rate(rate)
        changes.update(rate=count, period=period_ms)
    if concurrency is not UNCHANGED:
        changes["concurrency"] = _checked_concurrency(concurrency)
    return changes


def _checked_rate(rate: Rate | None) -> tuple[int | None, int | None]:
    if rate is None:
        return None, None
    try:
        count, seconds = rate
    except (TypeError, ValueError):
        raise ConfigurationError(f"rate must be (jobs, seconds) or None, not {rate!r}") from None
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_RATE_JOBS:
        raise ConfigurationError(
            f"a rate limit needs 1 to {MAX_RATE_JOBS:,} jobs per period, not {count!r}"
        )
    try:
        period_ms = round(float(seconds) * 1000)
    except (TypeError, ValueError, OverflowError):  # not a number, NaN, infinite
        raise ConfigurationError(
            f"a rate limit's period must be seconds, not {seconds!r}"
        ) from None
    if not 1 <= period_ms <= MAX_RATE_PERIOD * 1000:
        raise ConfigurationError(
            f"a rate limit's period must be 1 ms to {MAX_RATE_PERIOD // 86400:g} days, "
            f"not {seconds!r} s"
        )
    return count, period_ms


def _checked_concurrency(concurrency: int | None) -> int | None:
    if concurrency is None:
        return None
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ConfigurationError(
            f"a concurrency limit must be a whole number of at least 1, not {concurrency!r} "
            "(to stop every consumer, pause the queue)"
        )
    return concurrency
