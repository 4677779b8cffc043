"""The dispatcher's plain path (issue 20): a plain call's envelope (positional arguments
only, no opts, no headers) is read with one MessagePack read of its args alone
(``envelope.own_call``). It must answer exactly what ``envelope.fields`` reads, or
step aside (None) for ``fields`` to read it and say what is wrong. The args' bytes it
gives (for a kept result's record, issue 22) are exactly the envelope's, between its
prefix and its suffix, and read as the args it gives."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gq
from gq.errors import EnvelopeError
from gq.tasks import envelope, outcome

NAMES = ["noop", "a", "x" * 31, "x" * 32, "x" * 56, "tâche"]
KNOWN = {envelope.plain_prefix(name): (envelope.own_suffix({}), name) for name in NAMES}
_NO_KWARGS = b"\xa6kwargs\x80"


def _fields_or_none(data: bytes) -> tuple[Any, ...] | None:
    try:
        return envelope.fields(data)
    except EnvelopeError:
        return None


def _packed(args: list[Any]) -> bytes:
    """The args' bytes as ``encode`` writes them: what own_call gives as ``raw``."""
    return msgpack.packb(args, use_bin_type=True, datetime=True)  # type: ignore[no-any-return]


def _raw_agrees(data: bytes, args: list[Any], raw: bytes, known: dict[bytes, Any]) -> bool:
    """``raw`` is the envelope's own bytes between a known prefix and its suffix, one
    MessagePack value that reads as ``args``."""
    whole = any(data == prefix + raw + suffix for prefix, (suffix, _) in known.items())
    return whole and msgpack.unpackb(raw, raw=False, timestamp=3) == args


def _agrees(data: bytes) -> bool:
    """own_call's answer, when it has one, is fields' answer for a plain call."""
    plain = envelope.own_call(data, KNOWN)
    if plain is None:
        return True
    name, args, raw = plain
    return _fields_or_none(data) == (name, args, {}, {}, {}) and _raw_agrees(data, args, raw, KNOWN)


def test_plain_calls_of_known_tasks_take_the_plain_path() -> None:
    now = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)
    for name in ("noop", "a", "x" * 31, "tâche"):
        for args in ([], [1], [1, "two", [3.0], {"k": b"v"}, None, now], ["\xa6kwargs\x80"]):
            data = envelope.encode(name, args, {})
            assert envelope.own_call(data, KNOWN) == (name, args, _packed(args)), (name, args)
            assert _agrees(data)


@pytest.mark.parametrize(
    "data",
    [
        envelope.encode("noop", [1], {"k": 2}),
        envelope.encode("noop", [1], {}, {"timeout": 3.0}),
        envelope.encode("noop", [1], {}, None, {"trace": "t"}),
        envelope.encode("unknown", [1], {}),
        envelope.plain_prefix("noop") + b"\x92\x01" + _NO_KWARGS,  # a truncated array
        envelope.plain_prefix("noop") + b"\x91\x01\x91\x02" + _NO_KWARGS,  # two arrays
        envelope.plain_prefix("noop") + b"\x01" + _NO_KWARGS,  # args not an array
        envelope.plain_prefix("noop") + _NO_KWARGS,  # no args at all
        envelope.plain_prefix("noop") + b"\x91\xc7\x01\x05x" + _NO_KWARGS,  # an unknown ext
        envelope.encode("noop", [1], {}) + b"\x00",  # something after the map
        envelope.encode("noop", [1], {})[:-1],
        envelope.plain_prefix("noop"),
        envelope.MAGIC,
        b"\x00gqt\x83\xa4task",
    ],
)
def test_anything_else_steps_aside_for_fields(data: bytes) -> None:
    assert envelope.own_call(data, KNOWN) is None


def test_a_long_name_is_read_either_way() -> None:
    for name in ("x" * 32, "x" * 56):
        data = envelope.encode(name, [1], {})
        assert envelope.own_call(data, KNOWN) in (None, (name, [1], b"\x91\x01"))
        assert envelope.fields(data) == (name, [1], {}, {}, {})


