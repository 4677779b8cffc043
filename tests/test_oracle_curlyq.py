"""curlyq's own Lua as an oracle for gq's scripts (issue 33).

A Hypothesis state machine runs the same random sequence of operations (push, schedule
at a time, enqueue due, register, fetch, ack, retry, kill, crash and recover, clock steps)
through curlyq's scripts (read from its Go source: tests/curlyq_lua.py) on one queue and
through gq's store layer on another, on the test session's Redis, and compares every key
curlyq knows (data, active, scheduled, dead, consumers, in-flight sets, signal) after
every step. The two queues have names unique to the run, so nothing else in the suite
can touch them.

Time: curlyq's scripts take the time as an ARGV, gq's read the server's TIME. The test
keeps a virtual clock, the server's time plus ``skew``: curlyq gets it as its ARGV. A clock
step adds to ``skew``; gq's server time cannot be stepped, so the step moves every time gq
stored (scores of scheduled, dead, consumers) back by as much, which keeps each time's
distance from "now" the same on both sides. Scores are compared in that frame, within
SLACK seconds (the moments each side read the clock differ by a few round trips).

Where gq differs from curlyq on purpose, BY_DESIGN says so, once, with its reason; the
test checks that gq did what its docs promise, then brings curlyq's queue to the same
state so that the comparison can go on. Any other difference fails the test.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import redis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule, run_state_machine_as_test

import gq
from gq import job as jobs
from gq.store.keys import QueueKeys
from tests.curlyq_lua import CurlyqScripts, script_sources
from tests.helpers import NO_RETRY, RedisServer, delete_keys
from tests.queue_sides import BothSides

# The differences between curlyq and gq that are gq's documented improvements (the
# README's "better than curlyq" list, docs/wire.md); nothing else may differ.
BY_DESIGN = {
    "poison": "a job recovered more than max_recoveries times in a row, from crashes it ran "
    "alone in, goes to dead with the reason in its message (and a recovery that queued "
    "nothing raises no signal); curlyq queues it forever",
    "suspect_alone": "a job recovered twice or more in a row is fetched alone and a batch "
    "stops before it, so a poison job charges no neighbour; curlyq fetches it with others",
    "recovered_order": "recovery queues a crashed consumer's ids in its set's order; curlyq "
    "SPOPs them, in random order, so only the recovered ids (not their order) are compared",
    "own_lease": "gq's custodian never recovers its own consumer's jobs; curlyq's recovers "
    "every expired consumer (the test heartbeats the rescuer first, as a live one does)",
}

IDS = st.sampled_from([f"id{i}" for i in range(8)])
CONSUMERS = st.sampled_from(["c0", "c1", "c2"])
OFFSETS = st.sampled_from([-100.0, 100.0])
MAX_RECOVERIES = 2
TIMEOUT = 10.0  # the custodian's cut-off: heartbeat + consumer timeout, in seconds
SLACK = 5.0  # seconds between the two sides' readings of the clock, at most
BIG = 1_000_000  # dead_max_jobs and dead_max_age: curlyq never trims its dead set


def curlyq_keys(keys: QueueKeys) -> dict[str, str]:
    return {"data": keys.data, "active": keys.active, "scheduled": keys.scheduled,
            "dead": keys.dead, "consumers": keys.consumers, "signal": keys.signal}  # fmt: skip


class OracleMachine(RuleBasedStateMachine):
    server: RedisServer | None = None
    sources: dict[str, str] = {}

    def __init__(self) -> None:
        super().__init__()
        assert self.server is not None
        self.client = self.server.client(retry=NO_RETRY)
        run = uuid.uuid4().hex[:8]
        self.cq_keys, self.gq_name = QueueKeys(f"oracle_cq_{run}"), f"oracle_gq_{run}"
        self.gq = BothSides(self.client, self.gq_name)
        self.cq = CurlyqScripts(self.client, self.sources)
        self.skew = 0.0
        self.attempt: dict[str, int] = {}

    def teardown(self) -> None:
        for name in (self.cq_keys.name, self.gq_name):
            delete_keys(self.client, f"{name}*")
        self.client.close()

    def now(self) -> float:
        """The virtual clock: what curlyq's scripts are told the time is."""
        return self.gq.server_time() + self.skew

    def message(self, job_id: str) -> bytes:
        return jobs.encode(gq.Job(id=job_id, data=b"d", attempt=self.attempt.get(job_id, 0)))

    def both(self, curlyq: Any, gq_side: Any) -> tuple[Any, Any]:
        """Each side's reply, or the ResponseError it raised."""
        return _reply(curlyq), _reply(gq_side)

    # -------------------------------------------------------------- producer

    @rule(job_id=IDS)
    def push(self, job_id: str) -> None:
        k, msg = self.cq_keys, self.message(job_id)
        cq = self.cq.run("pushJob", [k.data, k.active, k.signal], [job_id, msg])
        assert [bool(cq)] == self.gq.push([(job_id, msg)])

    @rule(job_id=IDS, offset=OFFSETS)
    def schedule_at(self, job_id: str, offset: float) -> None:
        k, msg, at = self.cq_keys, self.message(job_id), self.now() + offset
        cq = self.cq.run("scheduleJob", [k.data, k.scheduled], [job_id, msg, repr(at)])
        assert [bool(cq)] == self.gq.schedule([(job_id, msg, at - self.skew)], relative=False)

    @rule()
    def enqueue_due(self) -> None:
        k = self.cq_keys
        cq = self.cq.run("enqueueScheduledJobs", [k.scheduled, k.active, k.signal],
                         [repr(self.now()), 1000])  # fmt: skip
        assert cq == self.gq.enqueue_due(1000)

    # -------------------------------------------------------------- consumer

    @rule(consumer=CONSUMERS)
    def register(self, consumer: str) -> None:
        self.cq.run("registerConsumer", [self.cq_keys.consumers],
                    [repr(self.now()), self.cq_keys.inflight(consumer)])  # fmt: skip
        self.gq.register(consumer)

    @rule(consumer=CONSUMERS, count=st.integers(1, 4))
    def fetch(self, consumer: str, count: int) -> None:
        gq_side = _reply(lambda: self.gq.fetch(consumer, count))
        if isinstance(gq_side, gq.store.jobs.Fetched) and len(gq_side) < count:
            head = self.client.lrange(self.cq_keys.active, 0, count - 1)
            if len(head) > len(gq_side):  # BY_DESIGN["suspect_alone"]: gq stopped short
                assert gq_side.state == "suspect" or self._suspect(head[len(gq_side)])
                count = len(gq_side)
        k, inflight = self.cq_keys, self.cq_keys.inflight(consumer)
        cq = _reply(lambda: self.cq.run("getJobs", [k.consumers, k.active, inflight, k.data,
                                                    k.signal], [count, inflight]))  # fmt: skip
        if isinstance(cq, Exception) or isinstance(gq_side, Exception):
            assert "not registered" in str(cq) and "GQNOTREGISTERED" in str(gq_side)
            return
        assert cq == [message for _, message in gq_side]

    def _suspect(self, job_id: bytes) -> bool:
        return int(self.client.hget(self.gq.keys.recovered, job_id) or 0) >= 2

    @rule(consumer=CONSUMERS, job_id=IDS)
    def ack(self, consumer: str, job_id: str) -> None:
        cq = self.cq.run("ackJob", [self.cq_keys.inflight(consumer), self.cq_keys.data], [job_id])
        assert [bool(cq)] == self.gq.ack(consumer, [job_id])

    def _next_attempt(self, consumer: str, job_id: str) -> bytes:
        if self.client.sismember(self.cq_keys.inflight(consumer), job_id):
            self.attempt[job_id] = self.attempt.get(job_id, 0) + 1
        return self.message(job_id)

    @rule(consumer=CONSUMERS, job_id=IDS, delay=OFFSETS)
    def retry(self, consumer: str, job_id: str, delay: float) -> None:
        k, msg = self.cq_keys, self._next_attempt(consumer, job_id)
        cq = self.cq.run("retryJob", [k.inflight(consumer), k.scheduled, k.data],
                         [job_id, repr(self.now() + delay), msg])  # fmt: skip
        assert bool(cq) == self.gq.retry(consumer, job_id, msg, delay)

    @rule(consumer=CONSUMERS, job_id=IDS)
    def kill(self, consumer: str, job_id: str) -> None:
        k, msg = self.cq_keys, self._next_attempt(consumer, job_id)
        cq = self.cq.run("killJob", [k.inflight(consumer), k.dead, k.data],
                         [job_id, repr(self.now()), msg])  # fmt: skip
        gq_side = self.gq.kill(consumer, job_id, msg, dead_max_jobs=BIG, dead_max_age=BIG)
        assert bool(cq) == gq_side

    # -------------------------------------------------------------- crashes and time

    @rule(dead=CONSUMERS, rescuer=CONSUMERS)
    def crash_and_recover(self, dead: str, rescuer: str) -> None:
        """``dead`` stops heartbeating long enough; ``rescuer``'s custodian runs."""
        if dead == rescuer:
            return
        for keys, now in ((self.cq_keys, self.now()), (self.gq.keys, self.gq.server_time())):
            if self.client.zscore(keys.consumers, keys.inflight(dead)) is not None:
                self.client.zadd(keys.consumers, {keys.inflight(dead): now - 1000})
        self.register(rescuer)  # BY_DESIGN["own_lease"]
        self.recover(rescuer)

    def recover(self, rescuer: str) -> None:
        k, before = self.cq_keys, set(self.client.lrange(self.gq.keys.active, 0, -1))
        cq = self.cq.run("reenqueueOrphanedJobs", [k.consumers, k.active, k.signal],
                         [repr(self.now() - TIMEOUT), 1000])  # fmt: skip
        expired = self.gq.expired_consumers(TIMEOUT, 100)
        moved = self.gq.recover(rescuer, expired, timeout=TIMEOUT, max_jobs=1000,
                                max_recoveries=MAX_RECOVERIES, dead_max_jobs=BIG,
                                dead_max_age=BIG)  # fmt: skip
        assert cq == moved
        if moved:
            self._align(moved, before)

    def _align(self, moved: int, active_before: set[bytes]) -> None:
        """Bring curlyq's queue to gq's after a recovery that moved ``moved`` ids: the
        same ids, in gq's order (BY_DESIGN["recovered_order"]), and those gq sent to dead
        in curlyq's dead set too (BY_DESIGN["poison"])."""
        recovered = self.client.lrange(self.cq_keys.active, -moved, -1)
        queued = [i for i in self.client.lrange(self.gq.keys.active, 0, -1)
                  if i not in active_before]  # fmt: skip
        poisoned = self._poisoned()
        assert sorted(recovered) == sorted(queued + list(poisoned)), (recovered, queued)
        pipe = self.client.pipeline()
        pipe.ltrim(self.cq_keys.active, 0, -moved - 1)
        if queued:
            pipe.rpush(self.cq_keys.active, *queued)
        for job_id, (score, message) in poisoned.items():
            assert jobs.decode(message).attempt == self.attempt.get(job_id.decode(), 0)
            pipe.zadd(self.cq_keys.dead, {job_id: score + self.skew})
            pipe.hset(self.cq_keys.data, job_id, message)
        if not queued and not self.client.exists(self.gq.keys.signal):
            pipe.delete(self.cq_keys.signal)  # every recovered id went to dead: no signal
        pipe.execute()

    def _poisoned(self) -> dict[bytes, tuple[float, bytes]]:
        """Ids in gq's dead set and not in curlyq's: their score and gq's message."""
        cq_dead = set(self.client.zrange(self.cq_keys.dead, 0, -1))
        found = {}
        for job_id, score in self.client.zrange(self.gq.keys.dead, 0, -1, withscores=True):
            if job_id not in cq_dead:
                message = self.client.hget(self.gq.keys.data, job_id)
                assert message is not None, job_id
                found[job_id] = (score, message)
        return found

    @rule(step=st.sampled_from([30.0, 150.0, 1000.0]))
    def clock_step(self, step: float) -> None:
        """Time passes: later for curlyq's ARGV, earlier stored times for gq."""
        self.skew += step
        keys = self.gq.keys
        for key in (keys.scheduled, keys.dead, keys.consumers):
            entries = self.client.zrange(key, 0, -1, withscores=True)
            if entries:
                self.client.zadd(key, {member: score - step for member, score in entries})

    # -------------------------------------------------------------- the comparison

    @invariant()
    def curlyq_keys_agree(self) -> None:
        cq, gq_side = self._state(self.cq_keys, self.skew), self._state(self.gq.keys, 0.0)
        for name in cq:
            assert cq[name] == gq_side[name], (name, cq[name], gq_side[name])
        for name in ("scheduled", "dead", "consumers"):
            for member, score in self._scores(self.cq_keys, name).items():
                other = self._scores(self.gq.keys, name)[member]
                assert abs(score - self.skew - other) <= SLACK, (name, member, score, other)

    def _scores(self, keys: QueueKeys, name: str) -> dict[str, float]:
        prefix = f"{keys.name}:"
        entries = self.client.zrange(curlyq_keys(keys)[name], 0, -1, withscores=True)
        return {member.decode().removeprefix(prefix): score for member, score in entries}

    def _state(self, keys: QueueKeys, skew: float) -> dict[str, object]:
        """curlyq's keys of one queue, with the queue's name taken out of key names."""
        c = self.client
        state: dict[str, object] = {
            "data": c.hgetall(keys.data),
            "active": c.lrange(keys.active, 0, -1),
            "signal": c.lrange(keys.signal, 0, -1),
        }
        for name in ("scheduled", "dead", "consumers"):
            state[name] = sorted(self._scores(keys, name))
        for consumer in ("c0", "c1", "c2"):
            state[f"inflight:{consumer}"] = c.smembers(keys.inflight(consumer))
        return state


