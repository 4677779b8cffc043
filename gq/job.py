"""The Job dataclass and its MessagePack message, byte-compatible with curlyq (SPEC section 3)."""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Optional, Union, cast

import msgpack

# Messages are written with exactly curlyq's keys (case-sensitive for its Go decoder);
# gq's own extras, such as the last error, go in extra keys that curlyq ignores.
ID_KEY = "ID"
DATA_KEY = "Data"
ATTEMPT_KEY = "Attempt"
ERROR_KEY = "Error"
# When the job became (or becomes) ready to run, in unix seconds by the writer's clock:
# what `gq stats` needs for the age of the oldest ready job. curlyq's messages have none.
READY_AT_KEY = "ReadyAt"

# An error string kept in a message is for a human reading the dead set, not a log
# archive: a bounded size keeps a traceback-sized error from bloating Redis.
MAX_ERROR_CHARS = 2000

# A Go string holds any bytes, so an id curlyq wrote may not be UTF-8: gq reads it with
# surrogateescape (each stray byte a lone surrogate) and writes it back the same way, here
# and at the Redis boundary (gq.store.base.wire), so the id stays exact end to end.
ID_ERRORS = "surrogateescape"

_RAW_ID = ID_KEY.encode()
_RAW_DATA = DATA_KEY.encode()
_RAW_ATTEMPT = ATTEMPT_KEY.encode()
_RAW_READY_AT = READY_AT_KEY.encode()
_unpackb = msgpack.unpackb

# The histograms' sampling, which gq.metrics drives (``sample``): decode() picks each job
# with probability 1 / _every, and only the jobs it picks carry their ReadyAt. A countdown
# to the next pick, redrawn at each pick from a geometric law, so a job costs decode()
# one decrement and the picks are independent of the order of the jobs (several
# consumers' jobs interleaved, a periodic workload) while every job's chance is the same.
_every = 0  # 0: nothing is sampled (metrics off): decode() does not count
_countdown = 0
_random = random.Random()


def sample(every: int) -> None:
    """From now on, have decode() pick about one job in ``every`` for the metrics'
    histograms (0: none), setting ``Job.sample_weight`` and ``Job.ready_at`` on it."""
    global _every, _countdown
    _every = every
    _countdown = _gap() if every else 0


def _gap() -> int:
    """Jobs until the next pick, the pick included (geometric with p = 1 / _every)."""
    if _every <= 1:
        return 1
    return int(math.log(1.0 - _random.random()) / math.log(1.0 - 1.0 / _every)) + 1


def _pick(job: Job, obj: dict[Any, Any]) -> Job:
    global _countdown
    _countdown = _gap()
    picked = _Picked(job.id, job.data, job.attempt)
    ready_at = obj.get(_RAW_READY_AT)
    picked.ready_at = ready_at if type(ready_at) is float else None
    picked.sample_weight = _every
    return picked


class MessageDecodeError(ValueError):
    """A stored message is not a curlyq/gq job message."""


@dataclass
class Job:
    """One unit of work: ``id`` (a UUID4 string when left empty), opaque ``data``, ``attempt``."""

    id: str = ""
    data: bytes = b""
    attempt: int = 0
    #: The queue a consumer took the job from (set by the poller; not part of the message,
    #: and not a field, so that building a Job costs nothing more).
    queue = ""
    # When the job became ready to run (its message's ReadyAt, unix seconds), for the wait
    # metric; None for curlyq's messages and on the jobs decode() did not pick (sample()).
    # Class attributes, not fields: set by decode() on the jobs it picks, outside the
    # Job's identity, repr and constructor (a fourth constructor argument cost every job
    # of the drain measurably).
    ready_at = cast(Optional[float], None)
    #: How many jobs this one stands for in the metrics' histograms: the sampling's
    #: ``every`` on a job decode() picked, 0 on the others.
    sample_weight = 0
    #: What acknowledging this job also writes (``gq.outcome.Outcome``: its result, a
    #: workflow's next step), set by the processor on a task job that keeps one; None
    #: on the others, whose ack stays the plain one.
    outcome: Any = None


class _Picked(Job):
    """A job decode() picked for the metrics' histograms. A class of its own so that the
    attributes it carries leave every other Job's layout alone: set on some Jobs only,
    they slowed attribute access on all of them (CPython 3.11, ~15% of the noop job path).
    Equal to, and shown as, the Job with the same three fields."""

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Job):
            return NotImplemented
        return (self.id, self.data, self.attempt) == (other.id, other.data, other.attempt)

    __hash__ = None  # type: ignore[assignment]  # mutable, as Job

    def __repr__(self) -> str:
        return repr(Job(self.id, self.data, self.attempt))


JobLike = Union[Job, bytes, bytearray, memoryview]


