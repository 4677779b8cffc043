"""The routing of sharded queues (gq/store/shards.py), pure: the function other producers
(go/gqtask, curlyq programs) must reproduce, the names chosen by slot, the checks. The
Redis side runs on a real Cluster in tests/test_shards.py."""

from __future__ import annotations

import zlib
from typing import Any

import pytest
from redis.crc import REDIS_CLUSTER_HASH_SLOTS, key_slot

import gq
from gq.errors import ConfigurationError
from gq.store.shards import MAX_SHARDS, layout, route_key, shard_index, shard_name
from gq.tasks.sharding import check_app_shards, mint
from gq.worker.arguments import expand_shards, periodic_on_shards
from gq.worker.poller import Source

UUID = "01890a5d-ac96-774b-bcce-b302099a8057"


def test_the_routing_function_is_crc32_of_the_key_modulo_the_shards() -> None:
    # Fixed vectors, for another language's implementation to check itself against.
    assert shard_index("job-1", 8) == zlib.crc32(b"job-1") % 8 == 7
    assert shard_index("invoice-42", 3) == 1
    assert shard_index("émile", 5) == zlib.crc32("émile".encode()) % 5
    assert [shard_index(str(i), 1) for i in range(20)] == [0] * 20


def test_the_vectors_go_gqtask_checks_too() -> None:
    """go/gqtask/shards_test.go pins the same figures: the two sides agree."""
    assert shard_index("émile", 5) == 3 and shard_index(UUID, 8) == 5
    assert layout("emails", 3).queues == ("{emails~0~2}", "{emails~1~0}", "{emails~2~2}")
    assert layout("emails", 8).queues == (
        "{emails~0~2}", "{emails~1~43}", "{emails~2~43}", "{emails~3~2}", "{emails~4~42}",
        "{emails~5~2}", "{emails~6~2}", "{emails~7~42}",
    )  # fmt: skip
    assert layout("emails", 8).for_id(f"{UUID}.3") == "{emails~5~2}"


def test_the_group_and_lock_vectors_go_gqtask_checks_too() -> None:
    """go/gqtask/shards_test.go routes tasks with these groups and lock to these shards,
    minting ids that route there too: gq's keys are the group and the lock's name."""
    from gq.tasks.options import TaskOptions, lock_name

    plan = layout("emails", 8)
    assert [plan.for_key(g) for g in ("tenant:a", "tenant:b", "émile-group", "acme")] == [
        "{emails~5~2}", "{emails~7~42}", "{emails~3~2}", "{emails~6~2}",
    ]  # fmt: skip
    # gqtask.UniqueLock("deliver", "order-1"): the lock of unique_key="order-1".
    lock = lock_name("deliver", TaskOptions(unique_for=60, unique_key="order-1"), (), {})
    assert lock == "deliver:key:order-1" and plan.for_key(lock) == "{emails~2~43}"
    assert plan.for_id("job-1") == "{emails~7~42}"  # a given id that a group overrides


def test_a_workflow_job_routes_by_its_workflows_id() -> None:
    assert route_key(f"{UUID}.0") == UUID
    assert route_key(f"{UUID}.then") == UUID
    assert route_key(UUID) == UUID
    # Other ids route whole, dots included.
    assert route_key("invoice.42") == "invoice.42"
    assert route_key("x" * 36 + ".1") == "x" * 36 + ".1"
    plan = layout("emails", 8)
    assert {plan.for_id(f"{UUID}.{i}") for i in range(50)} == {plan.for_id(UUID)}


@pytest.mark.parametrize("shards", [1, 3, 8, 16])
def test_shard_i_has_its_slot_in_the_ith_of_n_equal_ranges(shards: int) -> None:
    plan = layout("emails", shards)
    assert len(set(plan.queues)) == shards
    for i, name in enumerate(plan.queues):
        slot = key_slot(f"{name}:data".encode())  # every key of the shard: its tag's slot
        assert i * REDIS_CLUSTER_HASH_SLOTS // shards <= slot
        assert slot < (i + 1) * REDIS_CLUSTER_HASH_SLOTS // shards
        assert name.startswith(f"{{emails~{i}~") and name.endswith("}")
    assert plan.queues[-1] == shard_name("emails", shards - 1, shards)


