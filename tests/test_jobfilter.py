"""``gq.JobFilter`` on its own (gq/jobfilter.py): parsing the command line's text, clear
errors for a wrong filter, and what each field matches. No Redis."""

from __future__ import annotations

import time

import pytest

from gq.errors import ConfigurationError
from gq.jobfilter import Candidate, JobFilter, parse_duration
from tests.bulk_support import task_message, v7


def candidate(job_id: str, state: str = "ready", score: float | None = None,
              message: bytes | None = None, line: str = "") -> Candidate:  # fmt: skip
    return Candidate(job_id, state, score, message, line)


def test_durations_take_units_and_refuse_junk() -> None:
    assert parse_duration("90") == 90
    assert parse_duration("10m") == 600
    assert parse_duration("2h") == 7200
    assert parse_duration("1.5d") == 1.5 * 86400
    assert parse_duration("250ms") == 0.25
    for bad in ("2x", "", "-1h", "h", "1 hour"):
        with pytest.raises(ConfigurationError, match="invalid duration"):
            parse_duration(bad)


@pytest.mark.parametrize(
    ("given", "reason"),
    [
        ({"state": ["bogus"]}, "unknown state 'bogus'"),
        ({"args": ["tenant"]}, "KEY=VALUE"),
        ({"args": ["=acme"]}, "KEY=VALUE"),
        ({"older_than": "soon"}, "invalid duration"),
    ],
)
def test_a_wrong_filter_says_what_is_wrong(given: dict, reason: str) -> None:
    with pytest.raises(ConfigurationError, match=reason):
        JobFilter.parse(**given)


def test_states_come_repeated_or_as_a_comma_list_and_actions_refuse_others() -> None:
    f = JobFilter.parse(state=["ready,dead", "scheduled"])
    assert f.states == ("ready", "dead", "scheduled")
    assert f.within(("ready", "scheduled", "dead")) == ("ready", "scheduled", "dead")
    with pytest.raises(ConfigurationError, match="'dead' is not for this action"):
        f.within(("ready", "scheduled"))
    assert JobFilter().within(("dead",)) == ("dead",)


def test_narrows_is_false_only_for_a_filter_of_states_alone() -> None:
    assert not JobFilter().narrows()
    assert not JobFilter(states=("ready",)).narrows()
    assert JobFilter(task="a").narrows()
    assert JobFilter(older_than=0).narrows()


def test_task_args_error_and_id_prefix_match_what_they_name() -> None:
    now = time.time()
    job_id = v7()
    message = task_message(job_id, "app.send", "x@a.io", 3, error="Timeout talking to smtp",
                           tenant="acme", meta={"plan": "pro"})  # fmt: skip
    c = candidate(job_id, "dead", now, message)
    assert JobFilter(task="app.send").matches(c, now)
    assert JobFilter(task="app.*").matches(c, now)
    assert not JobFilter(task="app.sen").matches(c, now)
    assert JobFilter(args=(("tenant", "acme"),)).matches(c, now)
    assert JobFilter(args=(("1", "3"),)).matches(c, now)  # by position, compared as JSON
    assert JobFilter(args=(("0", "x@a.io"),)).matches(c, now)
    assert not JobFilter(args=(("tenant", "beta"),)).matches(c, now)
    assert not JobFilter(args=(("missing", "acme"),)).matches(c, now)
    assert JobFilter(args=(("meta", '{"plan": "pro"}'),)).matches(c, now)
    assert JobFilter(args_contains="X@A").matches(c, now)
    assert JobFilter(error="timeout").matches(c, now)
    assert not JobFilter(error="refused").matches(c, now)
    assert JobFilter(id_prefix=job_id[:6]).matches(c, now)
    assert not JobFilter(id_prefix="zz").matches(c, now)


def test_a_byte_job_matches_on_its_bytes_and_never_on_a_task() -> None:
    from gq import job as jobs

    message = jobs.encode(jobs.Job(id="b1", data=b"invoice 42 for acme"))
    c = candidate("b1", message=message)
    assert JobFilter(args_contains="acme").matches(c, 0)
    assert not JobFilter(task="*").matches(c, 0)
    assert not JobFilter(args=(("0", "invoice"),)).matches(c, 0)


def test_age_is_the_enqueue_time_and_a_dead_jobs_death_time() -> None:
    now = time.time()
    old = candidate(v7(7200, now), "ready", None, task_message("x", "t"))
    young = candidate(v7(60, now), "ready", None, task_message("y", "t"))
    assert JobFilter(older_than=3600).matches(old, now)
    assert not JobFilter(older_than=3600).matches(young, now)
    assert JobFilter(newer_than=600).matches(young, now)
    assert not JobFilter(newer_than=600).matches(old, now)
    # A dead job enqueued long ago that died a minute ago is a minute old.
    dead = candidate(v7(7200, now), "dead", now - 60, task_message("z", "t"))
    assert JobFilter(newer_than=600).matches(dead, now)
    # A job with no readable time (a curlyq id, no ReadyAt) matches no age filter.
    curlyq = candidate("c-1", "ready", None, task_message("c-1", "t"))
    assert not JobFilter(older_than=0).matches(curlyq, now)
    assert JobFilter().matches(curlyq, now)


def test_a_job_waiting_in_its_line_has_the_lines_group() -> None:
    c = candidate("g1", line="tenant:acme\n7", message=task_message("g1", "t"))
    assert c.group == "tenant:acme"
    assert JobFilter(group="tenant:acme").matches(c, 0)
    assert not JobFilter(group="tenant").matches(c, 0)
