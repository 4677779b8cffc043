"""A kept result's record built from the envelope's bytes (issue 22's worker cost): for a
call read by its bytes (``envelope.own_call``: positional arguments, the task's own
options) the worker writes the record as the task's head, the args' bytes as the
envelope carries them, the attempt and the packed value (``gq.tasks.outcome.OwnFinisher``).
It must read (``Record.read``) exactly as the dict path's record does, for any call and
any value; the calls of a workflow and those read by ``fields()`` keep the dict path."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

import gq
from gq.store.outcomes import read_state
from gq.store.tasks import TaskQueue
from gq.tasks import envelope
from gq.tasks.outcome import GATHER, THEN, Finisher, Outcome, OwnFinisher, Record, finisher
from tests.helpers import Backend
from tests.task_support import make_app, run_app, stored

__all__ = ["run_app"]  # the fixture

TTL = 600
STAMP = msgpack.packb("1700000000.5")  # the end time lib/outcome.lua writes first
STARTED = 1700000000.25  # when the run began, set alike on both paths' finishers
NAMES = ["noop", "tâche", "x" * 31]
APP = gq.App(queue="q")


def _noop(*args: Any, **kwargs: Any) -> None: ...


for _name in NAMES:
    APP.task(name=_name, result_ttl=TTL, retries=3)(_noop)


def _read(out: Outcome) -> Record:
    return Record.read(STAMP + out.record)


def _same(a: Outcome, b: Outcome) -> bool:
    """Two outcomes write the same: the records read alike, the same TTL, no follow-ups."""
    same_ttl = (a.ttl, a.ttl_ms) == (b.ttl, b.ttl_ms)
    return _read(a) == _read(b) and same_ttl and a.ops == b.ops == []


def _own_call(name: str, args: list[Any], attempt: int) -> tuple[gq.Job, OwnFinisher]:
    """A call as the task's enqueue writes it, and the finisher its plan carries."""
    opts = {"retries": 3, "result_ttl": float(TTL)}
    job = gq.Job("1700000000000-0001", envelope.encode(name, args, {}, opts), attempt)
    job.queue = "q"
    finish = APP.plan(job).finish
    assert isinstance(finish, OwnFinisher)
    finish.started = STARTED
    return job, finish


def _dict_path(job: gq.Job) -> Finisher:
    """The general path's finisher of the same job (its envelope read by fields())."""
    found = finisher(job, envelope.fields(job.data))
    assert found is not None and type(found) is Finisher
    found.started = STARTED
    return found


_leaves = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary()
    | st.datetimes(timezones=st.just(dt.timezone.utc))
)
_values = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=3)
        | st.tuples(inner, inner)
        | st.dictionaries(st.text(), inner, max_size=3)
    ),
    max_leaves=10,
)
# Values with no MessagePack form: the "could not be kept" record, on either path.
_unkept = st.sampled_from(
    [{1, 2}, object(), dt.date(2026, 1, 2), dt.datetime(2026, 1, 2), 2**64, [1, {"k": {3}}]]
)


@given(
    st.sampled_from(NAMES),
    st.lists(_values, max_size=4),
    _values | _unkept,
    st.integers(0, 2**40) | st.integers(0, 130),
)
def test_the_byte_record_reads_as_the_dict_record(
    name: str, args: list[Any], value: Any, attempt: int
) -> None:
    job, own = _own_call(name, args, attempt)
    assert _same(own.done(value), _dict_path(job).done(value))


def test_every_attempt_reads_as_the_dict_paths() -> None:
    # (the attempts below 64 have their bytes cached: each one, and past them)
    for attempt in [*range(140), 2**15, 2**31, 2**40, 2**63 - 1, 2**64 - 1]:
        job, own = _own_call("noop", [attempt], attempt)
        assert _same(own.done(attempt), _dict_path(job).done(attempt)), attempt
        assert _read(own.done(None)).attempt == attempt


@given(st.sampled_from(NAMES), st.lists(_values, max_size=3), st.text(max_size=50))
def test_a_failure_reads_as_the_dict_paths(name: str, args: list[Any], reason: str) -> None:
    job, own = _own_call(name, args, 1)
    assert _same(own.failed(reason), _dict_path(job).failed(reason))


def test_the_byte_record_holds_the_call_and_its_value() -> None:
    when = dt.datetime(2026, 1, 2, 3, 4, 5, 678000, tzinfo=dt.timezone.utc)
    args = [1, "two", [3.5, {"k": b"v"}], None, when]
    job, own = _own_call("noop", args, 2**40)
    record = _read(own.done({"at": when, "nested": [[1], {"x": (2, 3)}]}))
    value = {"at": when, "nested": [[1], {"x": [2, 3]}]}  # (a tuple reads back as a list)
    assert record == Record("done", "noop", 2**40, args, {}, value, None, 1700000000.5, STARTED)
    out = own.done(None)
    assert (out.ttl, out.ttl_ms, out.ops) == (600.0, "600000", [])
    assert _read(out).value is None and _read(out).error is None


