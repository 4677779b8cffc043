"""A worker's name and lease (issue 32, item 1): each consumer is judged by the lease it
states, a consumer that states none by curlyq's; a consumer started under a crashed
predecessor's name takes its jobs back at once; a live namesake is refused (or, for a
default name, the next index is taken)."""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any

import gevent
import psutil
import pytest

import gq
from gq.store.jobs import RedisQueue
from gq.worker import identity
from gq.worker.identity import Claim, Name, NameInUse
from tests.helpers import Backend

pytestmark = pytest.mark.timeout(60)

PREDECESSOR = "predecessor"


def _registered(backend: Backend, consumer: str, silent_for: float, **facts: Any) -> RedisQueue:
    """``consumer`` registered ``silent_for`` s ago (server time) with one job in flight,
    and its facts (none when ``facts`` is empty)."""
    client = backend.client()
    rq = RedisQueue(client, backend.queue)
    now = rq.register("someone")  # the server's time
    client.zrem(rq.keys.consumers, rq.keys.inflight("someone"))
    client.zadd(rq.keys.consumers, {rq.keys.inflight(consumer): now - silent_for})
    client.sadd(rq.keys.inflight(consumer), f"job-of-{consumer}")
    client.hset(
        rq.keys.data, f"job-of-{consumer}", gq.job.encode(gq.Job(f"job-of-{consumer}", b""))
    )
    if facts:
        client.set(rq.keys.facts(consumer), json.dumps({"id": consumer, **facts}))
    return rq


def _custodian(backend: Backend, **options: Any) -> gq.Consumer:
    return gq.Consumer(backend.queue, client=backend.client(), **options)


def test_the_defaults_state_a_lease_of_about_30_s() -> None:
    opts = gq.ConsumerOptions()
    lease = opts.heartbeat_poll_interval + opts.custodian_consumer_timeout
    assert lease + opts.custodian_poll_interval <= 30  # recovered within about 30 s


def test_a_consumer_is_recovered_once_its_own_stated_lease_ended(backend: Backend) -> None:
    rq = _registered(backend, "short", silent_for=30, lease_seconds=25)
    assert _custodian(backend).custodian_step() is False
    assert rq.client.lrange(rq.keys.active, 0, -1) == [b"job-of-short"]


def test_a_stated_lease_longer_than_the_custodians_own_is_waited_for(backend: Backend) -> None:
    rq = _registered(backend, "long", silent_for=30, lease_seconds=300)
    _custodian(backend).custodian_step()
    assert rq.client.lrange(rq.keys.active, 0, -1) == []
    assert rq.client.smembers(rq.keys.inflight("long")) == {b"job-of-long"}


@pytest.mark.parametrize("silent_for, recovered", [(60, False), (121, True)])
def test_a_consumer_stating_no_lease_gets_curlyqs(
    backend: Backend, silent_for: float, recovered: bool
) -> None:
    """A curlyq consumer beats once a minute: gq's 25 s lease must not take it for dead."""
    rq = _registered(backend, "go", silent_for=silent_for)
    _custodian(backend).custodian_step()
    assert rq.client.lrange(rq.keys.active, 0, -1) == ([b"job-of-go"] if recovered else [])


# ----------------------------------------------------------------------- names, in process


def _gone_pid() -> int:
    proc = subprocess.Popen(["true"])
    proc.wait()
    return proc.pid


def _claim(backend: Backend, recovered: list[str]) -> Claim:
    rq = RedisQueue(backend.client(), backend.queue)

    def recover(queue: RedisQueue, keys: list[str]) -> int:
        recovered.extend(keys)
        return queue.recover("me", keys, timeout=0, max_jobs=50, max_recoveries=3,
                             dead_max_jobs=10, dead_max_age=100.0)  # fmt: skip

    def announce(name: str) -> None:
        rq.register("me")
        rq.client.set(rq.keys.facts("me"), json.dumps({"name": name, **claim.process}))

    claim = Claim({backend.queue: rq}, "me", announce, recover, "test")
    return claim


def _here(**facts: Any) -> dict[str, Any]:
    """Facts of a process on this machine."""
    return {"machine": identity.machine_id(), "host": "here", **facts}


def test_a_namesake_whose_process_is_gone_has_its_jobs_taken_back(backend: Backend) -> None:
    rq = _registered(backend, PREDECESSOR, silent_for=1, lease_seconds=120, name="web",
                     **_here(pid=_gone_pid(), process_started=1.0))  # fmt: skip
    recovered: list[str] = []
    assert _claim(backend, recovered).claim(Name("web")) == "web"
    assert set(recovered) == {rq.keys.inflight(PREDECESSOR)}
    assert rq.client.lrange(rq.keys.active, 0, -1) == [f"job-of-{PREDECESSOR}".encode()]
    assert rq.client.zscore(rq.keys.consumers, rq.keys.inflight(PREDECESSOR)) is None


