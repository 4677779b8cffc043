"""Where kept results live (issue 22's cost, lib/outcome.lua): the results of one TTL that
end in one slot of time share a hash, listed in the slots registry; a reader takes a
record as gone once its TTL has passed since it ended, whatever its slot's own expiry;
an id kept twice reads as its latest; a key of an earlier gq (one per result) is read
still; a wrong type at any of these keys is refused before anything is written. On
fakeredis and a real Redis."""

from __future__ import annotations

import time

import pytest
import redis

import gq
from gq import job as jobs
from gq.store.base import as_text
from gq.store.outcomes import finish, read_state, recent
from gq.store.tasks import TaskQueue
from gq.tasks import envelope
from gq.tasks.outcome import Op, Outcome, finisher, pack
from tests.helpers import Backend, kept_pttl


def _queue(backend: Backend, opts: list[dict[str, object]]) -> TaskQueue:
    """A queue whose jobs j0.. (one per opts) are fetched by consumer "c"."""
    queue = TaskQueue(backend.client(), backend.queue)
    queue.register("c")
    queue.push([(f"j{i}", jobs.encode(gq.Job(f"j{i}", envelope.encode("noop", [i], {}, o))))
                for i, o in enumerate(opts)])  # fmt: skip
    assert len(queue.fetch("c", len(opts))) == len(opts)
    return queue


def _done(queue: TaskQueue, job_id: str, value: object) -> Outcome:
    job = jobs.decode(queue.client.hget(queue.keys.data, job_id))
    found = finisher(job, envelope.fields(job.data))
    assert found is not None
    return found.done(value)


def _stored(at: float, value: object) -> bytes:
    """A record as lib/outcome.lua stores it, ended at server time ``at``."""
    stamp = f"{at:.6f}".encode()
    body = pack({"status": "done", "value": value, "task": "noop", "attempt": 1, "args": [],
                 "kwargs": {}})  # fmt: skip
    return bytes([0xA0 + len(stamp)]) + stamp + body


def _server_now(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return float(seconds) + micros / 1e6


def test_a_batch_of_two_ttls_keeps_each_in_its_slot_with_its_ttl(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 60}, {"result_ttl": 120}, {"result_ttl": 60}])
    done = [(f"j{i}", _done(queue, f"j{i}", i * 10)) for i in range(3)]
    assert finish(queue, "c", done) == [True, True, True]
    for job_id, ttl_ms in (("j0", 60_000), ("j1", 120_000), ("j2", 60_000)):
        record = read_state(queue, job_id).record
        assert record is not None and record.value == int(job_id[1:]) * 10
        left = kept_pttl(queue.client, queue.keys.name, job_id)
        assert left is not None and ttl_ms - 5_000 < left <= ttl_ms
    slots = queue.client.zrange(queue.keys.result_slots, 0, -1)
    assert len(slots) == 2  # one hash per TTL, not a key per result
    assert sorted(queue.client.hlen(slot) for slot in slots) == [1, 2]
    assert [r for r, _ in recent(queue, 10)] == ["j2", "j1", "j0"]


def test_a_record_whose_ttl_passed_is_missing_though_its_slot_lives(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 60}])
    client = queue.client
    slot = queue.keys.result_slot("60000", time.time())
    now = _server_now(client)
    client.hset(slot, mapping={"old": _stored(now - 61, "stale"), "new": _stored(now - 59, "ok")})
    client.pexpire(slot, 60_000)
    client.zadd(queue.keys.result_slots, {slot: now * 1000 + 60_000})
    assert read_state(queue, "old").record is None  # ended 61 s ago: a 60 s TTL is over
    assert read_state(queue, "old").known is False
    fresh = read_state(queue, "new").record
    assert fresh is not None and fresh.value == "ok"
    assert [i for i, _ in recent(queue, 10)] == []  # (the index lists neither)
    client.lpush(queue.keys.results, "old", "new")
    assert [i for i, _ in recent(queue, 10)] == ["new"]


def test_a_slot_the_registry_says_expired_is_not_read(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 60}])
    client = queue.client
    slot = queue.keys.result_slot("60000", time.time())
    now = _server_now(client)
    client.hset(slot, "gone", _stored(now - 1, "x"))
    client.zadd(queue.keys.result_slots, {slot: now * 1000 - 1})
    assert read_state(queue, "gone").record is None


def test_an_id_kept_twice_reads_as_its_latest(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 60}])
    client = queue.client
    now = _server_now(client)
    first, second = (f"{queue.keys.name}:result-slot:60000:{n}" for n in (1, 2))
    client.hset(second, "j", _stored(now - 30, "first run"))
    client.hset(first, "j", _stored(now - 2, "run again from dead"))
    client.zadd(queue.keys.result_slots, {first: now * 1000 + 5_000, second: now * 1000 + 5_000})
    record = read_state(queue, "j").record
    assert record is not None and record.value == "run again from dead"


