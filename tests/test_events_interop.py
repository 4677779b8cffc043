"""Job events on a queue shared with curlyq (Go): curlyq's consumer still runs gq's jobs
with the stream on, and gq's worker announces Go's jobs with the attempts Go wrote."""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

import gq
from tests.helpers import RedisServer, wait_until
from tests.interop.fixtures import curlyq, direct, queue, server  # noqa: F401 - fixtures
from tests.interop.golang import Curlyq
from tests.interop.inprocess import consuming
from tests.test_interop import idle

pytestmark = pytest.mark.timeout(120)


def test_a_curlyq_consumer_runs_gq_jobs_with_events_on(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis, tmp_path: Path
) -> None:
    q = gq.Queue(queue, url=server.url)
    q.enable_events()
    producer = gq.Producer(queue, url=server.url)
    ids = producer.perform_many([b"job-%d" % i for i in range(20)])
    go = curlyq.consumer(tmp_path, queue, "-scheduler-poll", "100ms")
    try:
        wait_until(lambda: len(go.records()) >= len(ids), 20, message="Go ran every job")
    finally:
        assert go.stop() == 0, go.log
    assert sorted(r["id"] for r in go.records()) == sorted(ids)
    assert idle(direct, queue)
    # curlyq's own scripts write no event: only gq's enqueues are in the stream.
    assert [(e.event, e.job_id) for e in q.events(since="0")] == [("enqueued", i) for i in ids]
    producer.close()


def test_gq_announces_go_jobs_with_the_attempts_go_wrote(
    curlyq: Curlyq, server: RedisServer, queue: str, direct: redis.Redis
) -> None:
    q = gq.Queue(queue, url=server.url)
    q.enable_events()
    made = curlyq.produce(queue, 3, "go")
    seen: dict[str, gq.Job] = {}
    with consuming(queue, server.url, lambda job: seen.setdefault(job.id, job)):
        wait_until(lambda: sum(e.event == "done" for e in q.events(since="0")) == 3, 15)
    events = list(q.events(since="0"))
    assert sorted(e.job_id for e in events if e.event == "started") == sorted(made)
    assert {(e.task, e.attempts) for e in events} == {("", 0)}
