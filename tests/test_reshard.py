"""Resharding a sharded queue N -> M while producers and a real gq-worker run, on a real
3-master Cluster (docs/deployment.md, "One queue over many masters": "Resharding")."""

from __future__ import annotations

import collections
from pathlib import Path
from typing import Any

import gevent
import pytest

import gq
from gq.cli.common import CliError
from gq.cli.worker_args import worker_shards
from gq.errors import ConfigurationError
from gq.store.reshard import leftovers, retire, serving
from gq.store.shards import layout
from tests.cli_support import ADMIN, Worker, env_for, run
from tests.helpers import RedisServer, wait_until
from tests.test_shards import FAST, FAST_FLAGS, client, cluster, consume, name
from tests.topologies import Cluster

__all__ = ["client", "cluster", "name"]  # the fixtures, shared with tests/test_shards.py


def test_a_job_is_found_by_its_id_on_either_layout(cluster: Cluster, client: Any,
                                                    name: str) -> None:  # fmt: skip
    producer = gq.Producer(name, client=client, shards=3)
    old = producer.perform(b"old")
    queue = gq.Queue(name, client=client, shards=3)
    queue.reshard(6)
    with pytest.raises(ConfigurationError, match="still draining"):
        queue.reshard(8)
    new = gq.Producer(name, client=client, shards=6).perform(b"new")
    # A producer whose code still says 3 follows Redis (at its next look), not refused.
    assert gq.Producer(name, client=client, shards=3)._route([new])[0][0].keys.name == \
        layout(name, 6).for_id(new)  # fmt: skip
    queue = gq.Queue(name, client=client, shards=6)
    assert queue.shard_of(old).name == layout(name, 3).for_id(old)
    assert queue.shard_of(new).name == layout(name, 6).for_id(new)
    env = env_for(cluster.url, None)
    for job_id in (old, new):
        shown = run(ADMIN, "job", job_id, "--queue", name, env=env)
        assert shown.returncode == 0 and "ready" in shown.stdout, shown.stdout + shown.stderr
    # gq-worker given an app that still says 3 serves what Redis says; 4 was never had.
    assert worker_shards(cluster.url, name, gq.App(client=client, shards={name: 3})) == \
        {name: 6}  # fmt: skip
    with pytest.raises(CliError, match="the app says 4 shards, Redis says 6"):
        worker_shards(cluster.url, name, gq.App(client=client, shards={name: 4}))
    listed = run(ADMIN, "shards", "--queue", name, env=env)
    assert "shards     6" in listed.stdout and "draining   3" in listed.stdout, listed.stdout
    assert queue.cancel(old) == 1
    assert retire(client, name, grace=0)  # the old shards are empty once it is gone
    assert serving(client, name, 6).previous is None
    with pytest.raises(ConfigurationError, match="has 6 shards in Redis"):
        gq.Producer(name, client=client, shards=4).perform(b"")


@pytest.mark.timeout(150)
def test_resharding_3_to_6_under_load_loses_and_duplicates_nothing(
    cluster: Cluster, client: Any, name: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    """A producer writes all along; a real gq-worker serves the queue; `gq shards
    --reshard 6` mid-run. Every job is run once, the producer moves to the new layout,
    the worker serves both until the old shards drain, then retires the old layout."""
    producer = gq.Producer(name, client=client, shards=3)
    produced: list[str] = []
    stop_producing = gevent.event.Event()

    def produce() -> None:
        while not stop_producing.is_set():
            produced.append(producer.perform(b"0.01"))
            gevent.sleep(0.004)

    env = env_for(cluster.url, name, redis_server.url)
    record = redis_server.client()
    done_key = f"{name}:test:done"
    writer = gevent.spawn(produce)
    worker = Worker(tmp_path, "tests.handlers:record", *FAST_FLAGS, "--concurrency", "10",
                    env=env)  # fmt: skip
    try:
        wait_until(lambda: record.llen(done_key) >= 200, 60, 0.05, "200 jobs done")
        resharded = run(ADMIN, "shards", "--queue", name, "--reshard", "6", env=env)
        assert resharded.returncode == 0, resharded.stderr
        at_reshard = len(produced)
        new_only = set(layout(name, 6).queues) - set(layout(name, 3).queues)
        wait_until(lambda: len(produced) >= at_reshard + 500, 60, 0.05, "500 more enqueued")
        stop_producing.set()
        writer.get(timeout=10)
        assert producer._plan is not None and producer._plan.queues == layout(name, 6).queues
        wait_until(lambda: set(produced) <= set(_done(record, done_key)), 60, 0.1, "all done")
        wait_until(lambda: serving(client, name, 6).previous is None, 60, 0.2, "retired")
        assert any(shard in worker.output for shard in new_only), worker.output
    finally:
        stop_producing.set()
        worker.stop()
        runs = collections.Counter(_done(record, done_key))
        record.delete(done_key, f"{name}:test:started")
    old_only = tuple(set(layout(name, 3).queues) - set(layout(name, 6).queues))
    print(f"reshard 3 -> 6 under load: {len(produced)} jobs ({at_reshard} before), "
          f"{len(set(produced) - set(runs))} lost, {sum(n - 1 for n in runs.values())} "
          "run twice")
    assert set(runs) == set(produced) and max(runs.values()) == 1  # 0 lost, 0 twice
    assert not any(leftovers(client, old_only).values())  # the old shards are empty


def _done(client: Any, key: str) -> list[str]:
    return [value.decode() for value in client.lrange(key, 0, -1)]


def test_a_stop_asked_while_restarting_over_a_new_layout_is_kept(client: Any,
                                                                 name: str) -> None:  # fmt: skip
    consumer = gq.Consumer(name, client=client, shards={name: 3}, **FAST)
    greenlet = consume(consumer, lambda job: None)
    wait_until(lambda: consumer._poller is not None, 10)
    consumer._relayout()  # what the balancer calls when the layout changed
    consumer.stop()  # SIGTERM meanwhile: a stop, not a restart
    greenlet.join(timeout=20)
    assert greenlet.dead and greenlet.exception is None
