"""Results ride on the poller's fetch (issue 22's cost): fetch.lua acknowledges the acks
that write an outcome as ack_results.lua does, in the same call, before it takes; the
acker hands them to the fetch (those with an outcome first) and sends them again itself
when the fetch's reply is lost. On fakeredis and a real Redis."""

from __future__ import annotations

import gevent

import gq
from gq import job as jobs
from gq.store.outcomes import PLAIN, finish, read_state
from gq.store.tasks import TaskQueue
from gq.tasks import envelope
from gq.tasks.outcome import Outcome, Record, finisher
from gq.worker.acker import Acker
from tests.helpers import Backend, kept_pttl

KEEP = {"result_ttl": 60}
THEN = "then"


def _queue(backend: Backend, n: int, opts: dict[str, object] | None = None) -> TaskQueue:
    """A queue with ``n`` noop task jobs j0..j<n-1> fetched by consumer "c"."""
    queue = TaskQueue(backend.client(), backend.queue)
    queue.register("c")
    data = envelope.encode("noop", [7], {"k": "v"}, KEEP if opts is None else opts)
    queue.push([(f"j{i}", jobs.encode(gq.Job(f"j{i}", data))) for i in range(n)])
    assert len(queue.fetch("c", n)) == n
    return queue


def _done(queue: TaskQueue, job_id: str, value: object) -> Outcome:
    message = queue.client.hget(queue.keys.data, job_id)
    job = jobs.decode(message)
    found = finisher(job, envelope.fields(job.data))
    assert found is not None
    return found.done(value)


def _record(queue: TaskQueue, job_id: str) -> Record | None:
    return read_state(queue, job_id).record


def test_a_fetch_writes_the_outcomes_it_carries_then_takes(backend: Backend) -> None:
    queue = _queue(backend, 2)
    queue.push([("next", jobs.encode(gq.Job("next", b"x")))])
    kept = [("j0", _done(queue, "j0", {"a": 1})), ("j1", _done(queue, "j1", None))]
    fetched = queue.fetch("c", 1, outcomes=kept)
    assert fetched.acked == [True, True]
    assert [i for i, _ in fetched] == ["next"]
    first = _record(queue, "j0")
    assert first is not None and first.status == "done" and first.value == {"a": 1}
    assert (first.task, first.args, first.kwargs) == ("noop", [7], {"k": "v"})
    assert first.at is not None and first.at > 0  # the server's time, stamped by fetch.lua
    assert 0 < (kept_pttl(queue.client, queue.keys.name, "j0") or 0) <= 60_000
    assert [i.decode() for i in queue.client.lrange(queue.keys.results, 0, -1)] == ["j1", "j0"]
    assert queue.client.hget(queue.keys.data, "j0") is None  # acknowledged: message gone
    assert queue.inflight_ids("c") == {"next"}


def test_outcome_flags_come_first_then_the_plain_acks(backend: Backend) -> None:
    queue = _queue(backend, 3)
    outcomes = [("j2", _done(queue, "j2", 2)), ("gone", PLAIN), ("j0", _done(queue, "j0", 0))]
    fetched = queue.fetch("c", 0, outcomes=outcomes, acks=["nope", "j1"])
    assert fetched.acked == [True, False, True, False, True]
    assert queue.inflight_ids("c") == set()
    assert _record(queue, "j1") is None  # a plain ack keeps nothing
    assert [_record(queue, i).value for i in ("j0", "j2")] == [0, 2]  # type: ignore[union-attr]


def test_an_id_no_longer_owned_gets_no_outcome_from_a_fetch(backend: Backend) -> None:
    queue = _queue(backend, 2)
    out = _done(queue, "j0", "late")
    queue.requeue("c", ["j0"])  # (as a custodian's recovery would: another owner runs it)
    fetched = queue.fetch("c", 0, outcomes=[("j0", out), ("j1", _done(queue, "j1", 1))])
    assert fetched.acked == [False, True]
    assert _record(queue, "j0") is None
    assert queue.client.lrange(queue.keys.results, 0, -1) == [b"j1"]


