"""The task envelope (gq/envelope.py): round trips, refusals naming the place, bad input."""

from __future__ import annotations

import dataclasses
import datetime as dt
import decimal
import enum
import uuid
from typing import Any

import msgpack
import pytest

import gq
from gq.tasks import envelope

UTC = dt.timezone.utc


def test_round_trip_of_every_value_type() -> None:
    when = dt.datetime(2026, 12, 1, 22, 30, 5, 123456, tzinfo=dt.timezone(dt.timedelta(hours=2)))
    args = [None, True, False, 0, -(2**63), 2**64 - 1, 1.5, "é", b"\x00\xff", [1, [2]], (3, 4)]
    kwargs = {"when": when, "nested": {"a": {"b": [bytearray(b"x")]}}}
    data = envelope.encode("m.f", args, kwargs, {"retries": 3}, {"trace": "t1"})
    assert data.startswith(envelope.MAGIC) and envelope.is_envelope(data)
    env = envelope.decode(data)
    assert env.task == "m.f"
    assert env.args == [
        None,
        True,
        False,
        0,
        -(2**63),
        2**64 - 1,
        1.5,
        "é",
        b"\x00\xff",
        [1, [2]],
        [3, 4],
    ]
    assert env.kwargs["when"] == when and env.kwargs["when"].tzinfo == UTC
    assert env.kwargs["nested"] == {"a": {"b": [b"x"]}}
    assert env.opts == {"retries": 3} and env.headers == {"trace": "t1"}


def test_the_wire_format_is_magic_then_one_msgpack_map() -> None:
    data = envelope.encode("t", (1,), {"k": "v"})
    assert data[:4] == b"\x00gqt"
    assert msgpack.unpackb(data[4:]) == {"task": "t", "args": [1], "kwargs": {"k": "v"}}
    # opts and headers are optional: absent, they decode as empty maps
    env = envelope.decode(data)
    assert env.opts == {} and env.headers == {}


def test_datetime_is_the_msgpack_timestamp_extension() -> None:
    when = dt.datetime(2030, 1, 1, tzinfo=UTC)
    body = msgpack.unpackb(envelope.encode("t", [when], {})[4:], timestamp=0)
    assert body["args"][0] == msgpack.Timestamp.from_datetime(when)


class Level(enum.IntEnum):
    HIGH = 3


def test_subclasses_of_scalars_travel_as_their_base_type() -> None:
    class Colour(str, enum.Enum):
        RED = "red"

    env = envelope.decode(envelope.encode("t", [Colour.RED, Level.HIGH], {}))
    assert env.args == ["red", 3]


def test_a_str_subclass_key_travels_as_its_str_value() -> None:
    """Accepted as a key as it is as a value (issue 31): an enum keyed map, in the
    arguments and in a return value (encodable: kept as a result)."""

    class Colour(str, enum.Enum):
        RED = "red"

    data = envelope.encode("t", [{Colour.RED: 1}], {"by": {Colour.RED: [Colour.RED]}})
    env = envelope.decode(data)
    assert env.args == [{"red": 1}] and env.kwargs == {"by": {"red": ["red"]}}
    assert type(next(iter(env.args[0]))) is str
    assert envelope.encodable({Colour.RED: 1})
    with pytest.raises(TypeError, match="map keys must be str"):
        envelope.encode("t", [{Level.HIGH: 1}], {})


@dataclasses.dataclass
class Point:
    x: int


@pytest.mark.parametrize(
    ("args", "kwargs", "place"),
    [
        ((1, object()), {}, "args[1]"),
        ((), {"when": dt.datetime(2030, 1, 1)}, 'kwargs["when"]'),
        ((), {"a": {"b": [uuid.uuid4()]}}, 'kwargs["a"]["b"][0]'),
        ((decimal.Decimal("1.1"),), {}, "args[0]"),
        ((dt.date(2030, 1, 1),), {}, "args[0]"),
        (({1, 2},), {}, "args[0]"),
        ((Point(1),), {}, "args[0]"),
        ((2**64,), {}, "args[0]"),
        ((-(2**63) - 1,), {}, "args[0]"),
        (([{"x": {1: "a"}}],), {}, 'args[0][0]["x"]'),
    ],
)
def test_a_value_without_a_form_is_refused_naming_its_place(
    args: tuple[Any, ...], kwargs: dict[str, Any], place: str
) -> None:
    with pytest.raises(TypeError) as info:
        envelope.encode("t", args, kwargs)
    assert str(info.value).startswith(place + " "), str(info.value)


