"""gq.tasks.describe: a task job's name and arguments as short, printable text, shared by the
dashboard and the gq views."""

from __future__ import annotations

from datetime import datetime, timezone

from gq.tasks import envelope
from gq.tasks.describe import VALUE_CHARS, describe, shown


def test_a_task_shows_as_a_call_with_its_arguments_in_order() -> None:
    data = envelope.encode("billing.charge", ["acme", 42, 1.5, None, True], {"note": "paid"})
    view = describe(data)
    assert view.problem is None and view.task is not None
    assert view.task.call() == "billing.charge('acme', 42, 1.5, None, True, note='paid')"
    assert view.task.args == ["'acme'", "42", "1.5", "None", "True"]
    assert view.task.kwargs == {"note": "'paid'"}
    assert not view.task.shortened


def test_options_and_headers_are_shown_as_text() -> None:
    data = envelope.encode("t", [], {}, opts={"retries": 3, "timeout": 2.5}, headers={"tid": "x"})
    task = describe(data).task
    assert task is not None
    assert task.opts == {"retries": "3", "timeout": "2.5"}
    assert task.headers == {"tid": "'x'"}


def test_a_long_value_is_cut_with_an_ellipsis_and_marked_shortened() -> None:
    data = envelope.encode("t", ["a" * 500], {"deep": [list(range(300))]})
    task = describe(data, width=30).task
    assert task is not None and task.shortened
    assert task.args == ["'" + "a" * 28 + "…"]
    assert len(task.kwargs["deep"]) == 30 and task.kwargs["deep"].endswith("…")
    assert task.kwargs["deep"].startswith("[[0, 1, 2")


def test_a_huge_argument_costs_a_slice_not_a_copy() -> None:
    text = shown("x" * 50_000_000)
    assert len(text) == VALUE_CHARS and text.endswith("…")
    assert len(shown(list(range(1_000_000)))) == VALUE_CHARS


def test_control_characters_and_escapes_never_reach_the_text_as_such() -> None:
    data = envelope.encode("t\x1b[2J", ["\x1b[31mred\r\n", b"\x00\xff\x1b"], {"k\n": "\x07"})
    task = describe(data).task
    assert task is not None
    text = task.call()
    assert text.isprintable(), text
    assert task.name == repr("t\x1b[2J")
    assert task.args == [repr("\x1b[31mred\r\n"), repr(b"\x00\xff\x1b")]
    assert task.kwargs == {repr("k\n"): repr("\x07")}


def test_bytes_and_datetimes_have_their_own_forms() -> None:
    when = datetime(2026, 3, 4, 5, 6, 7, tzinfo=timezone.utc)
    data = envelope.encode("t", [b"<raw>", when], {"nested": {"b": b"\x01"}})
    task = describe(data).task
    assert task is not None
    assert task.args == ["b'<raw>'", "2026-03-04T05:06:07+00:00"]
    assert task.kwargs == {"nested": "{'b': b'\\x01'}"}


def test_byte_data_is_not_a_task() -> None:
    for data in (b"payload", b"", b"\x00gq", b"\xff\xfe", None):
        view = describe(data)
        assert view.task is None and view.problem is None


def test_an_envelope_that_does_not_decode_says_why() -> None:
    for bad, reason in [
        (envelope.MAGIC + b"\xc1", "not MessagePack"),
        (envelope.MAGIC + b"\x93\x01\x02\x03", "not a map"),
        (envelope.MAGIC + b"\x81\xa4task\xa1t", "args is NoneType"),
    ]:
        view = describe(bad)
        assert view.task is None
        assert view.problem is not None and view.problem.startswith(
            "task envelope does not decode:"
        )
        assert reason in view.problem, view.problem
