"""The Redis key names of one queue, shared with curlyq (SPEC section 3)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class QueueKeys:
    """Every key of queue ``name``; a hash tag in the name (``{emails}``) keeps them in one slot."""

    name: str

    @property
    def data(self) -> str:
        return f"{self.name}:data"

    @property
    def active(self) -> str:
        return f"{self.name}:active"

    @property
    def scheduled(self) -> str:
        return f"{self.name}:scheduled"

    @property
    def dead(self) -> str:
        return f"{self.name}:dead"

    @property
    def consumers(self) -> str:
        return f"{self.name}:consumers"

    @property
    def signal(self) -> str:
        return f"{self.name}:signal"

    @property
    def recovered(self) -> str:
        """gq's own key: job id -> recoveries from crashed consumers in a row."""
        return f"{self.name}:recovered"

    @property
    def periodic(self) -> str:
        """gq's own key: periodic schedule name -> the last occurrence handled (its cursor)."""
        return f"{self.name}:periodic"

    @property
    def periodic_rules(self) -> str:
        """gq's own key: periodic schedule name -> the rule that set its cursor."""
        return f"{self.name}:periodic:rules"

    @property
    def periodic_enqueued(self) -> str:
        """gq's own key: periodic schedule name -> the last occurrence enqueued."""
        return f"{self.name}:periodic:enqueued"

    @property
    def periodic_runtime(self) -> str:
        """gq's own key: schedule name -> a schedule added at runtime (gq.schedules)."""
        return f"{self.name}:periodic:runtime"

    @property
    def periodic_paused(self) -> str:
        """gq's own key: schedule name -> "1" for a runtime schedule that is paused."""
        return f"{self.name}:periodic:paused"

    # -- flow control (SPEC section 9, gq/scripts/lib/flow.lua) --------------------------

    @property
    def flow(self) -> str:
        """gq's own key: the queue's flow settings (paused, rate, period, concurrency) and
        the time until which a handler's RateLimited holds it back."""
        return f"{self.name}:flow"

    @property
    def held(self) -> str:
        """gq's own key: in-flight set key -> its size, for the concurrency limit."""
        return f"{self.name}:held"

    @property
    def rate(self) -> str:
        """gq's own key: the rate limit's state (GCRA's next start time, server ms)."""
        return f"{self.name}:rate"

    @property
    def cancelled(self) -> str:
        """gq's own key: id -> when a cancel was asked for a job that was in flight."""
        return f"{self.name}:cancelled"

    @property
    def events(self) -> str:
        """gq's own key: the queue's opt-in stream of job events (lib/events.lua)."""
        return f"{self.name}:events"

    @property
    def event_keys(self) -> list[str]:
        """The two keys every script that writes events takes last: the flow settings
        hash (its field events_maxlen turns the stream on) and the stream."""
        return [self.flow, self.events]

    @property
    def push_keys(self) -> list[str]:
        """The keys of push.lua, for the blocking and the asyncio producer alike."""
        return [self.data, self.active, self.signal, self.flow, self.cancelled, *self.event_keys]

    @property
    def wake_keys(self) -> list[str]:
        """The keys lib/flow.lua's wake_after_release needs: flow, active list, signal."""
        return [self.flow, self.active, self.signal]

    @property
    def periodic_keys(self) -> list[str]:
        """The keys of periodic.lua."""
        return [self.periodic, self.periodic_rules, self.periodic_enqueued, self.data,
                self.active, self.signal, self.cancelled, self.periodic_runtime,
                self.periodic_paused]  # fmt: skip

    @property
    def retry_dead_keys(self) -> list[str]:
        """The keys of retry_dead.lua."""
        return [self.dead, self.data, self.active, self.signal, self.cancelled]

    @property
    def schedule_keys(self) -> list[str]:
        """The keys of schedule.lua, for the blocking and the asyncio producer alike."""
        return [self.data, self.scheduled, self.cancelled, *self.event_keys]

    # -- results and workflows (SPEC section 16, gq/scripts/lib/outcome.lua) ------------

    def result_slot(self, ttl_ms: str, now: float) -> str:
        """gq's own key: a hash of the results kept ``ttl_ms`` that ended in the slot of
        time ``now`` falls in (id -> its end time, then its record: lib/outcome.lua). A
        slot spans a sixteenth of the TTL (a second at least): the memory a slot holds
        past its records' TTL is at most that share (docs/decisions.md)."""
        width = max(1000, int(ttl_ms) // 16)
        return f"{self.name}:result-slot:{ttl_ms}:{int(now * 1000) // width}"

    @property
    def result_slots(self) -> str:
        """gq's own key: the live result slots (sorted set: key -> when it expires, ms)."""
        return f"{self.name}:result-slots"

    @property
    def unwritten(self) -> str:
        """gq's own key: the ids recover.lua sent to dead whose outcome is still to be
        written (dead_outcome.lua)."""
        return f"{self.name}:unwritten"

    @property
    def finished(self) -> str:
        """gq's own key: the history of finished jobs (sorted set, lib/history.lua)."""
        return f"{self.name}:finished"

    @property
    def finished_settings(self) -> str:
        """gq's own key: the history's bounds ("max" entries, "ttl" seconds)."""
        return f"{self.name}:finished:settings"

    @property
    def finished_keys(self) -> list[str]:
        """The two keys every script that ends jobs takes just before its event_keys
        (lib/history.lua)."""
        return [self.finished_settings, self.finished]

    @property
    def outcome_keys(self) -> list[str]:
        """The keys fetch.lua and kill.lua take to write outcomes, in their order."""
        return [self.waiting, self.results, self.result_slots]

    def result(self, job_id: str) -> str:
        """The key an earlier gq kept a job's outcome under, one key per result: read
        still, so an upgrade finds the results kept before it until they expire."""
        return f"{self.name}:result:{job_id}"

    @property
    def results(self) -> str:
        """gq's own key: the ids of the most recent kept results, newest first (1000)."""
        return f"{self.name}:results"

    @property
    def waiting(self) -> str:
        """gq's own key: job or group id -> deadline of a caller of get() waiting for it."""
        return f"{self.name}:waiting"

    @property
    def channel(self) -> str:
        """The pub/sub channel (not a key) the outcomes of waited-for ids are published on."""
        return f"{self.name}:outcomes"

    def workflow(self, workflow_id: str) -> str:
        """gq's own key: what rebuilds a chain's or group's handle from its id (its steps
        or members), for as long as the workflow keeps its results."""
        return f"{self.name}:workflow:{workflow_id}"

    def group(self, group_id: str) -> str:
        """gq's own key: a group's state (left, failed, its callback, r:<i> results)."""
        return f"{self.name}:group:{group_id}"

    def unique(self, lock: str) -> str:
        """gq's own key: the uniqueness lock ``lock`` of a task (unique_for), holding the
        id of the job that took it (gq/scripts/push_unique.lua)."""
        return f"{self.name}:unique:{lock}"

    def progress(self, job_id: str) -> str:
        """gq's own key: the progress a running job last reported (gq/store/progress.py),
        expiring on its own; readers ignore it once the job no longer runs."""
        return f"{self.name}:progress:{job_id}"

    def inflight(self, consumer_id: str) -> str:
        return f"{self.name}:inflight:{consumer_id}"

    # -- observability keys (docs: the cross-branch contract of issue 12) ----------------

    def facts(self, consumer_id: str) -> str:
        """gq's own key: JSON facts of one consumer, written with its heartbeat."""
        return f"{self.name}:facts:{consumer_id}"

    def history(self, hour: int) -> str:
        """gq's own key: done/failed counts per minute of the hour starting at ``hour``."""
        return f"{self.name}:history:{hour}"


# The set of every queue name a gq consumer has registered on, so that readers (the
# dashboard, `gq metrics`) find queues without KEYS. A key of its own, outside any queue's
# slot on a Cluster.
QUEUE_REGISTRY = "gq:queues"

#: The same key under the name gq.metrics and gq.worker.facts use.
REGISTRY = QUEUE_REGISTRY


def sharded_key(name: str) -> str:
    """gq's own key: the descriptor of sharded queue ``name`` (gq/store/shards.py), a hash
    outside any queue's slot."""
    return f"gq:sharded:{name}"


def sharded_balancer_key(name: str) -> str:
    """gq's own key: the consumer id that balances sharded queue ``name``'s queue-wide
    limits over its shards (gq/worker/shard_limits.py), with a lease (PX)."""
    return f"gq:sharded:{name}:balancer"