def test_a_namesake_whose_pid_belongs_to_a_later_process_is_gone(backend: Backend) -> None:
    """A container's worker restarted as pid 1 again: the pid is alive, but it is ours."""
    started = psutil.Process().create_time() - 100  # the pid's earlier owner
    _registered(backend, PREDECESSOR, silent_for=1, name="web",
                **_here(pid=os.getpid(), process_started=started))  # fmt: skip
    recovered: list[str] = []
    assert _claim(backend, recovered).claim(Name("web")) == "web"
    assert set(recovered) == {f"{backend.queue}:inflight:{PREDECESSOR}"}


def test_a_live_namesake_refuses_an_explicit_name(backend: Backend) -> None:
    me = psutil.Process()
    rq = _registered(backend, PREDECESSOR, silent_for=1, name="web",
                     **_here(pid=me.pid, process_started=me.create_time() - 0.0))  # fmt: skip
    claim = _claim(backend, [])
    claim.process["process_started"] += 1  # the namesake started first
    with pytest.raises(NameInUse) as caught:
        claim.claim(Name("web"))
    assert caught.value.name == "web" and caught.value.holder["id"] == PREDECESSOR
    assert rq.client.smembers(rq.keys.inflight(PREDECESSOR)) == {f"job-of-{PREDECESSOR}".encode()}


def test_a_default_name_moves_on_to_the_next_free_index(backend: Backend) -> None:
    me = psutil.Process()
    _registered(backend, PREDECESSOR, silent_for=1, name="host-0",
                **_here(pid=me.pid, process_started=me.create_time()))  # fmt: skip
    claim = _claim(backend, [])
    claim.process["process_started"] += 1
    assert claim.claim(Name("host", 0, moves=True)) == "host-1"


def test_a_namesake_on_another_machine_is_gone_once_its_heartbeat_stands_still(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(identity, "WATCH_SLACK", 0.2)
    monkeypatch.setattr(identity, "WATCH_STEP", 0.05)
    _registered(backend, PREDECESSOR, silent_for=1, name="web", machine="elsewhere",
                heartbeat_interval=0.3, pid=1, process_started=1.0)  # fmt: skip
    recovered: list[str] = []
    assert _claim(backend, recovered).claim(Name("web")) == "web"
    assert set(recovered) == {f"{backend.queue}:inflight:{PREDECESSOR}"}


def test_a_namesake_on_another_machine_that_beats_keeps_its_name(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(identity, "WATCH_STEP", 0.05)
    rq = _registered(backend, PREDECESSOR, silent_for=1, name="web", machine="elsewhere",
                     heartbeat_interval=5.0, pid=1, process_started=1.0)  # fmt: skip
    beating = gevent.spawn_later(0.2, rq.register, PREDECESSOR)
    with pytest.raises(NameInUse):
        _claim(backend, []).claim(Name("web"))
    beating.join()


# ----------------------------------------------------------------------- what operators see


def test_a_consumer_that_missed_its_heartbeats_is_silent_not_alive(backend: Backend) -> None:
    """Its facts are fresh (a native thread may write them), but it beats every 5 s and has
    not for 10: ``gq stats`` and ``gq consumers`` say so."""
    rq = _registered(backend, "quiet", silent_for=10, lease_seconds=25, heartbeat_interval=5,
                     report_interval=5)  # fmt: skip
    rq.client.set(rq.keys.facts("quiet"), json.dumps({
        "id": "quiet", "lease_seconds": 25, "heartbeat_interval": 5, "report_interval": 5,
        "updated_at": rq.register("x") - 1}))  # fmt: skip
    queue = gq.Queue(backend.queue, client=backend.client())
    states = {entry["id"]: entry["state"] for entry in queue.consumers()}
    assert states == {"quiet": "silent", "x": "alive"}
    stats = queue.stats()
    counts = [stats[f"consumers_{state}"] for state in ("alive", "silent", "dead")]
    assert counts == [2, 1, 0]  # alive counts every consumer within its lease


def test_recover_consumer_refuses_a_live_one_and_hands_back_a_dead_ones_jobs(
    backend: Backend,
) -> None:
    rq = _registered(backend, "gone", silent_for=3, lease_seconds=25, heartbeat_interval=5)
    queue = gq.Queue(backend.queue, client=backend.client())
    with pytest.raises(gq.errors.ConsumerAlive):
        queue.recover_consumer("gone")  # beats every 5 s, last 3 s ago: alive
    assert queue.recover_consumer("gone", force=True) == 1
    assert rq.client.lrange(rq.keys.active, 0, -1) == [b"job-of-gone"]
    assert rq.client.hget(rq.keys.recovered, "job-of-gone") == b"1"  # counted as a crash
    with pytest.raises(gq.ConfigurationError):
        queue.recover_consumer("gone")  # no longer registered


def test_the_lease_of_consumers_that_state_none_is_an_option(backend: Backend) -> None:
    """A fleet whose Go consumers beat every 10 s tells gq so (--custodian-unstated-lease)."""
    rq = _registered(backend, "go", silent_for=60)
    _custodian(backend, custodian_unstated_lease=30).custodian_step()
    assert rq.client.lrange(rq.keys.active, 0, -1) == [b"job-of-go"]
