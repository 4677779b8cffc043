"""Queue-wide rate and concurrency limits over a sharded queue (docs/deployment.md, "One
queue over many masters"): the split arithmetic (pure), and real workers on a real
3-master Cluster under uneven load (most jobs on one shard)."""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

import pytest

import gq
from gq import shard_shares
from gq.errors import ConfigurationError
from gq.store.shard_limits import balance, queue_limits
from gq.store.shards import layout
from tests.cli_support import ADMIN, Worker, env_for, run
from tests.helpers import RedisServer, wait_until
from tests.test_shards import FAST, FAST_FLAGS, client, cluster, consume, name, stop
from tests.topologies import Cluster

__all__ = ["client", "cluster", "name"]  # the fixtures, shared with tests/test_shards.py


# -- the split (pure) ----------------------------------------------------------------------


def test_split_gives_each_shard_its_demand_and_spreads_the_rest() -> None:
    assert shard_shares.split(10, [0, 0, 0]) == [4, 3, 3]
    assert shard_shares.split(10, [100, 1, 0]) == [9, 1, 0]
    assert shard_shares.split(10, [100, 100, 0]) == [5, 5, 0]
    assert shard_shares.split(10, [3, 2, 1]) == [5, 3, 2]  # 4 left over, spread
    assert shard_shares.split(2, [5, 5, 5]) == [1, 1, 0]
    assert shard_shares.split(100, [1000, 0, 0], floor=1) == [98, 1, 1]
    for total, demands in [(7, [3, 9, 1, 0]), (1, [0, 0]), (50, [49, 49, 49])]:
        assert sum(shard_shares.split(total, demands)) == total


def test_raises_never_let_the_shards_hold_more_than_the_limit() -> None:
    # Shard 0 was just lowered from 5 to 1 but still holds 4: shard 1 may only grow by 1.
    assert shard_shares.raises(6, held=[4, 1], shares=[1, 1], targets=[1, 5]) == [1, 2]
    # Once shard 0 let its jobs go, the whole target fits.
    assert shard_shares.raises(6, held=[0, 1], shares=[1, 1], targets=[1, 5]) == [1, 5]
    # No room: nothing raised.
    assert shard_shares.raises(4, held=[4, 0], shares=[2, 2], targets=[0, 4]) == [2, 2]


# -- on the real Cluster ---------------------------------------------------------------------


def ids_on(plan: Any, shard: int, count: int, prefix: str) -> list[str]:
    """``count`` job ids that route to shard number ``shard`` of ``plan``."""
    wanted = plan.queues[shard]
    found = (f"{prefix}-{i}" for i in range(1_000_000) if plan.for_id(f"{prefix}-{i}") == wanted)
    return [next(found) for _ in range(count)]


def test_set_limits_writes_the_queue_wide_figures_and_an_even_first_split(
    client: Any, name: str
) -> None:
    gq.Producer(name, client=client, shards=3).perform(b"")
    queue = gq.Queue(name, client=client, shards=3)
    queue.set_limits(rate=(30, 1.0), concurrency=7)
    assert queue.limits() == {"rate": (30, 1.0), "concurrency": 7}
    assert [s.limits()["concurrency"] for s in queue.shards] == [3, 2, 2]
    assert [s.limits()["rate"] for s in queue.shards] == [(10, 1.0)] * 3
    with pytest.raises(ConfigurationError, match="at least 3 jobs per period"):
        queue.set_limits(rate=(2, 1.0))
    queue.set_limits(rate=None, concurrency=None)
    assert queue.limits() == {"rate": None, "concurrency": None}
    assert all(s.limits() == {"rate": None, "concurrency": None} for s in queue.shards)


def test_balance_moves_an_idle_shards_share_to_the_busy_one(client: Any, name: str) -> None:
    plan = layout(name, 3)
    producer = gq.Producer(name, client=client, shards=3)
    producer.perform_many([gq.Job(id=i, data=b"") for i in ids_on(plan, 0, 50, "busy")])
    queue = gq.Queue(name, client=client, shards=3)
    queue.set_limits(rate=(30, 1.0), concurrency=9)
    balance(client, plan, queue_limits(client, name))
    assert [s.limits()["concurrency"] for s in queue.shards] == [9, 0, 0]
    assert [s.limits()["rate"] for s in queue.shards] == [(28, 1.0), (1, 1.0), (1, 1.0)]


