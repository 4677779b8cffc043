"""The operator's moves on scheduled grouped jobs (issue 31, also-check list): a cancel
drops the job's note in the groups' later hash, and "run now" (the dashboard's) moves it
to its group's line, not past its group to the active list. fakeredis and a real Redis."""

from __future__ import annotations

import pytest

from gq.store.admin import QueueAdmin
from gq.store.groupkeys import group_key
from tests.group_support import push, store, waiting
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(60)
FAR = 4e9  # due in a century


def _admin(backend: Backend) -> QueueAdmin:
    return QueueAdmin(backend.client(), backend.queue)


def test_a_cancelled_scheduled_grouped_job_leaves_no_note_in_later(backend: Backend) -> None:
    push(backend, [("a-0", "a"), ("a-1", "a")], mode="after", at=FAR)
    later = group_key(backend.queue, "later")
    assert backend.direct().hlen(later) == 2
    assert _admin(backend).cancel(["a-0"]) == ["removed"]
    assert [k.decode() for k in backend.direct().hkeys(later)] == ["a-1"]
    assert store(backend).enqueue_due(100) == 0  # a-1 still waits for its time


def test_run_now_puts_a_grouped_job_in_its_group_s_line(backend: Backend) -> None:
    push(backend, [("a-0", "a"), ("p-0", "")], mode="after", at=FAR)
    assert _admin(backend).run_scheduled(["a-0", "p-0", "nope"]) == [True, True, False]
    direct = backend.direct()
    assert direct.lrange(f"{backend.queue}:active", 0, -1) == [b"p-0"]
    assert waiting(backend) == {"a": 1}
    assert direct.hlen(group_key(backend.queue, "later")) == 0
    assert direct.zcard(f"{backend.queue}:scheduled") == 0
    q = store(backend)
    q.register("c1")
    assert sorted(job_id for job_id, _ in q.fetch("c1", 10)) == ["a-0", "p-0"]
