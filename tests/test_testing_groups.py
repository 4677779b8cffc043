"""``gq.testing.worker``'s ``drain()`` with groups (issue 32): fair turns between
groups as a worker's fetch gives them, their limits, and ``current_job()`` filled as
under a worker (queue, group, attempt, id)."""

from __future__ import annotations

from typing import Any

import pytest

import gq
from gq import testing
from gq.tasks.dispatch import current_job


def _tenant_app(url: str) -> tuple[gq.App, list[Any], Any]:
    app = gq.App(url=url, queue="hooks")
    seen: list[Any] = []

    @app.task(name="deliver", retries=2)
    def deliver(tenant: str, fail_once: bool = False) -> None:
        job = current_job()
        assert job is not None
        seen.append((tenant, job.queue, job.group, job.attempt, job.id))
        if fail_once and job.attempt == 0:
            raise ValueError("first try fails")

    return app, seen, deliver


@pytest.mark.parametrize("concurrency", [5, 100])
def test_a_small_group_is_not_served_after_a_big_ones_backlog(concurrency: int) -> None:
    app, seen, deliver = _tenant_app(f"fakeredis://turns-{concurrency}")
    with testing.worker(app, processor_concurrency=concurrency) as worker:
        for _ in range(40):
            deliver.using(group="big").enqueue("big")
        deliver.using(group="small").enqueue("small")
        worker.drain()
    tenants = [entry[0] for entry in seen]
    assert len(tenants) == 41 and tenants.index("small") <= 1


def test_current_job_says_queue_group_attempt_and_id() -> None:
    app, seen, deliver = _tenant_app("fakeredis://fields")
    with testing.worker(app) as worker:
        r = deliver.using(group="acme").enqueue("acme", fail_once=True)
        outcomes = worker.drain()
    assert [(o.status, o.runs) for o in outcomes] == [("done", 2)]
    assert seen == [("acme", "hooks", "acme", 0, r.id), ("acme", "hooks", "acme", 1, r.id)]


def test_a_group_at_its_rate_limit_waits_as_under_a_worker() -> None:
    app, seen, deliver = _tenant_app("fakeredis://limits")
    with testing.worker(app) as worker:
        gq.Queue("hooks", client=worker.client).set_group_limits(rate=(1, 3600), group="big")
        for _ in range(3):
            deliver.using(group="big").enqueue("big")
        deliver.using(group="small").enqueue("small")
        worker.drain()
        left = gq.Queue("hooks", client=worker.client).groups()
    assert sorted(entry[0] for entry in seen) == ["big", "small"]
    # The two others wait for the next period, in their group's line.
    assert [(g["group"], g["waiting"]) for g in left["busiest"]] == [("big", 2)]


def test_eager_current_job_says_queue_and_group() -> None:
    app, seen, deliver = _tenant_app("fakeredis://eager-fields")
    with testing.eager(app):
        deliver.using(group="acme").enqueue("acme")
    assert seen[0][:4] == ("acme", "hooks", "acme", 0)
