"""What a finished task job leaves behind (SPEC section 16): its result record, and the
follow-ups of a workflow (the next step of a chain, a group member's count), built here
in Python and written by the script that acknowledges or kills the job, in that call
(gq/scripts/lib/outcome.lua).

A record is a MessagePack map: ``status`` ("done" or "failed"), ``task``, ``attempt``,
``args`` and ``kwargs`` (the call, for the job page), ``started`` (when the run that
ended began, unix seconds; absent for a job that never ran), ``value`` (the return value)
or ``error`` (why it failed, or why a done job's value could not be kept) and, for a
failure of a run, ``traceback`` (bounded: ``traceback_of``).
"""

from __future__ import annotations

import struct
import sys
import time
import traceback as tb
from dataclasses import dataclass
from typing import Any

import msgpack

from gq import job as jobs
from gq.errors import EnvelopeError
from gq.job import Job
from gq.tasks import envelope

#: Workflow opts in the envelope: ``then`` (follow-ups run when the job succeeds),
#: ``gather`` (a group callback: prepend the members' results).
THEN = "then"
GATHER = "gather"

# One Packer for every record: its pack() is one C call that holds the GIL (no other
# thread or greenlet runs in between), at half packb's cost per call. A Packer that
# knows datetimes looks for one at every object, at twice the cost: records are packed
# without, and again with it only when the first refuses (a datetime somewhere).
_packb = msgpack.Packer(use_bin_type=True, datetime=True).pack
_packb_no_datetime = msgpack.Packer(use_bin_type=True).pack
_TTL_MS: dict[float, str] = {}
_encodable = envelope.encodable
_NO_THEN: list[dict[str, Any]] = []


