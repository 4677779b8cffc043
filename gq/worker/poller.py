"""The poller: which queue to fetch from, how many jobs, when, and what to do with what
came back (SPEC sections 5 and 9). One greenlet runs ``Poller.step`` in a loop.

- **When**: when there is room (``Prefetch``: with "auto", for at least half of what it
  holds ahead), after a signal says a queue may have jobs
  (or at once after a full batch, whose signal is still there).
- **How many**: a fixed buffer (curlyq's ``poller_buffer_size``) or "auto": the free
  handlers' worth, plus ``AUTO_HORIZON`` (100 ms) of work at the measured completion rate
  held ahead, at least 1 and at most ``poller_buffer_max`` (docs/decisions.md).
- **Which queue**: the only one; or, with several, the first that may have jobs (strict
  priority) or one drawn at random by weight among those (``--queue name:weight``).
- **Flow control** (SPEC section 9, decided by fetch.lua): a paused queue, or one whose
  concurrency limit is reached, is waited for on its signal (resume and releases raise
  it); one held back by its rate limit or a handler's RateLimited is left alone for the
  time the script said.
- **What came back**: decoded jobs go to the processor; bad data is discarded through the
  endings' path (gq/worker/endings.py); a suspect (a job recovered twice in a row)
  makes the poller wait until the consumer is idle before it fetches again, so that the
  suspect runs alone;
  after a fetch whose reply was lost, the queue's in-flight set is reconciled.
"""

from __future__ import annotations

import logging
import math
import random
import time
from collections.abc import Sequence
from dataclasses import dataclass

import redis

from gq import job as jobs
from gq.job import Job, MessageDecodeError
from gq.options import AUTO, ConsumerOptions
from gq.store.base import MAX_BATCH
from gq.store.jobs import (
    Fetched,
    RedisQueue,
    not_registered,
)
from gq.store.signals import signalled, spans_slots, wait_for_any_signal
from gq.worker.acker import Acker
from gq.worker.endings import Endings
from gq.worker.ledger import Ledger
from gq.worker.processor import Processor
from gq.worker.watchers import Watchers

log = logging.getLogger("gq.poller")

# "Auto" holds at most this much work ahead (seconds at the measured rate), so that a
# consumer does not hoard jobs an idle neighbour could run.
AUTO_HORIZON = 0.1
# A consumer waiting at its queue's concurrency limit for its own jobs to make room looks
# at the signal this often, for room that other consumers made (a bounded wait: one LINDEX
# per look, only while its own jobs are slower than this).
LIMIT_LOOK = 0.25
# The completion rate is re-measured over windows at least this long, and smoothed.
RATE_WINDOW = 0.05
RATE_SMOOTHING = 0.3


@dataclass
class Source:
    """One queue of the consumer, with what the poller knows of it."""

    queue: RedisQueue
    weight: int = 1
    more_ready: bool = True  # jobs are probably waiting (a full batch, or not yet looked)
    fetch_unsure: bool = False  # a fetch failed: its reply (and jobs) may be lost
    not_before: float = 0.0  # monotonic time before which a rate limit holds it back
    full: bool = False  # the last fetch found its concurrency limit reached
    family: str | None = None  # the sharded queue it is a shard of

    @property
    def name(self) -> str:
        return self.queue.keys.name