def test_a_carried_chain_step_is_enqueued_once(backend: Backend) -> None:
    queue = _queue(backend, 1, {THEN: [{"kind": "step", "queue": backend.queue, "id": "s2",
                                        "task": "noop", "args": [], "pass": True}]})  # fmt: skip
    out = _done(queue, "j0", 5)
    assert out.ops and out.ttl == 0  # a follow-up, no result kept
    taken = queue.fetch("c", 5, outcomes=[("j0", out)])
    assert taken.acked == [True] and [i for i, _ in taken] == ["s2"]  # pushed, then taken
    assert envelope.fields(jobs.decode(taken[0][1] or b"").data)[1] == [5]
    again = queue.fetch("c", 5, outcomes=[("j0", out)])  # (a re-send of a lost reply)
    assert again.acked == [False] and list(again) == []
    assert _record(queue, "j0") is None


def test_a_waiter_is_told_by_the_fetch_that_writes_its_outcome(backend: Backend) -> None:
    queue = _queue(backend, 1)
    client = backend.client()
    pubsub = client.pubsub(ignore_subscribe_messages=True)
    pubsub.subscribe(queue.keys.channel)
    client.zadd(queue.keys.waiting, {"j0": 4e9})
    queue.fetch("c", 0, outcomes=[("j0", _done(queue, "j0", "v"))])
    message = None
    for _ in range(50):
        message = pubsub.get_message(timeout=0.1)
        if message is not None:
            break
    assert message is not None and message["data"] == b"j0"
    assert client.zscore(queue.keys.waiting, "j0") is None
    pubsub.close()


def _acker(queue: TaskQueue) -> Acker:
    return Acker({queue.keys.name: queue}, "c", gq.ConsumerOptions(), lambda jobs_: None,
                 lambda error: None, "test")  # fmt: skip


def _finished(queue: TaskQueue, job_id: str, outcome: Outcome | None) -> gq.Job:
    job = gq.Job(job_id, b"")
    job.queue, job.outcome = queue.keys.name, outcome
    return job


def test_the_acker_hands_outcomes_to_the_fetch_first(backend: Backend) -> None:
    queue = _queue(backend, 3)
    acker = _acker(queue)
    for job_id, outcome in (("j0", None), ("j1", _done(queue, "j1", 1)), ("j2", None)):
        acker.add(_finished(queue, job_id, outcome))
    carried = acker.carry(queue.keys.name)
    assert [job.id for job in carried] == ["j1", "j0", "j2"]  # outcomes first, then in order
    assert acker.only_carried()


def test_outcomes_of_a_lost_fetch_are_sent_again_by_the_acker(backend: Backend) -> None:
    queue = _queue(backend, 2)
    acker = _acker(queue)
    acker.add(_finished(queue, "j0", _done(queue, "j0", "kept")))
    acker.add(_finished(queue, "j1", None))
    carried = acker.carry(queue.keys.name)
    acker.carried(carried, None)  # the fetch failed: its reply (and its acks) may be lost
    assert not acker.only_carried()  # pending again, for the acker's own write
    sender = gevent.spawn(acker.run)  # (it sends them by ack_results.lua)
    assert acker.flush(10)
    sender.kill()
    assert _record(queue, "j0") is not None and _record(queue, "j0").value == "kept"  # type: ignore[union-attr]
    assert queue.inflight_ids("c") == set()


def test_ack_results_takes_the_same_entries(backend: Backend) -> None:
    queue = _queue(backend, 2)
    flags = finish(queue, "c", [("j1", _done(queue, "j1", [1])), ("j0", PLAIN)])
    assert flags == [True, True]
    assert _record(queue, "j0") is None and _record(queue, "j1").value == [1]  # type: ignore[union-attr]