def test_the_refusal_says_how_to_convert() -> None:
    with pytest.raises(TypeError, match=r"str\(value\)"):
        envelope.encode("t", [uuid.uuid4()], {})
    with pytest.raises(TypeError, match="tzinfo"):
        envelope.encode("t", [dt.datetime(2030, 1, 1)], {})


@pytest.mark.parametrize(
    ("task", "args", "kwargs"),
    [("", [], {}), (3, [], {}), ("t", "ab", {}), ("t", [], [("a", 1)])],
)
def test_bad_shapes_are_refused(task: Any, args: Any, kwargs: Any) -> None:
    with pytest.raises(TypeError):
        envelope.encode(task, args, kwargs)


def test_bad_opts_and_headers_are_refused() -> None:
    with pytest.raises(TypeError, match=r'^opts\["x"\]'):
        envelope.encode("t", [], {}, {"x": object()})
    with pytest.raises(TypeError, match="headers"):
        envelope.encode("t", [], {}, None, {"a": 1})  # type: ignore[dict-item]


def _raw(body: Any) -> bytes:
    return envelope.MAGIC + msgpack.packb(body, datetime=True)


@pytest.mark.parametrize(
    ("data", "words"),
    [
        (b"plain bytes", "prefix"),
        (envelope.MAGIC, "not MessagePack"),
        (envelope.MAGIC + b"\xc1", "not MessagePack"),
        (
            envelope.MAGIC + msgpack.packb({"task": "t", "args": [], "kwargs": {}}) + b"x",
            "MessagePack",
        ),
        (_raw([1, 2]), "not a map"),
        (_raw({"args": [], "kwargs": {}}), "task"),
        (_raw({"task": "", "args": [], "kwargs": {}}), "task"),
        (_raw({"task": "t", "args": {}, "kwargs": {}}), "args"),
        (_raw({"task": "t", "args": [], "kwargs": []}), "kwargs"),
        (_raw({"task": "t", "args": [], "kwargs": {}, "opts": [1]}), "opts"),
        (_raw({"task": "t", "args": [], "kwargs": {}, "headers": {"a": 1}}), "headers"),
        (_raw({"task": "t", "args": [msgpack.ExtType(5, b"x")], "kwargs": {}}), "extension"),
        (envelope.MAGIC + b"\x81\xa4task\xa2\xff\xfe", "MessagePack"),  # not UTF-8
        (_raw({"task": "t", "args": [], "kwargs": {1: 2}}), "MessagePack"),  # int key
        # Three keys, the fast path's count, but not the three it reads.
        (_raw({"task": "t", "args": [], "opts": {}}), "kwargs"),
        (_raw({"task": "t", "args": [], "kwargs": {}, "opts": None, "headers": [1]}), "headers"),
    ],
)
def test_malformed_envelopes_raise_envelope_error(data: bytes, words: str) -> None:
    with pytest.raises(gq.EnvelopeError, match=words):
        envelope.decode(data)


def test_fields_are_decode_s_values_in_one_tuple() -> None:
    plain = envelope.encode("t", [1], {})
    full = envelope.encode("t", [1], {"k": 2}, {"timeout": 3.0}, {"trace": "x"})
    for data in (plain, full):
        env = envelope.decode(data)
        assert envelope.fields(data) == (env.task, env.args, env.kwargs, env.opts, env.headers)
    assert envelope.fields(full) == ("t", [1], {"k": 2}, {"timeout": 3.0}, {"trace": "x"})
    # A newer producer's key beside the three keeps its place in the slow path.
    assert envelope.fields(_raw({"task": "t", "args": [], "kwargs": {}, "v": 2}))[0] == "t"


def test_envelope_error_is_a_gq_error_and_a_value_error() -> None:
    assert issubclass(gq.EnvelopeError, gq.GQError) and issubclass(gq.EnvelopeError, ValueError)


def test_unknown_keys_are_ignored_for_newer_producers() -> None:
    env = envelope.decode(_raw({"task": "t", "args": [], "kwargs": {}, "v": 2, "opts": {"new": 1}}))
    assert env.task == "t" and env.opts == {"new": 1}


def test_no_pickle_in_the_package() -> None:
    import pathlib

    root = pathlib.Path(gq.__file__).parent
    imports = ("import pickle", "from pickle", "import cPickle", "import dill")
    assert not [p for p in root.rglob("*.py") if any(i in p.read_text() for i in imports)]