def test_a_value_with_no_form_is_the_results_failure_not_the_jobs() -> None:
    job, own = _own_call("noop", [1], 0)
    record = _read(own.done({1, 2}))
    assert (record.status, record.value, record.args) == ("done", None, [1])
    assert record.error is not None and record.error.startswith("the return value could not")


#: A chain's next step, as workflows write it (checked before the run: gq/tasks/wire_opts.py).
_STEP = {"kind": "step", "queue": "q", "id": "s", "task": "noop"}


@pytest.mark.parametrize(
    "opts",
    [
        {"retries": 3, "result_ttl": float(TTL), THEN: [_STEP]},
        {"retries": 3, "result_ttl": float(TTL), GATHER: {"group": "g"}},
        {"result_ttl": float(TTL)},  # (another call's options: using(retries=...))
        {"retries": 3, "result_ttl": 60.0},
    ],
)
def test_a_workflows_calls_and_other_options_keep_the_dict_path(opts: dict[str, Any]) -> None:
    # A chain's step, a group's member or callback carries more than the task's own
    # options: never an own call, so never recorded from bytes.
    data = envelope.encode("noop", [1], {}, opts)
    assert envelope.own_call(data, dict(APP.dispatcher()._own)) is None
    if GATHER not in opts:
        finish = APP.plan(gq.Job("id-1", data)).finish
        assert type(finish) is Finisher


@pytest.mark.parametrize(
    "data",
    [
        envelope.encode("noop", [1], {"k": 2}, {"retries": 3, "result_ttl": float(TTL)}),
        envelope.encode("noop", [1], {}, {"retries": 3, "result_ttl": float(TTL)}, {"t": "1"}),
    ],
)
def test_calls_read_by_fields_keep_the_dict_path(data: bytes) -> None:
    finish = APP.plan(gq.Job("id-1", data)).finish
    assert type(finish) is Finisher and finish.ttl == 600.0


def test_a_plain_call_of_a_results_task_keeps_its_tasks_result_from_bytes() -> None:
    # (issue 31, defect 11: an envelope without opts gets the task's own result_ttl)
    finish = APP.plan(gq.Job("id-1", envelope.encode("noop", [1], {}))).finish
    assert type(finish) is OwnFinisher and finish.ttl == 600.0


# A real worker, on a real Redis: own calls and fields()-read calls keep their results.


@pytest.mark.parametrize("backend", ["real"], indirect=True)
def test_a_worker_keeps_the_results_of_own_and_other_calls(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    when = dt.datetime(2026, 1, 2, tzinfo=dt.timezone.utc)

    @app.task(name="echo", result_ttl=60, retries=2)
    def echo(*args: Any, **kwargs: Any) -> Any:
        return {"args": list(args), "kwargs": kwargs, "job": gq.current_job().attempt}  # type: ignore[union-attr]

    @app.task(name="unkept", result_ttl=60)
    def unkept(n: int) -> object:
        return {n}

    calls = {
        "own": (echo.enqueue(1, "two", [3.0], when), [1, "two", [3.0], when], {}),
        "kwargs": (echo.enqueue(1, k="v"), [1], {"k": "v"}),
        "headers": (echo.using(headers={"trace": "t"}).enqueue(b"x"), [b"x"], {}),
        "none": (echo.enqueue(), [], {}),
    }
    failing = unkept.enqueue(5)
    for result, kind in [(calls["own"][0], OwnFinisher), (calls["none"][0], OwnFinisher),
                         (failing, OwnFinisher), (calls["kwargs"][0], Finisher),
                         (calls["headers"][0], Finisher)]:  # fmt: skip
        job = stored(backend, result.id)
        assert job is not None and type(app.plan(job).finish) is kind  # the path it takes
    run_app(app)
    store = TaskQueue(backend.client(), backend.queue)
    for name, (result, args, kwargs) in calls.items():
        assert result.get(timeout=10) == {"args": args, "kwargs": kwargs, "job": 0}, name
        assert result.status() == "done", name
        record = read_state(store, result.id).record
        assert record is not None
        assert (record.task, record.attempt, record.args, record.kwargs) == (
            "echo", 0, args, kwargs)  # fmt: skip
    with pytest.raises(gq.TaskFailed, match="could not be kept") as caught:
        failing.get(timeout=10)
    assert caught.value.status == "done"
    assert failing.status() == "done"
