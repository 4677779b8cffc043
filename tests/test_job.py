"""The message format shared with curlyq: golden bytes both ways and defensive decoding."""

import msgpack
import pytest

from gq import job as jobs
from gq.job import Job, MessageDecodeError

# curlyq's own Producer writes Job{ID: "abc", Data: "xyz", Attempt: 0} as these bytes:
# Attempt is always an 8-byte int64 there.
CURLYQ_GOLDEN = bytes.fromhex(
    "83a24944a3616263a444617461c40378797aa7417474656d7074d30000000000000000"
)
# gq writes the same map with a compact integer, which curlyq's reader accepts.
GQ_GOLDEN = bytes.fromhex("83a24944a3616263a444617461c40378797aa7417474656d707400")


def test_reads_the_message_curlyq_writes():
    assert jobs.decode(CURLYQ_GOLDEN) == Job(id="abc", data=b"xyz", attempt=0)


def test_writes_curlyqs_keys_in_curlyqs_order_with_data_as_bin():
    assert jobs.encode(Job(id="abc", data=b"xyz", attempt=0)) == GQ_GOLDEN


def test_round_trips_binary_data_and_large_attempts():
    job = Job(id="é-1", data=bytes(range(256)), attempt=2**40)
    assert jobs.decode(jobs.encode(job)) == job


@pytest.mark.parametrize(
    "attempt_bytes", ["07", "cc07", "cd0007", "ce00000007", "d30000000000000007"]
)
def test_accepts_any_integer_width_for_attempt(attempt_bytes):
    raw = bytes.fromhex("83a24944a3616263a444617461c40378797aa7417474656d7074" + attempt_bytes)
    assert jobs.decode(raw).attempt == 7


def test_accepts_data_written_as_str_and_ignores_extra_keys():
    raw = msgpack.packb({"ID": "abc", "Data": "xyz", "Attempt": 1, "Queue": "other"})
    assert jobs.decode(raw) == Job(id="abc", data=b"xyz", attempt=1)


def test_error_is_an_extra_key_that_curlyq_ignores():
    raw = jobs.encode(Job(id="a", data=b"d", attempt=3), error="ValueError: boom")
    assert msgpack.unpackb(raw)["Error"] == "ValueError: boom"
    assert jobs.decode(raw) == Job(id="a", data=b"d", attempt=3)
    assert jobs.decode_error(raw) == "ValueError: boom"


@pytest.mark.parametrize(
    "raw",
    [
        b"",
        b"\xc1garbage",
        msgpack.packb([1, 2, 3]),
        msgpack.packb({"Data": b"x"}),
        msgpack.packb({"ID": 5, "Data": b"x"}),
        msgpack.packb({"ID": "a", "Data": 5}),
        msgpack.packb({"ID": "a", "Data": b"x", "Attempt": -1}),
        msgpack.packb({"ID": "a", "Data": b"x", "Attempt": "1"}),
    ],
)
def test_rejects_what_is_not_a_job_message(raw):
    with pytest.raises(MessageDecodeError):
        jobs.decode(raw)


def test_to_job_gives_an_empty_id_a_fresh_uuid4_and_keeps_a_given_one():
    import uuid

    fresh = jobs.to_job(b"data")
    assert uuid.UUID(fresh.id).version == 4
    assert jobs.to_job(Job(id="mine", data=b"x")).id == "mine"


@pytest.mark.parametrize("bad", ["text", 5, None, Job(data="text")])
def test_to_job_refuses_what_is_not_bytes_with_a_clear_error(bad):
    with pytest.raises(TypeError, match="bytes|Job"):
        jobs.to_job(bad)


def test_ready_at_is_an_extra_key_that_readers_of_the_three_keys_ignore():
    raw = jobs.encode(Job(id="abc", data=b"xyz"), ready_at=1_800_000_000.5)
    assert msgpack.unpackb(raw)["ReadyAt"] == 1_800_000_000.5
    assert raw.startswith(GQ_GOLDEN[:1].replace(b"\x83", b"\x84"))  # still one flat map
    assert jobs.decode(raw) == Job(id="abc", data=b"xyz")
    assert jobs.decode_ready_at(raw) == 1_800_000_000.5
    assert jobs.decode_ready_at(CURLYQ_GOLDEN) is None
