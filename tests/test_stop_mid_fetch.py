"""A graceful stop whose kill of the poller lands in the middle of a fetch.

The stop kills the poller only while it waits (``Poller.waiting``), but gevent delivers a
kill on a later turn of the hub: a poller woken in between (room freed by a finished job)
is by then inside its next fetch. Redis has moved that fetch's jobs in flight for this
consumer and the reply is never read. The stop must give them back, as it gives back the
buffer: otherwise they wait in flight for a custodian (60 s by default), and the consumer
cannot deregister (tests/test_cli_processes.py's graceful SIGTERM saw 2 jobs "neither
done nor ready" 1 run in 4 under load)."""

from __future__ import annotations

from typing import Any

import gevent
import pytest

import gq
from tests import queue_state as state
from tests.helpers import Backend, wait_until


@pytest.mark.timeout(30)
def test_a_kill_that_lands_mid_fetch_at_a_stop_loses_no_job_to_in_flight(
    backend: Backend,
) -> None:
    ids = gq.Producer(backend.queue, client=backend.client()).perform_many([b""] * 20)
    started: list[str] = []
    release = gevent.event.Event()

    def handler(job: gq.Job) -> None:
        started.append(job.id)
        release.wait()

    consumer = gq.Consumer(
        backend.queue, client=backend.client(), processor_concurrency=2, poller_buffer_size=2
    )
    queue = consumer._queue
    real_fetch = queue.fetch
    cut: list[str] = []

    def fetch(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)  # the jobs are in flight, in Redis
        if started and not cut:
            cut.extend(job_id for job_id, _ in fetched)
            # The race, made certain: the stop found the poller waiting, and its kill
            # arrives now, before the reply is read.
            consumer._poller.waiting = True  # type: ignore[union-attr]
            gevent.spawn(consumer.stop)
            gevent.sleep(5)
        return fetched

    queue.fetch = fetch  # type: ignore[method-assign]
    runner = gevent.spawn(consumer.run, handler)
    wait_until(lambda: len(started) == 2)
    release.set()  # room: the poller fetches again, and the stop comes
    runner.join(20)
    assert runner.successful(), runner.exception
    assert cut, "the fetch was not cut short"
    c = backend.direct()
    assert state.inflight(c, backend.queue, consumer.id) == set()
    left = set(state.active(c, backend.queue))
    assert set(cut) <= left  # given back, ready for the next consumer now
    assert {i for i in ids if state.message(c, backend.queue, i) is not None} == left
    assert consumer.id not in str(c.zrange(f"{backend.queue}:consumers", 0, -1))