@pytest.mark.timeout(120)
def test_the_concurrency_limit_holds_over_shards_and_follows_the_load(
    cluster: Cluster, client: Any, name: str, redis_server: RedisServer, tmp_path: Path
) -> None:
    """Two real gq-workers, each able to run 20 at once; a queue-wide limit of 6; 120 jobs
    on shard 0, 6 on shard 1, none on shard 2. With the shares left even (2 each) at most
    4 could run at once: seeing 5 or 6 shows the idle shards' shares moved to shard 0."""
    plan = layout(name, 3)
    busy, few = ids_on(plan, 0, 120, "busy"), ids_on(plan, 1, 6, "few")
    producer = gq.Producer(name, client=client, shards=3)
    producer.perform_many([gq.Job(id=i, data=b"0.3") for i in busy + few])
    gq.Queue(name, client=client, shards=3).set_limits(concurrency=6)
    env = env_for(cluster.url, name, redis_server.url)
    record = redis_server.client()
    keys = [f"{name}:test:{what}" for what in ("done", "started", "running", "peak")]
    workers = [Worker(tmp_path, "tests.handlers:concurrent", *FAST_FLAGS, "--concurrency",
                      "20", env=env) for _ in range(2)]  # fmt: skip
    try:
        wait_until(lambda: record.llen(keys[0]) >= len(busy + few), 90, 0.1, "every job done")
        runs = collections.Counter(v.decode() for v in record.lrange(keys[0], 0, -1))
        peak = int(record.get(keys[3]) or 0)
    finally:
        for worker in workers:
            worker.stop()
        record.delete(*keys)
    assert set(runs) == set(busy + few) and max(runs.values()) == 1
    print(f"queue-wide concurrency 6 over 3 shards, 120 jobs on one: peak {peak} at once")
    assert 5 <= peak <= 6


@pytest.mark.timeout(120)
def test_the_rate_limit_holds_over_shards_and_follows_the_load(client: Any, name: str) -> None:
    """Two consumers; a queue-wide 40 jobs/s; 160 jobs on shard 0 and none elsewhere. The
    starts over the run stay within the stated bound (R per second over the span, plus
    one burst of R/10 and one job per shard), and shard 0 comes to hold all but the
    idle shards' one job per second each."""
    plan = layout(name, 3)
    jobs = ids_on(plan, 0, 160, "rate")
    queue = gq.Queue(name, client=client, shards=3)
    queue.set_limits(rate=(40, 1.0))
    starts: list[float] = []
    consumers = [gq.Consumer(name, client=client, shards={name: 3}, **FAST) for _ in range(2)]
    greenlets = [consume(c, lambda job: starts.append(time.monotonic())) for c in consumers]
    try:
        gq.Producer(name, client=client, shards=3).perform_many(
            [gq.Job(id=i, data=b"") for i in jobs])  # fmt: skip
        wait_until(lambda: queue.shards[0].limits()["rate"] == (38, 1.0), 20, 0.05,
                   "shard 0's share grown to 38/s")  # fmt: skip
        wait_until(lambda: len(starts) == len(jobs), 60, 0.05, "every job started")
    finally:
        for consumer, greenlet in zip(consumers, greenlets):
            stop(consumer, greenlet)
    span = starts[-1] - starts[0]
    bound = 40 * span + 4 + 3  # R x span + a burst (R/10) + 1 per shard
    print(f"queue-wide rate 40/s over 3 shards, 160 jobs on one: {len(starts)} in "
          f"{span:.2f}s ({(len(starts) - 1) / span:.1f}/s), bound {bound:.0f}")
    assert len(starts) <= bound


def test_gq_limit_sets_and_shows_the_queue_wide_limits(cluster: Cluster, client: Any,
                                                      name: str) -> None:  # fmt: skip
    gq.Producer(name, client=client, shards=3).perform(b"")
    env = env_for(cluster.url, None)
    limit = run(ADMIN, "limit", "--queue", name, "--concurrency", "5", "--rate", "30/1", env=env)
    assert limit.returncode == 0, limit.stderr
    assert "30 jobs per 1s" in limit.stdout and "5 (" in limit.stdout, limit.stdout
    assert gq.Queue(name, client=client, shards=3).limits() == {"rate": (30, 1.0),
                                                                 "concurrency": 5}  # fmt: skip
