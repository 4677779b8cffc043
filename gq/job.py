"""The Job dataclass and its MessagePack message, byte-compatible with curlyq (SPEC section 3)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Union

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
_unpackb = msgpack.unpackb

class MessageDecodeError(ValueError):
    """A stored message is not a curlyq/gq job message."""


@dataclass
class Job:
    """One unit of work: ``id`` (a UUID4 string when left empty), opaque ``data``, ``attempt``."""

    id: str = ""
    data: bytes = b""
    attempt: int = 0
    #: The queue a consumer took the job from (set by the poller; not part of the message,
    #: and not a field: a fourth constructor argument cost every job of the drain
    #: measurably, and the queue is not part of the job's identity).
    queue = ""
    #: What acknowledging this job also writes (``gq.tasks.outcome.Outcome``: its result, a
    #: workflow's next step), set by the processor on a task job that keeps one; None
    #: on the others, whose ack stays the plain one. A class attribute, not a field, as
    #: ``queue`` is: outside the Job's identity, repr and constructor.
    outcome: Any = None


def by_queue(jobs: Iterable[Job]) -> dict[str, list[Job]]:
    """``jobs`` grouped by the queue they were taken from, in order."""
    groups: dict[str, list[Job]] = {}
    for job in jobs:
        groups.setdefault(job.queue, []).append(job)
    return groups


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
                return Job(raw_id.decode("utf-8"), data, attempt)
            except UnicodeDecodeError:
                pass  # the full path keeps it exact
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