def to_job(item: JobLike) -> Job:
    """Accept a Job or bare bytes; give the job a fresh UUID4 id when it has none."""
    if isinstance(item, Job):
        job = Job(id=item.id, data=item.data, attempt=item.attempt)
    elif isinstance(item, (bytes, bytearray, memoryview)):
        job = Job(data=bytes(item))
    else:
        raise TypeError(
            f"a job is gq.Job or bytes, not {type(item).__name__}"
            + ("; encode text first, e.g. data.encode()" if isinstance(item, str) else "")
        )
    if not isinstance(job.id, str):
        raise TypeError(f"Job.id must be a str, not {type(job.id).__name__}")
    if isinstance(job.data, (bytearray, memoryview)):
        job.data = bytes(job.data)
    if not isinstance(job.data, bytes):
        raise TypeError(f"Job.data must be bytes, not {type(job.data).__name__}")
    if isinstance(job.attempt, bool) or not isinstance(job.attempt, int) or job.attempt < 0:
        raise TypeError(f"Job.attempt must be a non-negative int, not {job.attempt!r}")
    if not job.id:
        job.id = str(uuid.uuid4())
    return job


def encode(job: Job, error: str | None = None, ready_at: float | None = None) -> bytes:
    """The message for ``job``, with gq's extra keys when given: ``error`` (why it last
    failed) and ``ready_at`` (when it is ready to run)."""
    message: dict[str, Any] = {ID_KEY: job.id, DATA_KEY: job.data, ATTEMPT_KEY: job.attempt}
    if error is not None:
        message[ERROR_KEY] = error[:MAX_ERROR_CHARS]
    if ready_at is not None:
        message[READY_AT_KEY] = float(ready_at)
    # surrogateescape: an id read from a curlyq message that is not UTF-8 goes back as
    # the bytes it came as (decode() reads it with the same handler).
    return msgpack.packb(message, use_bin_type=True, unicode_errors=ID_ERRORS)  # type: ignore[no-any-return]


def decode(raw: bytes) -> Job:
    """Read a message written by gq or curlyq; raise MessageDecodeError for anything else."""
    # The fast path, for the well-formed messages that every fetched job carries: read
    # the three keys straight from the unpacked map. Anything unusual (a nil Data, a
    # non-UTF-8 ID, a bad type) takes the full path below, which says what is wrong.
    global _countdown
    try:
        obj = _unpackb(raw, raw=True, strict_map_key=False, use_list=False)
    except Exception:  # noqa: BLE001 - msgpack raises several unrelated types on bad input
        obj = None
    if type(obj) is dict:
        raw_id = obj.get(_RAW_ID)
        data = obj.get(_RAW_DATA, b"")
        attempt = obj.get(_RAW_ATTEMPT, 0)
        if type(raw_id) is bytes and type(data) is bytes and type(attempt) is int and attempt >= 0:
            try:
                job = Job(raw_id.decode("utf-8"), data, attempt)
            except UnicodeDecodeError:
                pass  # the full path keeps it exact
            else:
                if _every:
                    _countdown -= 1
                    if not _countdown:
                        return _pick(job, obj)
                return job
    return _job_from_map(_unpack_map(raw))


def decode_error(raw: bytes) -> str | None:
    """The error gq (or the custodian) stored in a message, if any."""
    value = _unpack_map(raw).get(ERROR_KEY)
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return None


def decode_ready_at(raw: bytes) -> float | None:
    """When the job became ready to run, if its writer said so (gq does, curlyq does not)."""
    value = _unpack_map(raw).get(READY_AT_KEY)
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    return None


def _unpack_map(raw: bytes) -> dict[str, Any]:
    # raw=True: a Go string may hold bytes that are not UTF-8, so text is decoded by
    # hand below, and only where text is expected.
    try:
        obj = msgpack.unpackb(raw, raw=True, strict_map_key=False, use_list=False)
    except Exception as exc:  # msgpack raises several unrelated types on bad input
        raise MessageDecodeError(f"not MessagePack: {exc}") from exc
    if not isinstance(obj, Mapping):
        raise MessageDecodeError(f"not a map but {type(obj).__name__}")
    fields: dict[str, Any] = {}
    for key, value in obj.items():
        if isinstance(key, bytes):
            fields[key.decode("utf-8", "replace")] = value
    return fields


def _job_from_map(fields: Mapping[str, Any]) -> Job:
    raw_id = fields.get(ID_KEY)
    if not isinstance(raw_id, bytes):
        raise MessageDecodeError(f"{ID_KEY} is missing or not a string")
    job_id = raw_id.decode("utf-8", ID_ERRORS)
    data = fields.get(DATA_KEY, b"")
    if data is None:  # a Go nil slice
        data = b""
    if not isinstance(data, bytes):
        raise MessageDecodeError(f"{DATA_KEY} is {type(data).__name__}, not bytes")
    attempt = fields.get(ATTEMPT_KEY, 0)
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise MessageDecodeError(f"{ATTEMPT_KEY} is {attempt!r}, not a non-negative int")
    return Job(id=job_id, data=data, attempt=attempt)