def test_a_result_an_earlier_gq_kept_under_its_own_key_is_read(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 60}])
    queue.client.set(queue.keys.result("old"), _stored(_server_now(queue.client), 7), px=60_000)
    record = read_state(queue, "old").record
    assert record is not None and record.value == 7


@pytest.mark.parametrize("where", ["registry", "slot"])
def test_a_wrong_type_is_refused_before_any_ack(backend: Backend, where: str) -> None:
    queue = _queue(backend, [{"result_ttl": 60}])
    out = _done(queue, "j0", 1)
    key = (queue.keys.result_slots if where == "registry"
           else queue.keys.result_slot("60000", time.time()))  # fmt: skip
    queue.client.set(key, "not gq's")
    with pytest.raises(redis.ResponseError, match="GQWRONGTYPE"):
        finish(queue, "c", [("j0", out)])
    with pytest.raises(redis.ResponseError, match="GQWRONGTYPE"):
        queue.fetch("c", 1, outcomes=[("j0", out)])
    assert queue.inflight_ids("c") == {"j0"}  # nothing acknowledged: the job is not lost
    assert queue.client.hget(queue.keys.data, "j0") is not None


def test_a_kill_keeps_the_failure_in_its_ttls_slot(backend: Backend) -> None:
    queue = _queue(backend, [{"result_ttl": 90}])
    job = jobs.decode(queue.client.hget(queue.keys.data, "j0"))
    found = finisher(job, envelope.fields(job.data))
    assert found is not None
    assert queue.kill("c", "j0", None, dead_max_jobs=100, dead_max_age=3600,
                      outcome=found.failed("broken"))  # fmt: skip
    state = read_state(queue, "j0")
    assert state.record is not None and state.record.status == "failed"
    assert state.record.error == "broken" and state.dead
    left = kept_pttl(queue.client, queue.keys.name, "j0")
    assert left is not None and 85_000 < left <= 90_000


class _Interleaved:
    """A client whose non-transactional pipelines run command by command, with another
    client's ``call`` landing right after the first ``after`` command: what Redis may do
    between the commands of a pipeline sent by one client."""

    def __init__(self, client: redis.Redis, after: str, call: object) -> None:
        self._client, self._after, self._call = client, after, call

    def pipeline(self, transaction: bool = False) -> _Interleaved:
        self._queued: list[tuple[str, tuple[object, ...], dict[str, object]]] = []
        return self

    def __getattr__(self, name: str) -> object:
        def queue(*args: object, **kwargs: object) -> _Interleaved:
            self._queued.append((name, args, kwargs))
            return self

        return queue

    def execute(self) -> list[object]:
        replies = []
        for name, args, kwargs in self._queued:
            replies.append(getattr(self._client, name)(*args, **kwargs))
            if name == self._after and self._call is not None:
                self._call, call = None, self._call
                call()  # type: ignore[operator]
        return replies


@pytest.mark.parametrize("after", ["hget", "zscore", "time", "zrange", "mget"])
def test_a_job_that_ends_while_its_state_is_read_is_found_somewhere(
    backend: Backend, after: str
) -> None:
    # The slots registry was read before the message: a job acknowledged in between (its
    # result in a slot the read had not listed, its message gone) read as unknown, and
    # get() raised "gq knows nothing of it" for a job that had just succeeded.
    queue = _queue(backend, [{"result_ttl": 60}])
    outcome = _done(queue, "j0", 42)
    reader = TaskQueue(backend.client(), backend.queue)
    reader.client = _Interleaved(  # type: ignore[assignment]
        reader.client, after, lambda: finish(queue, "c", [("j0", outcome)])
    )
    state = read_state(reader, "j0")
    assert state.known, f"a job done after the {after} of its read was found nowhere"
    assert state.record is None or state.record.value == 42


def test_a_batch_mixing_plain_results_and_workflow_steps_of_one_ttl_keeps_all(
    backend: Backend,
) -> None:
    # Plain results and full entries (a step with a follow-up) of one TTL share the list
    # that one HSET writes; the plain ones were appended by their own count and the others
    # by the list's length, so each overwrote the other's: a step's id was indexed but its
    # record gone ("gq knows nothing of it" for a chain step that had run).
    queue = _queue(backend, [{"result_ttl": 60}] * 6)
    done: list[tuple[str, Outcome]] = []
    for i in range(6):
        plain = _done(queue, f"j{i}", i)
        if i % 2:  # a step whose success enqueues the next job
            follow = gq.Job(f"next{i}", envelope.encode("noop", [i], {}, {}))
            push = Op("push", queue.keys.name, [follow.id, jobs.encode(follow)])
            plain = Outcome(plain.record, plain.ttl, [push])
        done.append((f"j{i}", plain))
    assert finish(queue, "c", done) == [True] * 6
    for i in range(6):
        record = read_state(queue, f"j{i}").record
        assert record is not None and record.value == i, f"j{i}'s record was lost"
    assert {as_text(i) for i in queue.client.lrange(queue.keys.active, 0, -1)} == {
        "next1", "next3", "next5"}
