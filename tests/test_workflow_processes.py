"""Workflows across a real SIGKILL (SPEC section 16): a worker killed between running a
step (or a group member) and acknowledging it runs it again elsewhere, and the next step
(or the callback) is still enqueued exactly once. Real gq-worker processes, real Redis."""

from __future__ import annotations

import subprocess
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

import gq
from tests.cli_support import ROOT, env_for
from tests.faults import FAST, LAUNCHER
from tests.helpers import RedisServer, stop_process, wait_until
from tests.workflow_app import build

pytestmark = [pytest.mark.timeout(90), pytest.mark.real_redis]


def _worker(tmp_path: Path, url: str, queue: str) -> subprocess.Popen[bytes]:
    with open(tmp_path / f"worker-{uuid.uuid4().hex[:6]}.log", "wb") as log:
        return subprocess.Popen(  # the child keeps its own copy of the log's descriptor
            [*LAUNCHER, "tests.workflow_app:app", "--url", url, *FAST],
            cwd=ROOT, env=env_for(None, queue, url), stdout=log, stderr=subprocess.STDOUT,
        )  # fmt: skip


def _runs(client: Any, queue: str) -> Counter[str]:
    return Counter(r.decode() for r in client.lrange(f"{queue}:test:runs", 0, -1))


def _across_a_crash(
    tmp_path: Path, redis_server: RedisServer, queue: str, handle: Any, expected: Any
) -> Counter[str]:
    """Run the workflow ``handle`` on a worker that SIGKILLs itself, then on a survivor
    that recovers its jobs; check its value; the runs of each task."""
    doomed = _worker(tmp_path, redis_server.url, queue)
    wait_until(lambda: doomed.poll() is not None, 30, message="the worker killed itself")
    assert doomed.returncode == -9
    survivor = _worker(tmp_path, redis_server.url, queue)
    try:
        assert handle.get(timeout=30) == expected
        return _runs(redis_server.client(), queue)
    finally:
        stop_process(survivor)


def test_chain_step_killed_before_its_ack_enqueues_the_next_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    queue = f"wf_{uuid.uuid4().hex[:8]}"
    app = build(queue, redis_server.url)
    t = app.tasks
    r = gq.chain(t["first"].s("a"), t["step"].s("die"), t["step"].s("c")).enqueue()
    runs = _across_a_crash(tmp_path, redis_server, queue, r, "a>die>c")
    assert runs["step-die"] == 2  # ran again after the crash (at-least-once)
    assert runs["first"] == 1 and runs["step-c"] == 1  # the next step once


def test_group_member_killed_before_its_ack_runs_the_callback_once(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    queue = f"wf_{uuid.uuid4().hex[:8]}"
    app = build(queue, redis_server.url)
    t = app.tasks
    members = [t["member"].s(i, "die" if i == 0 else "ok") for i in range(5)]
    r = gq.group(members).then(t["callback"].s()).enqueue()
    runs = _across_a_crash(tmp_path, redis_server, queue, r, sum(range(5)))
    assert runs["member-0"] == 2 and runs["callback"] == 1
    left = redis_server.client().hget(f"{queue}:group:{r.id}", "left")
    assert left == b"0"  # each member counted once, the re-run's included


def test_get_in_os_threads_and_aget_under_asyncio_in_a_plain_program(
    tmp_path: Path, redis_server: RedisServer
) -> None:
    import json
    import sys

    queue = f"wf_{uuid.uuid4().hex[:8]}"
    worker = _worker(tmp_path, redis_server.url, queue)
    try:
        done = subprocess.run(
            [sys.executable, "-m", "tests.results_client", redis_server.url, queue],
            cwd=ROOT, capture_output=True, timeout=60, text=True,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        shown = json.loads(done.stdout)
        assert shown["threads"] == list(range(8))
        assert shown["asyncio"] == [f"a{i}" for i in range(4)]
        assert shown["thread_names"].count("gq-results") == 1  # one subscriber for them all
    finally:
        stop_process(worker)
