"""One run of a consumer: the rooms a job walks through, built and wired once, and the
loops that drive them (SPEC section 5).

A job's walk visits each room once: the poller fetches it into the processor's buffer,
a handler runs it, the acker acknowledges it (alone, or on the poller's next fetch), the
ledger lets it go and counts it. The consumer builds the acker and hands it to the
poller and the processor; nothing relays between them.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Callable

import redis

from gq.errors import GQError
from gq.job import Job, by_queue
from gq.options import ConsumerOptions
from gq.store.base import describe
from gq.store.jobs import RedisQueue
from gq.worker.acker import Acker
from gq.worker.arguments import retry_policy
from gq.worker.endings import Endings
from gq.worker.facts import Reporter, report_interval
from gq.worker.ledger import Ledger
from gq.worker.liveness import Liveness
from gq.worker.loops import Loop
from gq.worker.maintenance import Maintenance
from gq.worker.periodic_runner import PeriodicRunner
from gq.worker.poller import Poller, Source
from gq.worker.processor import Handler, Processor
from gq.worker.recorder import Recorder
from gq.worker.shard_limits import INTERVAL as BALANCE_INTERVAL
from gq.worker.shard_limits import Balancer

log = logging.getLogger("gq.consumer")

# How often a consumer holding jobs reads the queues' cancel requests: a running job is
# interrupted within this (SPEC section 9: "within a second"), at one read per queue.
CANCEL_POLL = 0.5


class Run:
    """The ledger, acker, processor, poller and reporter of one run, and the steps of the
    loops that use them (the canceller's and the reporter's)."""

    def __init__(
        self,
        queues: Mapping[str, RedisQueue],
        sources: list[Source],
        consumer_id: str,
        opts: ConsumerOptions,
        recorders: Mapping[str, Recorder],
        handler: Handler,
        on_fatal: Callable[[GQError], None],
        context: str,
    ) -> None:
        self._queues = queues
        self._id = consumer_id
        self._context = context
        self.ledger = ledger = Ledger(recorders)
        self.acker = acker = Acker(queues, consumer_id, opts, ledger.acked, on_fatal, context)
        endings = Endings(queues, consumer_id, opts, ledger, acker, on_fatal, context)
        self.endings = endings
        self.processor = processor = Processor(
            queues, consumer_id, opts, handler, on_fatal, context, ledger, acker, endings
        )
        self.poller = Poller(sources, consumer_id, opts, processor, context, acker=acker,
                             ledger=ledger, endings=endings)  # fmt: skip
        self.reporter = Reporter(queues, consumer_id, opts, recorders, context,
                                 running=lambda: processor.running)  # fmt: skip

    def cancel_step(self) -> bool:
        """Act on the cancel requests (gq.Queue.cancel) for jobs this consumer holds: the
        held ids of each queue looked up in its cancel set every CANCEL_POLL seconds (one
        round trip per queue holding any), however many other requests stand there."""
        for name, queue in self._queues.items():
            held = self.ledger.held[name]
            wanted = queue.cancel_requested(list(held)) if held else set()
            if wanted:
                self.processor.cancel(name, wanted)
        return False

    def report_step(self) -> bool:
        """Write the facts and history (every report interval: never one write per job)."""
        self.reporter.beat()  # never raises
        return False

    def give_back(self) -> None:
        """At a stop, the poller gone: settle what a fetch cut short by the stop took
        (Poller.reconcile_unsure), then requeue the buffered jobs, which never started."""
        try:
            self.poller.reconcile_unsure()
        except redis.RedisError as exc:  # left in flight: the custodians recover them
            log.warning("%s: could not reconcile a cut fetch: %s", self._context, describe(exc))
        buffered = self.processor.take_buffered()
        if buffered:
            _give_back(self._queues, self._id, buffered, self._context)


def _give_back(queues: Mapping[str, RedisQueue], consumer_id: str, buffered: list[Job],
               context: str) -> None:  # fmt: skip
    groups = by_queue(buffered)
    try:
        count = sum(queues[name].requeue(consumer_id, [job.id for job in group])
                    for name, group in groups.items())  # fmt: skip
    except redis.RedisError as exc:
        # Left in flight: the custodians recover them once this consumer is gone.
        log.warning("%s: could not give back %d buffered job(s): %s", context, len(buffered),
                    describe(exc))  # fmt: skip
        return
    log.info("%s: gave back %d buffered job(s)", context, count)


def run_loops(
    run: Run,
    maintenance: Maintenance,
    liveness: Liveness,
    periodic: PeriodicRunner | None,
    opts: ConsumerOptions,
    context: str,
    balancer: Balancer | None = None,
) -> dict[str, Loop]:
    """The poller, the maintenance loops and their intervals (read at every turn)."""
    # name: (step, interval, whose retry options)
    plan: dict[str, tuple[Callable[[], bool], Callable[[], float], str]] = {
        "Poller": (run.poller.step, lambda: 0.0, "poller"),
        "Heartbeat": (liveness.heartbeat_step, lambda: opts.heartbeat_poll_interval, "heartbeat"),
        "Scheduler": (maintenance.scheduler_step, lambda: _scheduler_delay(maintenance, opts),
                      "scheduler"),  # fmt: skip
        "Custodian": (maintenance.custodian_step, lambda: opts.custodian_poll_interval,
                      "custodian"),  # fmt: skip
        "Canceller": (run.cancel_step, lambda: CANCEL_POLL, "poller"),
        "Reporter": (run.report_step, lambda: report_interval(opts), "heartbeat"),
    }
    if maintenance.listener.usable and opts.scheduler_wake:
        # Blocks in its step; once refused by the ACL it only waits, a poll at a time.
        plan["Due"] = (maintenance.listener.step,
                       lambda: opts.scheduler_poll_interval * maintenance.listener.refused,
                       "wake")  # fmt: skip
    if periodic is not None:  # sleeps until its next occurrence, at most the scheduler's
        plan["Periodic"] = (periodic.step, lambda: periodic.delay(opts.scheduler_poll_interval),
                            "scheduler")  # fmt: skip
    if balancer is not None:  # a sharded queue's queue-wide limits follow its load
        plan["Balancer"] = (balancer.step, lambda: BALANCE_INTERVAL, "custodian")
    loops = {name: _loop(name, *what, opts, context) for name, what in plan.items()}
    if opts.scheduler_wake:
        loops["Scheduler"].wake = maintenance.due.wake
    return loops


def _scheduler_delay(maintenance: Maintenance, opts: ConsumerOptions) -> float:
    poll = opts.scheduler_poll_interval
    return maintenance.due.delay(poll) if opts.scheduler_wake else poll


def _loop(name: str, step: Callable[[], bool], interval: Callable[[], float], family: str,
          opts: ConsumerOptions, context: str) -> Loop:  # fmt: skip
    attempts, backoff = retry_policy(opts, family)
    return Loop(name, step, interval=interval, max_attempts=attempts, max_backoff=backoff,
                context=context)  # fmt: skip