def pack(value: Any) -> bytes:
    """A value as MessagePack (``TypeError`` when it has no form)."""
    if not envelope.encodable(value):
        raise TypeError(f"a {type(value).__name__} has no MessagePack form")
    return msgpack.packb(value, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def unpack(data: bytes) -> Any:
    return msgpack.unpackb(data, raw=False, timestamp=3, strict_map_key=False)


@dataclass(frozen=True)
class Record:
    """A kept outcome as read back: ``at`` is the server time the job ended."""

    status: str
    task: str
    attempt: int
    args: list[Any]
    kwargs: dict[str, Any]
    value: Any = None
    error: str | None = None
    at: float | None = None
    #: When the run that ended began (unix seconds), None when unknown or never run.
    started: float | None = None
    traceback: str | None = None

    @classmethod
    def read(cls, stored: bytes) -> Record:
        """A record as lib/outcome.lua stores it: the end time (a MessagePack str of
        server seconds), then the record's map."""
        unpacker = msgpack.Unpacker(raw=False, timestamp=3, strict_map_key=False)
        unpacker.feed(stored)
        at, body = next(unpacker), next(unpacker)
        return cls(
            body.get("status", "done"), body.get("task", ""), int(body.get("attempt", 0)),
            body.get("args", []), body.get("kwargs", {}), body.get("value"), body.get("error"),
            None if at is None else float(at), _seconds(body.get("started")),
            _text(body.get("traceback")),
        )  # fmt: skip

    def as_dict(self) -> dict[str, Any]:
        return {"status": self.status, "task": self.task, "attempt": self.attempt,
                "args": self.args, "kwargs": self.kwargs, "value": self.value,
                "error": self.error, "at": self.at, "started": self.started,
                "traceback": self.traceback}  # fmt: skip


def _seconds(value: Any) -> float | None:
    return float(value) if type(value) in (int, float) else None


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


#: The most of a failure's traceback kept with its record (chars): its end, where the
#: frame that raised and "Type: message" are.
TRACEBACK_MAX = 4000


def traceback_of(exc: BaseException | None) -> str | None:
    """A failure's traceback as format_exception prints it (no locals), its last chars."""
    if exc is None:
        return None
    text = "".join(tb.format_exception(type(exc), exc, exc.__traceback__))
    return text if len(text) <= TRACEBACK_MAX else "...\n" + text[-TRACEBACK_MAX:]


@dataclass
class Op:
    """One follow-up for lib/outcome.lua: ``kind`` "push", "gpush", "member" or "fail", on
    ``queue``'s keys, with its arguments (group id first for "member" and "fail")."""

    kind: str
    queue: str
    args: list[Any]


class Outcome:
    """What the ack (or kill) of one job writes: ``record`` kept ``ttl`` seconds (0: none)
    and the follow-ups. (A plain class: one is built for every job that keeps a result.)"""

    __slots__ = ("record", "ttl", "ttl_ms", "ops")

    def __init__(self, record: bytes, ttl: float, ops: list[Op] | None = None) -> None:
        self.record = record
        self.ttl = ttl
        ttl_ms = _TTL_MS.get(ttl)
        if ttl_ms is None:
            ttl_ms = _TTL_MS[ttl] = str(max(1, int(ttl * 1000))) if ttl > 0 else "0"
        self.ttl_ms = ttl_ms
        self.ops = ops or _NO_OPS


_NO_OPS: list[Op] = []


class Finisher:
    """Builds a job's Outcome from its envelope's opts (``result_ttl``, ``then``)."""

    __slots__ = ("job", "fields", "ttl", "then", "started")

    def __init__(
        self, job: Job, fields: envelope.Fields, ttl: Any = None, then: Any = None
    ) -> None:
        self.job = job
        self.fields = fields
        self.ttl = float(ttl or 0)
        self.then: list[dict[str, Any]] = then or _NO_THEN
        #: When its run began: it is built as the job is planned, just before it runs.
        self.started: float | None = time.time()

    def done(self, value: Any) -> Outcome:
        """The outcome of a success. A value with no MessagePack form is recorded as a
        failure of the result, not of the job: the work is done, and running it again
        would repeat it. The workflow stops there (no step can receive that value)."""
        try:
            if not _encodable(value):
                raise TypeError(f"a {type(value).__name__} has no MessagePack form")
            record = self._record("done", value=value)
        except (TypeError, ValueError, OverflowError) as exc:
            why = f"the return value could not be kept: {exc}"
            return Outcome(self._record("done", error=why), self.ttl, self._failed_ops(why))
        if not self.then:
            return Outcome(record, self.ttl)
        packed = pack(value)
        ops = [op for spec in self.then for op in _follow(spec, value, packed)]
        return Outcome(record, self.ttl, ops)

    def failed(self, reason: str) -> Outcome:
        """The outcome of a job that goes to dead: its error kept, its group told. Called
        while its failure is handled (the worker's ``except``), whose traceback is kept."""
        record = self._record("failed", error=reason, trace=traceback_of(sys.exc_info()[1]))
        return Outcome(record, self.ttl, self._failed_ops(reason))

    def _failed_ops(self, reason: str) -> list[Op]:
        members = [s for s in self.then if s.get("kind") == "member"]
        return [Op("fail", s["queue"], [s["group"], self.job.id, s["keep"]]) for s in members]

    def _record(self, status: str, *, value: Any = None, error: str | None = None,
                trace: str | None = None) -> bytes:  # fmt: skip
        task, args, kwargs = self.fields[:3]
        if error is None:
            body = {"status": status, "value": value, "task": task,
                    "attempt": self.job.attempt, "args": args, "kwargs": kwargs}  # fmt: skip
        else:
            body = {"status": status, "error": error[: jobs.MAX_ERROR_CHARS], "task": task,
                    "attempt": self.job.attempt, "args": args, "kwargs": kwargs}  # fmt: skip
            if trace is not None:
                body["traceback"] = trace
        if self.started is not None:
            body["started"] = self.started
        try:
            return _packb_no_datetime(body)  # type: ignore[no-any-return]
        except TypeError:  # (a datetime: the same bytes the datetime Packer writes)
            return _packb(body)  # type: ignore[no-any-return]


# A record from bytes: the map's keys and fixed values written once per task, the args'
# bytes as the envelope carries them, then the attempt and the value. Record.read reads a
# map, so the order of its keys is free: the ones fixed per task come first.
_ATTEMPT = b"\xa7attempt"
_VALUE = b"\xa5value"
#: The bytes between the args and the value for the attempts most jobs have (a dict
#: lookup, not a packb call and two concatenations per job).
_ATTEMPT_TO_VALUE = {n: _ATTEMPT + _packb(n) + _VALUE for n in range(64)}
_NONE = b"\xc0"
_STARTED = b"\xa7started\xcb"  # (the key, then a float 64's first byte)
_pack_float = struct.Struct(">d").pack


class OwnRecords:
    """How the records of one task's own calls (envelope.own_call: positional arguments,
    the task's own options) start, and how long they are kept: built once per task."""

    __slots__ = ("head", "ttl")

    def __init__(self, task: str, ttl: Any) -> None:
        #: A map of seven: status "done", the task, no kwargs, then the "args" key
        #: (the "started" key and its float follow, per job, before "attempt").
        self.head: bytes = (b"\x87\xa6status\xa4done\xa4task" + _packb(task)
                            + b"\xa6kwargs\x80\xa4args")  # fmt: skip
        self.ttl = float(ttl)


class OwnFinisher(Finisher):
    """A Finisher whose success is recorded from bytes: the task's head, the args' bytes
    as the envelope carries them, the attempt, the packed value. Per job that saves the
    map of six built and packed again with the args it already has in bytes. Its record
    reads (Record.read) as the dict path's does; anything unusual (a value with no
    MessagePack form) and ``failed`` take that path."""

    __slots__ = ("raw", "head")

    def __init__(self, job: Job, fields: envelope.Fields, raw: bytes, own: OwnRecords) -> None:
        """``raw``: the call's args' bytes (envelope.own_call); ``own``: its task's."""
        # (Finisher's slots set here: its __init__ would cost a call and a float() per job)
        self.job = job
        self.fields = fields
        self.ttl = own.ttl
        self.then = _NO_THEN
        self.started = time.time()
        self.raw = raw
        self.head = own.head

    def done(self, value: Any) -> Outcome:
        packed = _NONE if value is None else _value_bytes(value)
        if packed is None:  # no MessagePack form: the failure of the result, as ever
            return Finisher.done(self, value)
        attempt = self.job.attempt
        between = _ATTEMPT_TO_VALUE.get(attempt)
        if between is None:
            between = _ATTEMPT + _packb(attempt) + _VALUE
        started = _STARTED + _pack_float(self.started or 0.0)
        return Outcome(self.head + self.raw + started + between + packed, self.ttl)


def _value_bytes(value: Any) -> bytes | None:
    """A return value packed as ``_record`` packs it in its map, None when it has no form."""
    if not _encodable(value):
        return None
    try:
        return _packb_no_datetime(value)  # type: ignore[no-any-return]
    except TypeError:  # (a datetime: the same bytes the datetime Packer writes)
        pass
    except (ValueError, OverflowError):
        return None
    try:
        return _packb(value)  # type: ignore[no-any-return]
    except (TypeError, ValueError, OverflowError):
        return None


def _follow(spec: dict[str, Any], value: Any, packed: bytes) -> list[Op]:
    kind = spec.get("kind")
    if kind == "member":
        return [Op("member", spec["queue"], [spec["group"], spec["index"], packed, spec["keep"]])]
    if kind == "step":
        group = spec.get("group")
        if group:  # (its group's line: lib/outcome.lua's "gpush")
            return [Op("gpush", spec["queue"], [spec["id"], step_message(spec, value), group])]
        return [Op("push", spec["queue"], [spec["id"], step_message(spec, value)])]
    return []


def step_message(spec: dict[str, Any], value: Any) -> bytes:
    """The next step's message: its call, with the previous value first unless ``.si``."""
    args = list(spec.get("args") or ())
    if spec.get("pass", True):
        args.insert(0, value)
    opts = spec.get("opts")
    expires_in = spec.get("expires_in")  # a relative expiry counts from the step's enqueue
    if isinstance(expires_in, (int, float)) and opts is not None:
        opts = {**opts, "expires": time.time() + expires_in}
    data = envelope.encode(spec["task"], args, spec.get("kwargs") or {}, opts,
                           spec.get("headers"))  # fmt: skip
    return jobs.encode(Job(spec["id"], data), ready_at=time.time())


def finisher(job: Job, fields: envelope.Fields, own_ttl: float | None = None) -> Finisher | None:
    """The job's Finisher when it keeps a result or continues a workflow, else None (the
    plain ack, at no cost). ``fields``: the envelope as gq.tasks.envelope.fields reads it;
    ``own_ttl``: the task's own result_ttl, kept when the envelope does not say (a Go or
    curlyq producer's, ``gq enqueue --task``: docs/wire.md, an absent key falls back)."""
    opts = fields[3]
    ttl, then = opts.get("result_ttl", own_ttl), opts.get(THEN)
    return Finisher(job, fields, ttl, then) if ttl or then else None


#: The longest keep a refused job's opts may ask for (s): ten years, past which a value
#: is taken as malformed (the opts of a job refused before it ran are not checked yet).
_KEEP_MAX = 10 * 365 * 86400.0


def _keep_of(value: Any) -> float | None:
    ok = type(value) in (int, float) and 0 < value <= _KEEP_MAX
    return float(value) if ok else None


def _member_of(spec: Any) -> dict[str, Any] | None:
    if not isinstance(spec, dict) or spec.get("kind") != "member":
        return None
    ok = isinstance(spec.get("queue"), str) and isinstance(spec.get("group"), str)
    return spec if ok and _keep_of(spec.get("keep")) is not None else None


def refused_finisher(
    job: Job, fields: envelope.Fields, own_ttl: float | None = None
) -> Finisher | None:
    """``finisher`` for a job that never runs (expired, unknown task, arguments that do
    not bind): only its failure is written, so only what that needs is read, and a
    malformed value is left out rather than raised: its group (a well-formed member
    spec) is still told, its error kept for a valid ``result_ttl``."""
    opts = fields[3] if isinstance(fields[3], dict) else {}
    then = opts.get(THEN)
    members = [m for m in then if _member_of(m) is not None] if isinstance(then, list) else []
    ttl = _keep_of(opts.get("result_ttl", own_ttl)) or 0.0
    if not ttl and not members:
        return None
    finish = Finisher(job, fields, ttl, members)
    finish.started = None  # (it never runs)
    return finish


#: The outcome of a job with nothing to write.
NOTHING = Outcome(b"", 0.0)


def dead_outcome(message: bytes | None) -> Outcome:
    """The outcome of a job recover.lua sent to dead (the recovery limit), from its
    stored ``message``: its error kept for its ``result_ttl``, its group told."""
    if message is None:
        return NOTHING
    try:
        job = jobs.decode(message)
        if not envelope.is_envelope(job.data):
            return NOTHING
        fields = envelope.fields(job.data)
    except (jobs.MessageDecodeError, EnvelopeError):
        return NOTHING
    finish = refused_finisher(job, fields)
    return NOTHING if finish is None else finish.failed(jobs.decode_error(message) or "in dead")