_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.text() | st.binary(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


@given(st.sampled_from(NAMES), st.lists(_values, max_size=4))
def test_any_plain_call_reads_as_fields_reads_it(name: str, args: list[Any]) -> None:
    data = envelope.encode(name, args, {})
    assert _agrees(data)
    if len(name.encode()) < 32:
        assert envelope.own_call(data, KNOWN) == (name, args, _packed(args))


@given(st.lists(_values, max_size=3), st.integers(0, 40), st.binary(max_size=3))
def test_a_damaged_envelope_is_never_misread(args: list[Any], at: int, junk: bytes) -> None:
    data = envelope.encode("noop", args, {})
    at = min(at, len(data))
    for damaged in (data[:at] + junk + data[at:], data[:at] + junk + data[at + 1 :]):
        assert _agrees(damaged)


def test_the_plan_of_a_plain_call_runs_the_task_with_its_job() -> None:
    app = gq.App(queue="q")
    seen: list[Any] = []

    @app.task(name="deliver", retries=2, timeout=5.0)
    def deliver(url: str, tries: int = 1) -> str:
        seen.append((url, tries, gq.current_job()))
        return "ok"

    job = gq.Job("id-1", envelope.encode("deliver", ["https://a"], {}), 1)
    job.queue = "q"
    plan = app.plan(job)
    assert (plan.timeout, plan.max_attempts, plan.task, plan.finish) == (5.0, 2, "deliver", None)
    assert plan.run() == "ok"
    assert seen == [("https://a", 1, gq.CurrentJob("id-1", 1, "q", "deliver", {}))]
    assert gq.current_job() is None


def test_a_plain_call_that_does_not_bind_is_killed() -> None:
    app = gq.App(queue="q")

    @app.task(name="deliver")
    def deliver(url: str) -> None: ...

    for args in ([], ["a", "b"]):
        job = gq.Job("id-1", envelope.encode("deliver", args, {}))
        with pytest.raises(gq.Kill, match="the arguments do not bind"):
            app.plan(job)


def test_the_wire_bytes_of_a_plain_call_are_the_prefix_args_and_no_kwargs() -> None:
    # plain_prefix follows encode's bytes: if encode's key order changed, the plain path
    # would silently stop being taken (test_plain_calls_... would say so too).
    data = envelope.encode("noop", [7], {})
    assert data == envelope.plain_prefix("noop") + msgpack.packb([7]) + _NO_KWARGS


# The kept path (issue 22): a call whose only option is its task's result_ttl.
TTLS = {"noop": 3600, "a": 0.25, "tâche": 86400.0}
KEPT = {
    envelope.plain_prefix(n, True): (envelope.own_suffix({"result_ttl": t}), n)
    for n, t in TTLS.items()
}


def _kept_agrees(data: bytes) -> bool:
    """own_call's answer, when it has one, is fields' answer for that call."""
    kept = envelope.own_call(data, KEPT)
    if kept is None:
        return True
    name, args, raw = kept
    return _fields_or_none(data) == (
        name, args, {}, {"result_ttl": TTLS[name]}, {}
    ) and _raw_agrees(data, args, raw, KEPT)  # fmt: skip


@given(st.sampled_from(sorted(TTLS)), st.lists(_values, max_size=4))
def test_any_kept_call_reads_as_fields_reads_it(name: str, args: list[Any]) -> None:
    data = envelope.encode(name, args, {}, {"result_ttl": TTLS[name]})
    assert envelope.own_call(data, KEPT) == (name, args, _packed(args))
    assert _kept_agrees(data)


@given(st.lists(_values, max_size=3), st.integers(0, 60), st.binary(max_size=3))
def test_a_damaged_kept_envelope_is_never_misread(args: list[Any], at: int, junk: bytes) -> None:
    data = envelope.encode("noop", args, {}, {"result_ttl": 3600})
    at = min(at, len(data))
    for damaged in (data[:at] + junk + data[at:], data[:at] + junk + data[at + 1 :]):
        assert _kept_agrees(damaged)


@pytest.mark.parametrize(
    "data",
    [
        envelope.encode("noop", [1], {}, {"result_ttl": 60}),  # another ttl than the task's
        envelope.encode("noop", [1], {}, {"result_ttl": 3600, "timeout": 1.0}),
        envelope.encode("noop", [1], {"k": 2}, {"result_ttl": 3600}),
        envelope.encode("noop", [1], {}, {"result_ttl": 3600}, {"trace": "t"}),
        envelope.encode("noop", [1], {}),  # a plain call: plain_call's, not this one's
        envelope.encode("unknown", [1], {}, {"result_ttl": 3600}),
    ],
)
def test_other_calls_step_aside_from_the_kept_path(data: bytes) -> None:
    assert envelope.own_call(data, KEPT) is None


def test_a_kept_call_plans_with_its_result_kept_and_the_tasks_options() -> None:
    app = gq.App(queue="q")

    @app.task(name="resize", result_ttl=600, retries=2, timeout=5.0)
    def resize(key: str) -> str:
        return key.upper()

    data = envelope.encode("resize", ["k"], {}, {"result_ttl": 600})
    known = {envelope.plain_prefix("resize", True): (envelope.own_suffix({"result_ttl": 600}), 1)}
    assert envelope.own_call(data, known) == (1, ["k"], b"\x91\xa1k")
    job = gq.Job("id-1", data, 0)
    job.queue = "q"
    plan = app.plan(job)
    assert (plan.timeout, plan.max_attempts, plan.task) == (5.0, 2, "resize")
    assert plan.finish is not None and plan.finish.ttl == 600.0
    value = plan.run()
    assert value == "K"
    record = outcome.unpack(plan.finish.done(value).record)
    assert (record["status"], record["value"], record["args"]) == ("done", "K", ["k"])
    # A job that cannot run is planned to fail when run, with the Finisher its failure
    # writes (issue 31, defect 6: a group member's dead marks its group).
    refused = app.plan(gq.Job("id-2", envelope.encode("resize", [], {}, {"result_ttl": 600})))
    assert refused.finish is not None
    with pytest.raises(gq.Kill, match="the arguments do not bind"):
        refused.run()


def test_a_call_carrying_its_tasks_own_options_is_read_by_its_bytes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every call of a task with options carries them (taskopts.wire): such a call, and a
    # plain one, must not need fields(); another call's options still go through it.
    app = gq.App(queue="q")

    @app.task(name="deliver", retries=3, timeout=5.0, backoff=2.0)
    def deliver(url: str) -> str:
        return url

    own = envelope.encode("deliver", ["u"], {}, {"retries": 3, "timeout": 5.0, "backoff": 2.0})
    other = envelope.encode("deliver", ["u"], {}, {"retries": 1})
    plan_of = app.plan
    monkeypatch.setattr("gq.tasks.dispatch._fields", lambda data: pytest.fail("read by fields()"))
    for data in (own, envelope.encode("deliver", ["u"], {})):
        plan = plan_of(gq.Job("id-1", data))
        options = (plan.timeout, plan.max_attempts, plan.max_backoff, plan.finish)
        assert options == (5.0, 3, 2.0, None)
        assert plan.run() == "u"
    monkeypatch.undo()
    assert plan_of(gq.Job("id-2", other)).max_attempts == 1


def test_a_plain_call_of_a_results_task_keeps_its_tasks_result() -> None:
    # docs/wire.md: an absent key falls back to the task's own option (issue 31, defect
    # 11): another language's producer writes no opts; only result_ttl=0 keeps none.
    app = gq.App(queue="q")

    @app.task(name="resize", result_ttl=600)
    def resize(key: str) -> str:
        return key

    plain = app.plan(gq.Job("id-1", envelope.encode("resize", ["k"], {}))).finish
    assert plain is not None and plain.ttl == 600.0
    none = app.plan(gq.Job("id-3", envelope.encode("resize", ["k"], {}, {"result_ttl": 0})))
    assert none.finish is None
    kept = app.plan(gq.Job("id-2", envelope.encode("resize", ["k"], {}, {"result_ttl": 600})))
    assert kept.finish is not None and kept.finish.ttl == 600.0