class Prefetch:
    """How many jobs the consumer may fetch now: ``room()`` (SPEC section 5).

    "Auto" holds 100 ms of work ahead of the free handlers. That is more than a fetch
    round trip's worth (the least that keeps handlers busy while a fetch is on the wire),
    on purpose: with short jobs a batch's fixed cost dominates, and the noop drain reaches
    the best fixed size's rate only with batches of several hundred; with long jobs 100 ms
    is less than one job per handler, so nothing is hoarded. A new consumer knows no rate
    and takes what its free handlers can start, so two consumers starting on one burst
    share it. It fetches once there is room for at least half of what it holds ahead
    (and the processor lets the poller run when the buffer is down to half): one fetch
    is on the wire while the other half runs.
    """

    def __init__(self, opts: ConsumerOptions, processor: Processor, ledger: Ledger) -> None:
        self._opts = opts
        self._processor = processor
        self._ledger = ledger
        self._rate = 0.0  # jobs finished per second, smoothed
        self._since, self._finished = time.monotonic(), 0  # the window's start

    def room(self) -> int:
        opts, processor = self._opts, self._processor
        if opts.poller_buffer_size != AUTO:
            return max(0, int(opts.poller_buffer_size) - processor.buffered())
        free = opts.processor_concurrency - processor.running
        ahead = self.ahead()
        room = free + ahead - processor.buffered()
        # At least half the jobs held ahead, or none: a top-up of a few jobs each time one
        # starts would cost a round trip per few jobs and keep the poller on the wire when
        # the buffer runs low.
        return room if room >= max(1, ahead // 2) else 0

    def ahead(self) -> int:
        """Jobs to hold beyond the free handlers: AUTO_HORIZON of work, 1 to the maximum."""
        held = math.ceil(self._rate * AUTO_HORIZON)
        return max(1, min(self._opts.poller_buffer_max, held))

    def measured(self) -> None:
        """After a fetch: update the completion rate (over RATE_WINDOW at least)."""
        now = time.monotonic()
        elapsed = now - self._since
        if elapsed >= RATE_WINDOW:
            finished = self._ledger.finished()
            self._rate = _smooth(self._rate, (finished - self._finished) / elapsed)
            self._since, self._finished = now, finished


def _smooth(old: float, new: float) -> float:
    return new if old == 0 else old + RATE_SMOOTHING * (new - old)


class Poller:
    """Fetches jobs of ``sources`` for ``processor`` (see the module's docstring). The
    acks pending in ``acker`` ride on its fetches (fetch.lua acknowledges, then takes);
    ``ledger`` says which jobs this process holds; bad data goes to ``endings``."""

    def __init__(
        self,
        sources: Sequence[Source],
        consumer_id: str,
        opts: ConsumerOptions,
        processor: Processor,
        context: str,
        *,
        acker: Acker,
        ledger: Ledger,
        endings: Endings,
    ) -> None:
        self._sources = list(sources)
        self._weighted = len({s.weight for s in sources}) > 1
        self._consumer_id = consumer_id
        self._opts = opts
        self._processor = processor
        self._acker = acker
        self._ledger = ledger
        self._endings = endings
        self._context = context
        self.prefetch = Prefetch(opts, processor, ledger)
        self.waiting = False  # in a wait that a stop may interrupt (no Redis write)
        self._isolate = False  # a suspect runs, or waits for the consumer to be idle
        # Queues in several Cluster slots: a watcher greenlet blocked on each one's signal.
        queues = [source.queue for source in self._sources]
        duration = opts.poller_poll_duration
        self._watchers = Watchers(queues, duration, context) if spans_slots(queues) else None

    def step(self) -> bool:
        """One fetch (or one wait that timed out). Always "go again" for the runner."""
        for source in self._sources:
            if source.fetch_unsure:  # first: with the queue empty, no fetch may come soon
                self._reconcile(source)
        self.waiting = True
        try:
            if self._isolate:
                self._processor.wait_idle()
            self._processor.wait_for_room(self.prefetch.room)
            chosen = self._choose()
        finally:
            self.waiting = False
        if chosen is not None:
            self._fetch(chosen)
        return True

    def _choose(self) -> Source | None:
        """The queue to fetch from, after waiting for a signal if none may have jobs;
        None when the wait timed out."""
        now = time.monotonic()
        open_ = [source for source in self._sources if source.not_before <= now]
        wait = self._opts.poller_poll_duration
        held = [source.not_before - now for source in self._sources if source.not_before > now]
        if not open_:  # every queue held back by its rate limit: sleep until the first opens
            time.sleep(min(wait, *held))  # gevent.sleep in a patched process
            return None
        wait = min(wait, *held) if held else wait
        if len(self._sources) == 1:
            return self._choose_only(self._sources[0], wait)
        candidates = self._candidates(open_)
        if not candidates:
            woken = self._wait_any(open_, wait)
            if woken is None:
                return None
            candidates = [open_[woken]]
        return self._draw(candidates)

    def _choose_only(self, only: Source, wait: float) -> Source | None:
        if only.full and self._frees_room():
            return only if self._wait_at_limit(only, wait) else None
        return only if only.more_ready or only.queue.wait_for_signal(wait) else None

    def _wait_any(self, open_: list[Source], wait: float) -> int | None:
        """Wait for a signal of the ``open_`` queues: the index of one that has it."""
        if self._watchers is None:
            return wait_for_any_signal([source.queue for source in open_], wait)
        names = [source.name for source in open_]
        woken = self._watchers.wait(names, wait)
        return None if woken is None else names.index(woken)

    def close(self) -> None:
        """Stop the signal watchers, if any (at the consumer's end)."""
        if self._watchers is not None:
            self._watchers.close()

    def _draw(self, candidates: list[Source]) -> Source:
        """The first (strict priority), or one drawn by weight; a sharded queue's turn
        goes to one of its candidate shards drawn evenly."""
        chosen = candidates[0]
        if self._weighted:
            heads = list({s.family or s.name: s for s in reversed(candidates)}.values())
            chosen = random.choices(heads, [s.weight for s in heads])[0]
        if chosen.family is None:
            return chosen
        return random.choice([s for s in candidates if s.family == chosen.family])

    def _frees_room(self) -> bool:
        """Whether a job runs, waits or is being acknowledged here: its end will make room
        under a concurrency limit (``Acker.wait_to_carry``)."""
        return bool(self._processor.running or self._processor.buffered() or self._acker.busy())

    def _wait_at_limit(self, source: Source, wait: float) -> bool:
        """At the limit: wait (at most ``wait``) for room, made here (then its acks ride on
        the fetch, freeing and refilling in one round trip) or by another consumer (the
        signal, looked at every LIMIT_LOOK); whether there may be room now."""
        deadline = time.monotonic() + wait
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            # The room this consumer can count on first is its own jobs' when they finish:
            # their acks then ride on the next fetch, freeing and refilling at once.
            if self._acker.wait_to_carry(min(left, LIMIT_LOOK)):
                return True
            if signalled([source.queue])[0]:
                return True

    def _candidates(self, sources: list[Source]) -> list[Source]:
        watchers = self._watchers
        if watchers is not None:  # what each queue's watcher saw, with no round trip
            return [s for s in sources if s.more_ready or watchers.seen(s.name)]
        # One round trip reads every queue's signal; a full batch left its signal there.
        flags = signalled([source.queue for source in sources])
        return [s for s, flag in zip(sources, flags) if flag or s.more_ready]

    def _fetch(self, source: Source) -> None:
        acker = self._acker
        # Only the poller adds to the buffer, so its room can only grow until the put.
        count = min(self.prefetch.room(), MAX_BATCH)
        source.more_ready = False
        if self._watchers is not None:
            self._watchers.take(source.name)
        source.fetch_unsure = True  # until its jobs are buffered or discarded
        carried = acker.carry(source.name)  # (those with an outcome first)
        try:
            fetched = self._fetch_registered(source, count, carried)
        except BaseException:
            acker.carried(carried, None)  # the acker sends them again
            raise
        acker.carried(carried, fetched.acked)
        self.prefetch.measured()
        self._isolate = fetched.suspect
        _learn(source, fetched, count)
        if self._watchers is not None and not source.more_ready:
            self._watchers.arm(source.name)  # its signal was cleared: watch for the next
        self._hand_over(fetched, source.name)
        source.fetch_unsure = False

    def _fetch_registered(self, source: Source, count: int, carried: list[Job]) -> Fetched:
        """Fetch, carrying the acks of ``carried`` (those with an outcome first, the order
        of the flags); when Redis no longer knows this consumer (it lost its data: a
        restart without persistence, a failover to an empty replica), register and fetch
        again at once rather than fail until the next heartbeat (fetch.lua refused before
        acking)."""
        # Idle once the acks this fetch carries are done (fetch.lua does them first).
        idle = self._processor.quiet() and self._acker.only_carried()
        outcomes = [(job.id, job.outcome) for job in carried if job.outcome is not None]
        acks = [job.id for job in carried[len(outcomes) :]]
        fetch = source.queue.fetch
        try:
            return fetch(self._consumer_id, count, idle=idle, acks=acks, outcomes=outcomes)
        except redis.ResponseError as exc:
            if not not_registered(exc):
                raise
        log.warning("%s: not registered on %s (Redis lost its data?): registering again",
                    self._context, source.name)  # fmt: skip
        for other in self._sources:
            other.queue.register(self._consumer_id)
        return fetch(self._consumer_id, count, idle=idle, acks=acks, outcomes=outcomes)

    def _hand_over(self, fetched: Fetched, queue: str) -> None:
        """Good jobs to the processor's buffer; bad data to its outcome path."""
        good: list[Job] = []
        bad: list[tuple[Job, bytes | None, str]] = []
        decode = jobs.decode
        sampling = self._ledger.sampler.every  # 0 (metrics off): no job is offered
        offered: list[bytes] = []  # the good jobs' messages, while sampling
        for job_id, message in fetched:
            try:
                if message is None:
                    raise MessageDecodeError("its message is missing")
                job = decode(message)
                if job.id != job_id:
                    raise MessageDecodeError(f"its message names another id, {job.id!r}")
            except MessageDecodeError as exc:
                bad.append((_placeholder(job_id, queue), message, str(exc)))
                continue
            job.queue = queue
            if sampling:
                offered.append(message)
            good.append(job)
        if sampling:
            self._ledger.sampler.offer(good, offered)
        self._processor.put(good)
        for job, message, reason in bad:
            self._endings.discard(job, message, reason)

    def reconcile_unsure(self) -> None:
        """At a stop, the poller gone: reconcile every queue whose fetch was cut short.
        A kill decided while the poller waited lands on a later turn of the hub, where
        the poller may be inside its next fetch: Redis took those jobs for this consumer
        and nobody reads the reply."""
        for source in self._sources:
            if source.fetch_unsure:
                self._reconcile(source)

    def _reconcile(self, source: Source) -> None:
        """After a failed fetch: give back the jobs Redis says this consumer holds but
        this process does not (a fetch whose reply was lost). Only the poller fetches,
        and it is here, so no fetch is in flight; an id acknowledged meanwhile is not
        in the set any more, and requeue moves only what it still finds there."""
        queue = source.queue
        stray = self._ledger.stray(source.name, queue.inflight_ids(self._consumer_id))
        if stray:
            count = queue.requeue(self._consumer_id, sorted(stray))
            log.warning("%s: a fetch's reply was lost; gave back %d job(s) of %s",
                        self._context, count, source.name)  # fmt: skip
        source.fetch_unsure = False


def _learn(source: Source, fetched: Fetched, count: int) -> None:
    """What a fetch's reply says of its queue: more ready, held back, at its limit."""
    # A batch cut short before a suspect leaves jobs behind it: look again at once. A
    # limit's cut does too, but the limit says when to look.
    source.more_ready = (len(fetched) == count and fetched.state == "ok") or fetched.suspect
    if fetched.state == "wait":
        source.not_before = time.monotonic() + fetched.wait
    source.full = fetched.state == "full"


def _placeholder(job_id: str, queue: str) -> Job:
    job = Job(id=job_id)
    job.queue = queue
    return job
