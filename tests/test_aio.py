"""gq.aio.Producer under plain asyncio, in a process that gevent never patched.

The cases live in tests/aio_cases.py and run there with ``python -m tests.aio_cases``
(one process per backend, every case in it); each case asserts on the Redis state it reads
back, and this module turns each case's outcome into a test. Then, on a real Redis, a gq
Consumer runs what the asyncio producer enqueued, and on a real Redis Cluster the asyncio
cluster client is used.
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections.abc import Iterator

import pytest

import gq
from tests import aio_cases
from tests.helpers import RedisServer, delete_keys, wait_until
from tests.interop.inprocess import consuming

ROOT = aio_cases.__file__.rsplit("/tests/", 1)[0]
# fakeredis answers inside the process: whether its client yields to the loop on the way
# depends on the interpreter's asyncio (3.11's wait_for makes a task, 3.9's and 3.13's
# do not), so "waits for Redis without blocking the loop" means something on a server only.
REAL_ONLY = ("perform_gives_the_event_loop_a_turn",)
# The cases for every backend; the others need a particular server (below).
CASES = [
    name
    for name in aio_cases.CASES
    if name not in ("cluster", "topology_url", "enqueue_for_a_gq_worker", *REAL_ONLY)
]


def run_cases(url: str, queue: str, *names: str) -> dict[str, str]:
    """Run cases in a plain ``python`` (no gevent, no conftest); their outcomes by name."""
    proc = subprocess.run(
        [sys.executable, "-m", "tests.aio_cases", url, queue, *names],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    try:
        outcomes: dict[str, str] = json.loads(proc.stdout)
    except ValueError:
        pytest.fail(f"tests.aio_cases gave no result (exit {proc.returncode}):\n{proc.stderr}")
    assert (proc.returncode == 0) == all(v == "ok" for v in outcomes.values()), proc.stderr
    return outcomes


@pytest.fixture(scope="module", params=["fake", "real"])
def outcomes(request: pytest.FixtureRequest) -> Iterator[dict[str, str]]:
    queue = f"aio-{uuid.uuid4().hex[:8]}"
    if request.param == "fake":
        yield run_cases(f"fakeredis://{queue}", queue, *CASES)
        return
    server: RedisServer = request.getfixturevalue("redis_server")
    try:
        yield run_cases(server.url, queue, *CASES)
    finally:
        delete_keys(server.client(), f"{queue}*")


@pytest.mark.parametrize("name", CASES)
def test_aio_producer(outcomes: dict[str, str], name: str) -> None:
    assert outcomes[name] == "ok", outcomes[name]


@pytest.mark.parametrize("name", REAL_ONLY)
def test_aio_producer_on_a_server(redis_server: RedisServer, name: str) -> None:
    queue = f"aio-{uuid.uuid4().hex[:8]}"
    try:
        assert run_cases(redis_server.url, queue, name) == {name: "ok"}
    finally:
        delete_keys(redis_server.client(), f"{queue}*")


def test_import_gq_is_enough_and_brings_no_gevent() -> None:
    code = "import gq, sys; gq.aio.Producer; print('gevent' in sys.modules)"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert (proc.returncode, proc.stdout.strip()) == (0, "False"), proc.stderr


def test_jobs_from_the_aio_producer_run_on_a_gq_consumer(redis_server: RedisServer) -> None:
    queue = f"aio-{uuid.uuid4().hex[:8]}"
    assert run_cases(redis_server.url, queue, "enqueue_for_a_gq_worker") == {
        "enqueue_for_a_gq_worker": "ok"
    }
    seen: dict[str, gq.Job] = {}
    try:
        with consuming(aio_cases.queue_of(queue, "enqueue_for_a_gq_worker"), redis_server.url,
                       lambda job: seen.setdefault(job.id, job)):  # fmt: skip
            wait_until(lambda: len(seen) == 5, 15, message="the five jobs run")
    finally:
        delete_keys(redis_server.client(), f"{queue}*")
    assert {job.id: (job.data, job.attempt) for job in seen.values()} == {
        "now": (b"1", 0), "many-a": (b"2", 0), "many-b": (b"", 0),
        "later": (b"3", 0), "past": (b"4", 0),
    }  # fmt: skip


@pytest.mark.timeout(90)
def test_aio_producer_on_a_real_redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.queue_sides import BothSides
    from tests.topologies import start_cluster

    cluster = start_cluster(tmp_path_factory.mktemp("aio-cluster"))
    try:
        queue = "{aio-" + uuid.uuid4().hex[:8] + "}"
        hosts = ",".join(f"127.0.0.1:{node.port}" for node in cluster.nodes)
        url = f"redis+cluster://{hosts}/"
        assert run_cases(url, queue, "cluster") == {"cluster": "ok"}
        client = cluster.client()
        assert BothSides(client, queue).counts() == {
            "ready": 1501, "scheduled": 1, "due": 0, "dead": 0,
        }  # fmt: skip
        other = "{aio-" + uuid.uuid4().hex[:8] + "}"
        assert run_cases(url, other, "topology_url") == {"topology_url": "ok"}
        assert BothSides(client, other).counts()["ready"] == 1201
        client.close()
    finally:
        cluster.stop()


@pytest.mark.timeout(90)
def test_aio_producer_on_a_sentinel_url(tmp_path_factory: pytest.TempPathFactory) -> None:
    from tests.queue_sides import BothSides
    from tests.topologies import start_sentinel

    setup = start_sentinel(tmp_path_factory.mktemp("aio-sentinel"))
    try:
        queue = f"aio-{uuid.uuid4().hex[:8]}"
        assert run_cases(setup.url, queue, "topology_url") == {"topology_url": "ok"}
        client = setup.master.client()
        name = aio_cases.queue_of(queue, "topology_url")
        assert BothSides(client, name).counts()["ready"] == 1201  # on the master
        client.close()
    finally:
        setup.stop()
