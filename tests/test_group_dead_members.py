"""A group member that reaches dead without running marks its group failed (issue 31,
defect 6): expired, of a task the worker does not know, or sent to dead by the recovery
limit (recover.lua). get() raises TaskFailed naming it; status() reads "failed"."""

from __future__ import annotations

from datetime import datetime, timezone
from typing import Any

import pytest

import gq
from gq.store.tasks import TaskQueue
from tests.helpers import Backend
from tests.task_support import make_app, run_app

__all__ = ["run_app"]  # the fixture

LONG_AGO = datetime(2000, 1, 1, tzinfo=timezone.utc)


def _two_tasks(app: gq.App, **gone_options: Any) -> tuple[Any, Any]:
    @app.task(name="fine")
    def fine(x: int) -> int:
        return x

    @app.task(name="gone", **gone_options)
    def gone(x: int) -> int:
        return x

    return fine, gone


def test_an_expired_member_fails_its_group(backend: Backend, run_app: Any) -> None:
    app = make_app(backend)
    fine, gone = _two_tasks(app, expires=LONG_AGO)
    g = gq.group([fine.s(1), gone.s(2)]).enqueue()
    run_app(app)
    with pytest.raises(gq.TaskFailed, match="expired") as caught:
        g.get(timeout=10)
    assert caught.value.id == g.members[1][1]
    assert g.status() == "failed"


def test_a_member_of_an_unknown_task_fails_its_group(backend: Backend, run_app: Any) -> None:
    producer = make_app(backend)
    fine, gone = _two_tasks(producer)
    g = gq.group([fine.s(1), gone.s(2)]).then(fine.s()).enqueue()
    worker = make_app(backend)
    worker.task(name="fine")(lambda *x: x)
    run_app(worker, job_max_attempts=0)
    with pytest.raises(gq.TaskFailed, match="gone") as caught:
        g.get(timeout=10)
    assert caught.value.id == g.members[1][1]
    assert g.status() == "failed"


