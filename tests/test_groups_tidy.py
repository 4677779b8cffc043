"""The custodian's tidy step on the groups' keys (gq/scripts/tidy.lua): a group's rate
state or hold that is past says nothing and is dropped (no field per group for ever), and
the groups' hashes are walked over successive calls, each from where the last stopped, so
that every entry is seen with bounded work per call (issue 31: defect 13 and tidy's
first page). fakeredis and a real Redis."""

from __future__ import annotations

import time

import pytest

import gq
from gq.store.groupkeys import group_key
from tests.group_support import fetch_all, push, store
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(120)
KEEP = {"dead_max_jobs": 100, "dead_max_age": 3600}


def _tidy_walk(backend: Backend, calls: int = 30) -> int:
    """Tidy until its walks are complete; how many calls it took."""
    q, cursor = store(backend), "0"
    for made in range(1, calls + 1):
        cursor = q.tidy(cursor, **KEEP)[0]
        if cursor == "0":
            return made
    raise AssertionError(f"the walk did not complete in {calls} calls")


def test_a_group_s_rate_state_is_dropped_once_it_is_past(backend: Backend) -> None:
    gq.Queue(backend.queue, client=backend.client()).set_group_limits(rate=(1, 3600))
    push(backend, [("a-0", "a"), ("b-0", "b")])
    q = store(backend)
    q.register("c1")
    assert sorted(fetch_all(q, "c1", 10)[0]) == ["a-0", "b-0"]
    direct, state = backend.direct(), group_key(backend.queue, "state")
    assert direct.hexists(state, "tat\na") and direct.hexists(state, "tat\nb")
    q.tidy("0", **KEEP)
    assert direct.hexists(state, "tat\na")  # in the future: it still says when a may start
    # Time passes for a (its next start is in the past: a past tat reads as now), not for b.
    past = f"{(time.time() - 10) * 1000:.3f}"
    direct.hset(state, mapping={"tat\na": past, "hold\nc": past, "held\nd": "1"})
    q.tidy("0", **KEEP)
    assert not direct.hexists(state, "tat\na") and not direct.hexists(state, "hold\nc")
    assert direct.hexists(state, "tat\nb")
    assert direct.hget(state, "held\nd") == b"1"  # a count, never dropped for its value


def test_tidy_walks_every_entry_of_the_groups_hashes_over_successive_calls(
    backend: Backend,
) -> None:
    direct, q = backend.direct(), store(backend)
    later, state = group_key(backend.queue, "later"), group_key(backend.queue, "state")
    live = {f"live-{n}": "g" for n in range(2500)}  # scheduled grouped jobs that exist
    stale = {f"gone-{n}": "g" for n in range(300)}  # their messages gone
    direct.hset(q.keys.data, mapping={job_id: b"m" for job_id in live})
    direct.hset(later, mapping={**live, **stale})
    past = f"{(time.time() - 10) * 1000:.3f}"
    direct.hset(state, mapping={f"tat\ng{n}": past for n in range(2500)})
    q.tidy("0", **KEEP)
    assert direct.hlen(state) > 0  # bounded: one page per call
    calls = _tidy_walk(backend)
    assert calls > 1
    for _ in range(3):  # (fakeredis's cursor is an offset: a deletion may shift one walk)
        if direct.hlen(later) == len(live) and direct.hlen(state) == 0:
            break
        _tidy_walk(backend)
    assert direct.hlen(state) == 0
    assert sorted(k.decode() for k in direct.hkeys(later)) == sorted(live)