def _reply(call: Any) -> Any:
    try:
        return call()
    except redis.ResponseError as exc:
        return exc


@pytest.mark.timeout(180)
def test_gq_scripts_leave_curlyqs_keys_as_curlyqs_own_lua_does(redis_server: RedisServer) -> None:
    OracleMachine.server = redis_server
    OracleMachine.sources = script_sources()
    run_state_machine_as_test(
        OracleMachine,
        settings=settings(
            max_examples=60,
            stateful_step_count=40,
            deadline=None,
            suppress_health_check=list(HealthCheck),
        ),  # fmt: skip
    )


def test_a_missing_curlyq_tree_skips_or_fails_when_required(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    monkeypatch.setenv("GQ_SHARED_DIR", str(tmp_path / "nowhere"))
    for required, expected in (("", pytest.skip.Exception), ("1", pytest.fail.Exception)):
        monkeypatch.setenv("GQ_REQUIRE_INTEROP", required)
        with pytest.raises(expected, match="curlyq source tree is missing"):
            script_sources()


def test_every_script_curlyq_loads_is_found_in_its_go_source() -> None:
    names = set(script_sources())
    assert names == {"ackJob", "enqueueScheduledJobs", "getJobs", "killJob", "pushJob",
                     "reenqueueActiveJobs", "reenqueueOrphanedJobs", "registerConsumer",
                     "retryJob", "scheduleJob"}  # fmt: skip
