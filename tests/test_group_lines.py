"""A group's line read back in order (lib/group_take.lua builds each job's field, its
group and sequence, without formatting every number): sequences across tens, hundreds
and below zero (jobs given back to the front), in batches of odd sizes; fakeredis and
real Redis."""

from __future__ import annotations

import pytest

import gq
from tests.group_support import fetch_all, push, store
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(120)


def test_a_long_line_comes_out_in_order_in_odd_batches(backend: Backend) -> None:
    push(backend, [(f"a-{i}", "a") for i in range(1234)])
    q = store(backend)
    q.register("c1")
    taken: list[str] = []
    for count in [1, 9, 10, 3, 97, 100, 1000, 14]:
        ids, _ = fetch_all(q, "c1", count)
        taken += ids
    assert taken == [f"a-{i}" for i in range(1234)]


def test_jobs_given_back_come_out_first_from_below_zero(backend: Backend) -> None:
    gq.Queue(backend.queue, client=backend.client()).set_group_limits(concurrency=100)
    push(backend, [(f"a-{i}", "a") for i in range(23)])
    q = store(backend)
    q.register("c1")
    first, _ = fetch_all(q, "c1", 23)  # the whole line: its next starts at 0 again
    assert q.requeue("c1", first) == 23  # back to the front: sequences -23 to -1
    push(backend, [("a-late", "a")])
    taken: list[str] = []
    for count in [2, 11, 1, 10]:
        ids, _ = fetch_all(q, "c1", count)
        taken += ids
    assert taken == [f"a-{i}" for i in range(23)] + ["a-late"]
