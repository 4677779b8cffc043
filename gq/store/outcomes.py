"""The Redis side of results and workflows (SPEC section 16): acknowledging jobs with
their outcomes (ack_results.lua), the outcome part of a kill (kill.lua), and the reads
of ``Result.status()`` and ``get()``. The keys are gq's own (``QueueKeys.result_slot``,
``result_slots``, ``results``, ``waiting``, ``group``); curlyq never reads them.

Results of one TTL that end in one slot of time share a hash (lib/outcome.lua): one
HSET per batch instead of a key per result. A reader looks in the live slots the
registry lists, and takes a record as gone once its TTL has passed since it ended, so
expiry is exact to the reader while the memory goes a slot's width later at most.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from redis.cluster import ClusterPipeline

from gq.errors import ResultUnavailable
from gq.job import ID_ERRORS, MessageDecodeError, decode
from gq.store.base import MAX_BATCH, ScriptedQueue, as_text, chunks
from gq.store.groupkeys import group_keys
from gq.store.keys import QueueKeys
from gq.tasks.outcome import Outcome, Record, dead_outcome, unpack

#: The entry of a job with nothing to keep, in a batch of ack_results.lua.
PLAIN = Outcome(b"", 0.0)

#: How long a group's state may wait for its members to end, past its ``result_ttl``
#: (docs/decisions.md: a workflow's state lives until its last job ended).
GROUP_SAFETY = 30 * 86400.0

#: How long past its get()'s timeout a waiting entry may stay before a script drops it.
WAITING_SLACK = 60.0


def _ms(seconds: float) -> int:
    return max(1, int(seconds * 1000))


def entry(out: Outcome, keys: list[str]) -> list[Any]:
    """The ARGV entry of lib/outcome.lua for one job, appending the keys its follow-ups
    name (its slot, if it keeps a result, is the caller's to name)."""
    ops = out.ops
    if not ops:
        return [out.ttl_ms, out.record, 0] if out.ttl > 0 else ["0", b"", 0]
    args: list[Any] = [out.ttl_ms, out.record if out.ttl > 0 else b"", len(out.ops)]
    for op in out.ops:
        k = QueueKeys(op.queue)
        if op.kind in ("push", "gpush"):
            keys.extend([k.data, k.active, k.signal, k.flow])
            if op.kind == "gpush":  # (a job with a group: its group's line)
                keys.extend(group_keys(op.queue))
            args += [op.kind, *op.args]
        elif op.kind == "member":
            gid, index, packed, keep = op.args
            keys.extend([k.group(gid), k.data, k.active, k.signal, k.flow, k.waiting])
            keys.extend(group_keys(op.queue))  # (the callback's group, if it has one)
            args += ["member", f"r:{index}", packed, _ms(keep), gid, k.channel]
        else:
            gid, member, keep = op.args
            keys.extend([k.group(gid), k.waiting])
            args += ["fail", member, _ms(keep), gid, k.channel]
    return args


#: The heads of an entries blob's parts: the blob is a MessagePack array (array 32) of
#: strings (str 32), each field's head its 4-byte big-endian length after STR32, so that
#: cmsgpack decodes the whole batch in C (lib/outcome.lua's fields_of).
ARRAY32 = b"\xdd"
STR32 = b"\xdb"


def _field(value: Any) -> bytes:
    """One field of an entries blob: STR32, its length (4 bytes, big-endian), its bytes."""
    data: bytes = value if type(value) is bytes else str(value).encode("utf-8", ID_ERRORS)
    return STR32 + len(data).to_bytes(4, "big") + data  # (ids read back by as_text: exact bytes)


def packed(queue: QueueKeys, done: Sequence[tuple[str, Outcome]], keys: list[str]) -> bytes:
    """The entries blob of ack_results.lua and fetch.lua for ``done`` (at most MAX_BATCH;
    lib/outcome.lua's ack_outcomes says its fields); the keys it names go on ``keys``:
    the slot of each TTL the batch keeps, then the follow-ups'. One script argument for
    the batch: redis-py's cost per argument was most of what writing results cost the
    worker. A plain result (the batch's TTL, no follow-up), the common case, is its
    record alone. The blob is one MessagePack array of strings (ARRAY32, STR32)."""
    ttl = next((out.ttl_ms for _, out in done if out.ttl > 0 and not out.ops), "0")
    ttls = {ttl: None} if ttl != "0" else {}  # (ordered: the plain results' TTL first)
    kinds = bytearray()
    entries: list[bytes] = []
    follow_ups: list[str] = []
    extra = 0  # (the fields of full entries past their first)
    for _, out in done:
        if not out.ops and out.ttl > 0 and out.ttl_ms == ttl:
            kinds += b"r"
            entries.append(STR32 + len(out.record).to_bytes(4, "big") + out.record)
        else:
            kinds += b"e"
            if out.ttl > 0:
                ttls[out.ttl_ms] = None
            fields = entry(out, follow_ups)
            extra += len(fields) - 1
            entries.append(b"".join([_field(value) for value in fields]))
    now = time.time()
    keys += [queue.result_slot(t, now) for t in ttls]
    keys += follow_ups
    ids = [job_id.encode("utf-8", ID_ERRORS) for job_id, _ in done]  # (as _field, inline)
    head = [_field(len(done)), *[STR32 + len(i).to_bytes(4, "big") + i for i in ids],
            _field(bytes(kinds)), _field(len(ttls)), *[_field(t) for t in ttls]]  # fmt: skip
    count = len(head) + len(entries) + extra
    return b"".join([ARRAY32 + count.to_bytes(4, "big"), *head, *entries])


def finish(queue: ScriptedQueue, consumer_id: str,
           done: Sequence[tuple[str, Outcome]]) -> list[bool]:  # fmt: skip
    """Acknowledge owned jobs with their outcomes (ack_results.lua): a flag per job."""
    flags: list[bool] = []
    for batch in chunks(done, MAX_BATCH):
        k = queue.keys
        keys = [k.inflight(consumer_id), k.data, k.recovered, k.held, k.flow, k.active,
                k.signal, k.cancelled, k.waiting, k.results, *group_keys(k.name),
                k.result_slots]  # fmt: skip
        blob = packed(k, batch, keys)
        keys += [*k.finished_keys, *k.event_keys]
        flags += [bool(flag) for flag in queue._run("ack_results", keys, [k.channel, blob])]
    return flags


def kill_extras(queue: QueueKeys, job_id: str, out: Outcome, keys: list[str]) -> list[Any]:
    """What kill.lua takes after its own keys and arguments to write ``out`` too."""
    keys += queue.outcome_keys
    if out.ttl > 0:
        keys.append(queue.result_slot(out.ttl_ms, time.time()))
    return [queue.channel, *entry(out, keys)]


def write_dead_outcomes(queue: ScriptedQueue, ids: Sequence[str]) -> None:
    """Write the outcomes of the jobs recover.lua sent to dead (dead_outcome.lua: each
    once, and only while it is still in dead): rare, one call per job."""
    k = queue.keys
    messages: list[bytes | None] = queue.client.hmget(k.data, list(ids))
    for job_id, message in zip(ids, messages):
        out = dead_outcome(message)
        keys = [k.unwritten, k.dead, *k.outcome_keys]
        if out.ttl > 0:
            keys.append(k.result_slot(out.ttl_ms, time.time()))
        args = [job_id, k.channel, *entry(out, keys)]  # (entry adds its follow-ups' keys)
        queue._run("dead_outcome", keys, args)


@dataclass(frozen=True)
class State:
    """What Redis says of one id: its kept record, and where its message is."""

    record: Record | None
    message: bytes | None
    dead: bool
    scheduled: bool
    #: When it went to dead (server seconds), None when it is not there.
    since: float | None = None

    @property
    def known(self) -> bool:
        return self.record is not None or self.message is not None


def _look_for(pipe: Any, queue: QueueKeys, ids: Sequence[str]) -> None:
    """Queue the first reads of the records of ``ids`` on ``pipe`` (three replies for
    ``_records``): the server's time (a cluster's pipeline refuses TIME: ``_records`` then
    asks the queue's master in a call of its own), the slots, the keys of an earlier gq."""
    if isinstance(pipe, ClusterPipeline):
        pipe.zcard(queue.result_slots)  # (a placeholder reply in the time's place)
    else:
        pipe.time()
    pipe.zrange(queue.result_slots, 0, -1, withscores=True)
    # One slot's keys: MGET by name, which a cluster's pipeline refuses as a method.
    pipe.execute_command("MGET", *[queue.result(job_id) for job_id in ids])


def _records(
    queue: ScriptedQueue, ids: Sequence[str], replies: Sequence[Any]
) -> list[Record | None]:
    """The kept record of each of ``ids`` (None: none, or its TTL is over), from the
    replies of ``_look_for`` and one more round trip to the live slots. An id kept twice
    (run again from dead, say) gives its latest."""
    clock, slots, earlier = replies
    now = queue.server_time() if queue.cluster else clock[0] + clock[1] / 1e6
    found = [None if stored is None else Record.read(stored) for stored in earlier]
    live = [(key, int(as_text(key).rsplit(":", 2)[1]) / 1000)
            for key, expires in slots if expires > now * 1000]  # fmt: skip
    if not live or not ids:
        return found
    pipe: Any = queue.client.pipeline(transaction=False)
    for key, _ in live:
        pipe.hmget(key, list(ids))
    for (_, ttl), values in zip(live, pipe.execute()):
        for i, stored in enumerate(values):
            if stored is None:
                continue
            record, best = Record.read(stored), found[i]
            at = record.at or 0.0
            if at + ttl > now and (best is None or at > (best.at or 0.0)):
                found[i] = record
    return found


def read_state(queue: ScriptedQueue, job_id: str) -> State:
    """Two round trips: the id's message, dead and scheduled membership, then where its
    record may be, then its record in the live slots.

    The message is read first: the commands of a pipeline may have other clients' in
    between, and the script that deletes a job's message writes its record (and lists a
    new slot) in the same call. Read in that order, a job that ended meanwhile is found
    done; read the other way, the slots listed before it ended and the message gone after,
    it read as unknown."""
    k = queue.keys
    pipe: Any = queue.client.pipeline(transaction=False)
    pipe.hget(k.data, job_id)
    pipe.zscore(k.dead, job_id)
    pipe.zscore(k.scheduled, job_id)
    _look_for(pipe, k, [job_id])
    replies = pipe.execute()
    message, dead, scheduled = replies[:3]
    record = _records(queue, [job_id], replies[3:])[0]
    if record is not None and message is not None and not _this_life(record, dead):
        record = None  # an earlier job's under this id: this one has not ended yet
    return State(record, message, dead is not None, scheduled is not None, dead_since(dead))


#: How far a record's end time (six decimals) may read before its kill's dead score.
_SAME_CALL = 1e-3


def dead_since(score: Any) -> float | None:
    return None if score is None else float(score)


def _this_life(record: Record, dead_score: Any) -> bool:
    """Whether a kept record tells of the life of the id whose message is stored. An ack
    deletes the message in the call that writes the record, so a record beside a message
    is of an earlier life (a freed id enqueued anew, a dead job retried), unless the job
    is in dead and the record was written by the kill that put it there (kill.lua: the
    same server time for both). No write at enqueue: the new life is told by its message."""
    if dead_score is None:
        return False
    return (record.at or 0.0) >= float(dead_score) - _SAME_CALL


def running(queue: ScriptedQueue, job_id: str) -> bool:
    """Whether ``job_id`` is in some consumer's in-flight set (else it is ready)."""
    client: Any = queue.client
    members = [as_text(m) for m in client.zrange(queue.keys.consumers, 0, -1)]
    if not members:
        return False
    pipe: Any = client.pipeline(transaction=False)
    for inflight in members:
        pipe.sismember(inflight, job_id)
    return any(pipe.execute())


def status_of(queue: ScriptedQueue, state: State, job_id: str) -> str:
    """A job's status: scheduled, retrying (backing off after a failed attempt), ready,
    running, done, failed or missing."""
    if state.record is not None:
        return state.record.status
    if state.dead:
        return "failed"
    if state.message is None:
        return "missing"
    if state.scheduled:
        return "retrying" if retried(state.message) else "scheduled"
    return "running" if running(queue, job_id) else "ready"


def retried(message: bytes) -> bool:
    """Whether a waiting message is a retry (an attempt failed before): its job backs off."""
    try:
        return decode(message).attempt > 0
    except MessageDecodeError:
        return False


def wait_for(queue: ScriptedQueue, names: Sequence[str], timeout: float) -> None:
    """Mark ``names`` as waited for (the scripts publish their outcome only then)."""
    deadline = time.time() + timeout + WAITING_SLACK
    pipe: Any = queue.client.pipeline(transaction=False)
    pipe.zadd(queue.keys.waiting, dict.fromkeys(names, deadline), gt=True)
    pipe.zremrangebyscore(queue.keys.waiting, "-inf", time.time() - WAITING_SLACK)
    pipe.execute()


@dataclass(frozen=True)
class GroupState:
    """A group's state: members left, the first failed member's id, its size, callback."""

    left: int | None
    failed: str | None
    size: int
    callback: str | None


def group_state(queue: ScriptedQueue, group_id: str) -> GroupState:
    values = queue.client.hmget(queue.keys.group(group_id), ["left", "failed", "n", "cb_id"])
    left, failed, size, callback = (None if v is None else as_text(v) for v in values)
    return GroupState(None if left is None else int(left), failed, int(size or 0), callback)


def group_values(queue: ScriptedQueue, group_id: str, size: int) -> list[bytes | None]:
    """The members' packed results, in order (HMGET in batches of MAX_BATCH fields)."""
    key = queue.keys.group(group_id)
    pipe: Any = queue.client.pipeline(transaction=False)
    for batch in chunks(range(size), MAX_BATCH):
        pipe.hmget(key, [f"r:{i}" for i in batch])
    return [value for reply in pipe.execute() for value in reply]


def gathered(store: ScriptedQueue, group_id: str, size: int) -> list[Any]:
    """The members' results of a group, in order (a callback's first argument)."""
    values = group_values(store, group_id, size)
    if any(value is None for value in values):
        raise ResultUnavailable(f"group {group_id}: its members' results expired (result_ttl)")
    return [unpack(value) for value in values if value is not None]


def start_group(
    queue: ScriptedQueue, group_id: str, size: int, keep: float,
    callback: tuple[str, bytes] | tuple[str, bytes, str] | None,
) -> None:
    """Write a group's state before its members are queued: the count, the callback."""
    fields: dict[str, Any] = {"left": size, "n": size}
    if callback is not None:
        fields["cb_id"], fields["cb_msg"] = callback[:2]
        if len(callback) > 2 and callback[2]:  # its group (lib/outcome.lua's member_done)
            fields["cb_group"] = callback[2]
    pipe: Any = queue.client.pipeline(transaction=False)
    pipe.hset(queue.keys.group(group_id), mapping=fields)
    # Until its last member ends (lib/outcome.lua then sets ``keep``): a safety TTL, so
    # that a group whose members were deleted by hand does not stay for ever.
    pipe.pexpire(queue.keys.group(group_id), _ms(keep + GROUP_SAFETY))
    pipe.execute()


def recent(queue: ScriptedQueue, count: int) -> list[tuple[str, Record]]:
    """The most recent finished jobs that kept a result (and still have it), newest first."""
    client: Any = queue.client
    listed = [as_text(i) for i in client.lrange(queue.keys.results, 0, max(0, count * 2 - 1))]
    ids = list(dict.fromkeys(listed))  # (a job kept twice: retried from dead, say)
    if not ids:
        return []
    pipe: Any = client.pipeline(transaction=False)
    _look_for(pipe, queue.keys, ids)
    found = zip(ids, _records(queue, ids, pipe.execute()))
    return [(i, record) for i, record in found if record is not None][:count]