def _crash_until_dead(queue: TaskQueue, job_id: str, *others: str) -> None:
    """The job (and any of ``others`` fetched before it) is taken by a consumer that
    dies, again and again, until the recovery limit sends it to dead (recover.lua), as a
    job that crashes its worker would."""
    for _ in range(5 * (1 + len(others))):
        queue.register("crashing")
        assert [i for i, _ in queue.fetch("crashing", 1)] in ([job_id], [], *[[o] for o in others])
        queue.recover("custodian", [queue.keys.inflight("crashing")], timeout=-1, max_jobs=10,
                      max_recoveries=1, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
        if queue.client.zscore(queue.keys.dead, job_id) is not None:
            return
    raise AssertionError("never sent to dead")


def test_a_member_sent_to_dead_by_the_recovery_limit_fails_its_group(
    backend: Backend,
) -> None:
    app = make_app(backend)
    fine, gone = _two_tasks(app)
    g = gq.group([gone.s(2)]).enqueue()
    queue = TaskQueue(backend.client(), backend.queue)
    _crash_until_dead(queue, g.members[0][1])
    with pytest.raises(gq.TaskFailed, match="recovered 1 times") as caught:
        g.get(timeout=10)
    assert caught.value.id == g.members[0][1]
    assert g.status() == "failed"
    assert queue.client.exists(queue.keys.unwritten) == 0  # written once, then forgotten


def test_an_outcome_left_unwritten_by_a_crashed_custodian_is_written_by_the_next(
    backend: Backend,
) -> None:
    app = make_app(backend)
    fine, gone = _two_tasks(app, result_ttl=60)
    r = gone.enqueue(3)
    queue = TaskQueue(backend.client(), backend.queue)
    _crash_until_dead(queue, r.id)
    # As if the custodian died before it wrote the outcome: the id is still listed.
    queue.client.sadd(queue.keys.unwritten, r.id)
    queue.recover("custodian", [queue.keys.inflight("nobody")], timeout=-1, max_jobs=10,
                  max_recoveries=1, dead_max_jobs=100, dead_max_age=3600)  # fmt: skip
    assert queue.client.exists(queue.keys.unwritten) == 0
    with pytest.raises(gq.TaskFailed, match="recovered 1 times"):
        r.get(timeout=1)


# A group's state lives until its last member ended, plus its TTL (issue 31, defect 7).


def test_a_member_that_ends_after_the_groups_ttl_still_completes_it(
    backend: Backend, run_app: Any
) -> None:
    app = make_app(backend)
    tries: list[int] = []

    @app.task(name="late")
    def late(x: int) -> int:
        tries.append(x)
        if len(tries) == 1:
            raise gq.Retry(after=1.5)  # ends past the group's result_ttl of 1 s
        return x

    @app.task(name="total")
    def total(values: list[int]) -> int:
        return sum(values)

    g = gq.group([late.s(4)]).then(total.s()).enqueue(result_ttl=1)
    run_app(app)
    assert g.get(timeout=15) == 4
    assert g.status() == "done"
    home = TaskQueue(backend.client(), backend.queue)
    ttl = home.client.pttl(home.keys.group(g.id))
    assert 0 < ttl <= 1000  # its TTL counted from its last member's end


def test_a_failed_group_gets_its_ttl_once_its_last_member_ended(backend: Backend) -> None:
    app = make_app(backend)
    fine, gone = _two_tasks(app)
    g = gq.group([gone.s(1), gone.s(2)]).enqueue(result_ttl=5)
    queue = TaskQueue(backend.client(), backend.queue)
    key = queue.keys.group(g.id)
    first, second = g.members[0][1], g.members[1][1]
    _crash_until_dead(queue, first, second)
    if queue.client.zscore(queue.keys.dead, second) is None:
        assert queue.client.pttl(key) > 5000  # a member is still to end: no TTL of 5 s yet
    assert g.status() == "failed"
    _crash_until_dead(queue, second)
    assert 0 < queue.client.pttl(key) <= 5000


@pytest.mark.real_redis
@pytest.mark.timeout(120)
def test_a_member_that_crashes_its_workers_fails_its_group(
    tmp_path: Any, redis_server: Any
) -> None:
    """Real gq-worker processes, each SIGKILLed by the member, until a custodian's
    recover.lua sends it to dead: the group's get() raises, naming it."""
    import subprocess
    import uuid

    from tests.cli_support import ROOT, env_for
    from tests.dead_member_app import doom, fine
    from tests.faults import FAST, LAUNCHER
    from tests.helpers import stop_process, wait_until

    queue = f"dm_{uuid.uuid4().hex[:8]}"
    producer = gq.App(url=redis_server.url, queue=queue)
    producer.task(name="doom")(doom.fn)
    producer.task(name="fine")(fine.fn)
    g = gq.group([producer.tasks["fine"].s(1), producer.tasks["doom"].s()]).enqueue()
    member = g.members[1][1]
    client = redis_server.client()
    args = [*LAUNCHER, "tests.dead_member_app:app", "--url", redis_server.url, *FAST,
            "--job-max-recoveries", "1"]  # fmt: skip

    def start(n: int) -> subprocess.Popen[bytes]:
        with open(tmp_path / f"worker-{n}.log", "wb") as log:
            return subprocess.Popen(args, cwd=ROOT, env=env_for(None, queue, redis_server.url),
                                    stdout=log, stderr=subprocess.STDOUT)  # fmt: skip

    workers = [start(0)]
    try:
        for n in range(1, 8):
            wait_until(lambda: workers[-1].poll() is not None
                       or client.zscore(f"{queue}:dead", member) is not None, 30)  # fmt: skip
            if client.zscore(f"{queue}:dead", member) is not None:
                break
            workers.append(start(n))
        with pytest.raises(gq.TaskFailed, match="recovered 1 times") as caught:
            g.get(timeout=30)
        assert caught.value.id == member
        assert g.status() == "failed"
    finally:
        for worker in workers:
            stop_process(worker)
