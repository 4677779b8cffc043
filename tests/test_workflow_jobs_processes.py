"""Workflow jobs on real gq-worker processes and a real Redis (issue 31, defects 4 and 9):
a group's members and a chain's later steps keep their tenant's concurrency limit over two
workers, and a later step's relative ``expires`` counts from its own enqueue."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

import gq
from tests.helpers import RedisServer, stop_process
from tests.test_workflow_processes import _runs, _worker
from tests.workflow_app import build

pytestmark = [pytest.mark.timeout(90), pytest.mark.real_redis]


def test_grouped_workflow_jobs_keep_their_limit_over_two_workers(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    queue = f"wf_{uuid.uuid4().hex[:8]}"
    app = build(queue, redis_server.url)
    t = app.tasks
    gq.Queue(queue, client=redis_server.client()).set_group_limits(concurrency=1)
    members = gq.group(t["tenant"].s("acme") for _ in range(5)).enqueue()
    chained = gq.chain(t["tenant"].si("acme"), t["tenant"].si("acme"),
                       t["tenant"].si("acme")).enqueue()  # fmt: skip
    workers = [_worker(tmp_path, redis_server.url, queue) for _ in range(2)]
    try:
        assert members.get(timeout=30) == ["acme"] * 5
        assert chained.get(timeout=30) == "acme"
    finally:
        for worker in workers:
            stop_process(worker)
    at_once = [int(n) for n in redis_server.client().lrange(f"{queue}:test:at-once", 0, -1)]
    assert len(at_once) == 8 and max(at_once) == 1


def test_a_step_after_a_slow_step_is_not_born_expired(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    queue = f"wf_{uuid.uuid4().hex[:8]}"
    app = build(queue, redis_server.url)
    t = app.tasks
    handle = gq.chain(t["slow"].s(1.5), t["brief"].s()).enqueue()  # brief: expires=1.0
    worker = _worker(tmp_path, redis_server.url, queue)
    try:
        assert handle.get(timeout=30) == "late!"
    finally:
        stop_process(worker)
    assert _runs(redis_server.client(), queue) == {"slow": 1, "brief": 1}