@pytest.mark.parametrize("bad", [0, -1, MAX_SHARDS + 1, True, 2.0, "8"])
def test_a_bad_count_of_shards_is_refused_naming_it(bad: Any) -> None:
    with pytest.raises(ConfigurationError, match="shards of queue 'emails'"):
        gq.Producer("emails", url="redis://127.0.0.1:1/0", shards=bad)
    with pytest.raises(ConfigurationError, match="shards of queue 'emails'"):
        gq.App(url="redis://127.0.0.1:1/0", shards={"emails": bad})


def test_a_sharded_name_with_braces_is_refused_with_the_fix() -> None:
    with pytest.raises(ConfigurationError, match="name it 'emails'"):
        layout("{emails}", 3)
    with pytest.raises(ConfigurationError, match="dict of queue name"):
        check_app_shards([("emails", 3)])  # type: ignore[arg-type]


def test_a_minted_id_routes_where_its_group_does() -> None:
    plan = layout("emails", 8)
    for group in ("tenant:a", "tenant:b", "tenant:c"):
        job_id = mint(plan, group)
        assert plan.for_id(job_id) == plan.for_key(group)
        assert len(job_id) == 36  # still a UUIDv7: its enqueue time is read from it


def test_the_spread_by_id_is_even() -> None:
    plan = layout("emails", 3)
    counts = {name: 0 for name in plan.queues}
    for i in range(30_000):
        counts[plan.for_id(f"job-{i}")] += 1
    assert all(9_000 <= n <= 11_000 for n in counts.values()), counts


def test_a_consumer_serves_each_shard_with_the_queues_weight() -> None:
    served, families = expand_shards({"critical": 6, "emails": 3}, {"emails": 4})
    shards = layout("emails", 4).queues
    assert served == {"critical": 6, **dict.fromkeys(shards, 3)}
    assert families == dict.fromkeys(shards, "emails")
    names = [f"p{i}" for i in range(12)]
    given = [gq.Periodic(n, every=60, data=b"", queue="emails") for n in names]
    entries = periodic_on_shards(given, families, {})
    # One cursor per schedule, on the shard its name routes to: each occurrence once.
    assert [e.queue for e in entries] == [layout("emails", 4).for_key(n) for n in names]
    assert len({e.queue for e in entries}) > 1  # the schedules spread over the shards


def test_a_sharded_queues_turn_goes_to_any_of_its_ready_shards() -> None:
    from gq.worker.poller import Poller

    poller: Any = object.__new__(Poller)
    poller._weighted = False
    shards = [Source(queue=_Named(n), family="emails") for n in layout("emails", 4).queues]
    drawn = {poller._draw(shards).name for _ in range(400)}
    assert drawn == set(layout("emails", 4).queues)  # not the first shard every time
    plain = Source(queue=_Named("{critical}"))
    assert {poller._draw([plain, *shards]).name for _ in range(50)} == {"{critical}"}


class _Named:
    def __init__(self, name: str) -> None:
        self.keys = self
        self.name = name


def test_consumers_of_a_sharded_queue_are_counted_once_with_their_jobs_summed() -> None:
    from gq.sharded import merged_consumers

    def entry(consumer: str, state: str, in_flight: int, at: float) -> dict[str, Any]:
        return {"id": consumer, "state": state, "in_flight": in_flight, "heartbeat_at": at}

    merged = merged_consumers([
        [entry("a", "alive", 3, 10.0), entry("b", "dead", 1, 1.0)],
        [entry("a", "alive", 4, 10.0), entry("b", "silent", 2, 5.0)],
    ])  # fmt: skip
    assert [(e["id"], e["state"], e["in_flight"]) for e in merged] == [
        ("b", "silent", 3), ("a", "alive", 7),
    ]  # fmt: skip
