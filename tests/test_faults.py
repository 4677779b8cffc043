"""The fault suite (issue #5): break things for real and check that no job is lost.

Each test starts its own redis-server and real ``gq-worker`` processes (tests/faults.py),
enqueues thousands of jobs whose handler records its id, breaks something, and counts:
every job must be done, and a job may run twice only where a bound says it may (a job
in flight in a killed worker). ``GQ_RELIABILITY_REPORT=docs/reliability.md`` renders the
measured outcomes as docs/reliability.md; ``GQ_SOAK_SECONDS`` makes the kill and restart
scenarios run for that long.
"""

from __future__ import annotations

import os
import random
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

import gq
from gq import job as jobs
from tests import faults
from tests.fault_handlers import POISON_EXIT, RECORDER
from tests.faults import FAST, SOAK_SECONDS, Fleet, Server, report
from tests.helpers import stays_true, wait_until

pytestmark = pytest.mark.timeout(90 + SOAK_SECONDS)

Make = Callable[..., tuple[Server, Fleet]]


@pytest.fixture(scope="module", autouse=True)
def reliability_report() -> Iterator[None]:
    yield
    path = os.environ.get("GQ_RELIABILITY_REPORT")
    if path:
        faults.render(path)


@pytest.fixture
def make(tmp_path: Path) -> Iterator[Make]:
    """``make(*redis_config, appendonly=False, options=FAST, recorder=False)``: a started
    server and a fleet (``recorder``: the handlers record on a second server)."""

    def make_(*config: str, appendonly: bool = False, options: list[str] = FAST, recorder=False):
        server = Server(tmp_path, *config, appendonly=appendonly)
        servers.append(server)
        server.start()
        other = None
        if recorder:  # a second server for the handlers' records
            (tmp_path / "recorder").mkdir()
            other = Server(tmp_path / "recorder")
            servers.append(other)
            other.start()
        fleet = Fleet(server, tmp_path, options, other)
        fleets.append(fleet)
        return server, fleet

    servers: list[Server] = []
    fleets: list[Fleet] = []
    yield make_
    for fleet in fleets:
        fleet.close()
    faults.stop_all(*(server.proc for server in servers))


def seeded() -> tuple[random.Random, int]:
    seed = int(os.environ.get("GQ_FAULT_SEED") or random.randrange(1_000_000))
    print(f"random seed {seed} (GQ_FAULT_SEED={seed} repeats it)")
    return random.Random(seed), seed


def soak_rounds() -> Iterator[int]:
    """Round 0 always; more rounds until GQ_SOAK_SECONDS have passed."""
    deadline = time.monotonic() + SOAK_SECONDS
    round_ = 0
    while round_ == 0 or time.monotonic() < deadline:
        yield round_
        round_ += 1


def wait_for_progress(fleet: Fleet, ids: list[str], more: int) -> None:
    """Until ``more`` further jobs are done (or all of them): a random moment mid-run."""
    target = min(len(ids), sum(fleet.done().values()) + more)
    wait_until(lambda: sum(fleet.done().values()) >= target, 60, 0.02, "progress")


def inflight_total(fleet: Fleet) -> set[str]:
    members: set[str] = set()
    for key in fleet.direct.zrange(f"{fleet.queue}:consumers", 0, -1):
        members |= {m.decode() for m in fleet.direct.smembers(key)}
    return members


# -- 1. SIGKILL ------------------------------------------------------------------------


def test_1_sigkill_workers_at_random_moments_loses_nothing(make: Make) -> None:
    server, fleet = make()
    rng, seed = seeded()
    started = time.monotonic()
    workers = [fleet.start() for _ in range(3)]
    ids: list[str] = []
    exposed: set[str] = set()  # ids in a killed worker's in-flight set at its death
    bound = 0
    for round_ in soak_rounds():
        batch = fleet.enqueue(3000, b"0.05", prefix=f"r{round_}-")
        ids += batch
        for _ in range(3):
            wait_for_progress(fleet, ids, rng.randint(100, 400))
            victim = rng.choice([w for w in workers if w.alive()])
            consumer = victim.consumer_id()
            victim.proc.send_signal(signal.SIGKILL)
            victim.proc.wait(10)
            held = fleet.inflight(consumer)  # frozen until a custodian recovers it
            exposed |= held
            bound += len(held)
            workers.append(fleet.start())
        done = fleet.wait_all_done(ids)
    lost, dups = report("1. SIGKILL mid-run", f"3 workers; {3 * (round_ + 1)} SIGKILLs at "
                        "random moments, a new worker after each", seed, ids, done,
                        f"<= in flight at the kills ({bound})", started)  # fmt: skip
    assert lost == 0
    assert dups <= bound
    assert {i for i, n in done.items() if n > 1} <= exposed
    assert fleet.dead() == set()


# -- 2. SIGTERM --------------------------------------------------------------------------


def test_2_sigterm_finishes_running_jobs_and_gives_back_buffered_ones(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    ids = fleet.enqueue(300, b"0.3")
    worker = fleet.start("--concurrency", "5", "--buffer-size", "10")
    consumer = worker.consumer_id()
    wait_until(lambda: len(fleet.inflight(consumer)) == 15, 20, message="5 running, 10 buffered")
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(20) == 0
    done = fleet.done()
    assert max(done.values()) == 1 and len(done) >= 5  # the running ones finished, once
    assert fleet.inflight(consumer) == set()
    active = [x.decode() for x in fleet.direct.lrange(f"{fleet.queue}:active", 0, -1)]
    assert sorted([*done, *active]) == sorted(ids)  # the buffered ones went back
    assert "gave back 10 buffered job(s)" in worker.output
    for _ in range(2):
        fleet.start()
    done = fleet.wait_all_done(ids)
    lost, dups = report("2. SIGTERM, graceful", "1 worker with 5 running and 10 buffered "
                        "jobs gets SIGTERM; 2 workers finish the queue", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


def test_2_a_second_sigterm_leaves_running_jobs_for_recovery(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    ids = fleet.enqueue(50, b"2")
    worker = fleet.start("--concurrency", "5", "--buffer-size", "5")
    consumer = worker.consumer_id()
    wait_until(lambda: len(fleet.inflight(consumer)) == 10, 20, message="jobs running")
    worker.proc.send_signal(signal.SIGTERM)
    wait_until(lambda: "signal received" in worker.output, 10)
    worker.proc.send_signal(signal.SIGTERM)
    assert worker.proc.wait(20) == 1
    left = fleet.inflight(consumer)
    assert len(left) == 5  # the running ones; the buffered ones went back
    fleet.start("--concurrency", "50")
    done = fleet.wait_all_done(ids)
    lost, dups = report("2. SIGTERM twice", "a second SIGTERM stops at once; another "
                        "worker recovers the 5 running jobs", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 3. Redis restarts -------------------------------------------------------------------

RESTART = [*FAST, "--custodian-consumer-timeout", "5", "--poller-max-backoff", "0.5",
           "--heartbeat-max-backoff", "0.2", "--scheduler-max-backoff", "0.5",
           "--custodian-max-backoff", "0.5"]  # fmt: skip


def test_3_workers_ride_through_redis_restarts(make: Make) -> None:
    server, fleet = make(appendonly=True, options=RESTART)
    rng, seed = seeded()
    started = time.monotonic()
    workers = [fleet.start() for _ in range(3)]
    for worker in workers:
        worker.consumer_id()
    ids: list[str] = []
    exposed: set[str] = set()
    restarts = 0
    for round_ in soak_rounds():
        ids += fleet.enqueue(3000, b"0.02", prefix=f"r{round_}-")
        for _ in range(2):
            wait_for_progress(fleet, ids, rng.randint(200, 800))
            exposed |= inflight_total(fleet)
            server.stop()
            server.start()
            restarts += 1
        done = fleet.wait_all_done(ids)
    assert all(worker.alive() for worker in workers), "a worker died of a Redis restart"
    lost, dups = report("3. Redis restarts", f"3 workers; redis-server (appendonly, fsync "
                        f"always) restarted {restarts} times at random moments", seed, ids,
                        done, f"<= in flight at the restarts ({len(exposed)})",
                        started)  # fmt: skip
    assert lost == 0
    assert {i for i, n in done.items() if n > 1} <= exposed


def test_3_redis_down_past_the_attempts_budget_ends_the_worker_with_code_1(make: Make) -> None:
    budget = ["--poller-max-attempts", "3", "--heartbeat-max-attempts", "3",
              "--poller-max-backoff", "0.2", "--heartbeat-max-backoff", "0.2"]  # fmt: skip
    server, fleet = make(appendonly=True, options=[*FAST, *budget])
    started = time.monotonic()
    ids = fleet.enqueue(2000, b"0.002")
    worker = fleet.start()
    consumer = worker.consumer_id()
    wait_for_progress(fleet, ids, 300)
    server.stop()
    assert worker.proc.wait(30) == 1  # EXIT_FATAL: "fatal error while running"
    assert "stopped on a fatal error" in worker.output
    server.start()
    exposed = fleet.inflight(consumer)  # what it held when it gave up, left for recovery
    fleet.start()
    done = fleet.wait_all_done(ids)
    lost, dups = report("3. Redis down too long", "Redis stopped until the worker gives "
                        "up (exit 1), then back; a new worker finishes", None, ids, done,
                        f"<= left in flight by the worker ({len(exposed)})", started)  # fmt: skip
    assert lost == 0
    assert {i for i, n in done.items() if n > 1} <= exposed


# -- 4. connections cut ------------------------------------------------------------------


def cut_connections(client: redis.Redis) -> int:
    """CLIENT KILL every connection but this one and the handlers' recorders."""
    me = client.client_id()
    cut = 0
    for entry in client.client_list():
        if entry.get("name") != RECORDER and int(entry["id"]) != me:
            cut += int(client.client_kill_filter(_id=entry["id"]))
    return cut


def test_4_connections_cut_again_and_again(make: Make) -> None:
    server, fleet = make()
    rng, seed = seeded()
    started = time.monotonic()
    workers = [fleet.start() for _ in range(3)]
    for worker in workers:
        worker.consumer_id()
    ids = fleet.enqueue(3000, b"0.02")
    exposed: set[str] = set()
    for _ in range(10):
        wait_for_progress(fleet, ids, rng.randint(50, 250))
        exposed |= inflight_total(fleet)
        cut_connections(fleet.direct)
    done = fleet.wait_all_done(ids)
    assert all(worker.alive() for worker in workers), "a worker died of a cut connection"
    lost, dups = report("4. connections cut", "3 workers; CLIENT KILL of every gq "
                        "connection, 10 times at random moments", seed, ids, done,
                        f"<= in flight at the cuts ({len(exposed)})", started)  # fmt: skip
    assert lost == 0
    assert {i for i, n in done.items() if n > 1} <= exposed
    # Every job acknowledged in the end: no lost fetch left jobs stranded in a set.
    wait_until(lambda: inflight_total(fleet) == set(), 10, message="in-flight sets empty")


# -- 5. SCRIPT FLUSH ---------------------------------------------------------------------


def test_5_script_flush_mid_run(make: Make) -> None:
    server, fleet = make()
    rng, seed = seeded()
    started = time.monotonic()
    workers = [fleet.start() for _ in range(3)]
    ids = fleet.enqueue(3000, b"0.02")
    for _ in range(5):
        wait_for_progress(fleet, ids, rng.randint(100, 400))
        fleet.direct.script_flush()
    producer = gq.Producer(fleet.queue, url=server.url)
    fleet.direct.script_flush()
    ids += [producer.perform_many(gq.Job(id=f"late{i}") for i in range(1500))][0]
    producer.close()
    done = fleet.wait_all_done(ids)
    assert all(worker.alive() for worker in workers)
    lost, dups = report("5. SCRIPT FLUSH", "3 workers; the script cache flushed 6 times, "
                        "once before a 1,500-job perform_many (a pipeline of scripts)",
                        seed, ids, done, "0", started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 6. clock skew -----------------------------------------------------------------------


def test_6_workers_with_clocks_minutes_off(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    workers = [fleet.start(GQ_TEST_CLOCK_SKEW=skew) for skew in ("300", "-300", "0")]
    for worker in workers:
        worker.consumer_id()
    ids = fleet.enqueue(2000, b"0.01")
    wait_until(lambda: fleet.direct.zcard(f"{fleet.queue}:consumers") == 3, 10)
    done = fleet.wait_all_done(ids)
    for worker in workers:
        assert worker.alive() and "recovered" not in worker.output
    assert fleet.direct.zcard(f"{fleet.queue}:consumers") == 3  # nobody reaped
    lost, dups = report("6. clock skew", "3 workers, clocks +5 min, -5 min and right "
                        "(time.time patched in the worker)", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 7. poison job ----------------------------------------------------------------------


def test_7_a_poison_job_ends_in_dead_and_the_others_complete(make: Make) -> None:
    # The poison job sits among the others and workers run 5 at a time with 5 buffered:
    # its first crash charges a recovery to every job its worker held, but from then on
    # each of those jobs is a suspect that runs alone (fetch.lua), so only the poison job
    # is charged again and no neighbour reaches the limit (docs/decisions.md).
    options = [*FAST, "--concurrency", "5", "--buffer-size", "5", "--job-max-recoveries", "3"]
    server, fleet = make(options=options)
    started = time.monotonic()
    ids = fleet.enqueue(250, b"0.002")
    fleet.enqueue(1, b"poison", prefix="poison")
    ids += fleet.enqueue(250, b"0.002", prefix="k")
    workers = [fleet.start() for _ in range(3)]
    crashes, bound = 0, 0
    while "poison0" not in fleet.dead():
        assert crashes <= 4, "the poison job outlived its recovery limit"
        wait_until(lambda: not all(w.alive() for w in workers) or "poison0" in fleet.dead(), 30)
        for worker in [w for w in workers if not w.alive()]:
            assert worker.proc.returncode == POISON_EXIT, worker.output
            bound += len(fleet.inflight(worker.consumer_id()) - {"poison0"})
            crashes += 1
            workers.remove(worker)
            workers.append(fleet.start())
    done = fleet.wait_all_done(ids)
    assert crashes == 4  # the first run and 3 recoveries
    assert fleet.dead() == {"poison0"}
    message = fleet.direct.hget(f"{fleet.queue}:data", "poison0")
    assert "recovered 3 times" in jobs.decode_error(message)
    lost, dups = report("7. poison job", "a job that kills its worker (os._exit) in the "
                        "middle of 500 others, 3 workers running 5 and buffering 5 each; a "
                        "supervisor restarts workers; dead after 3 recoveries", None, ids, done,
                        f"<= others in flight at the crashes ({bound})", started)  # fmt: skip
    assert lost == 0 and dups <= bound


# -- 8. slow healthy job ------------------------------------------------------------------


def test_8_a_slow_job_with_a_live_heartbeat_runs_once(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    slow = fleet.enqueue(1, b"4", prefix="slow")
    workers = [fleet.start() for _ in range(2)]
    ids = [*slow, *fleet.enqueue(1000, b"0.002")]
    done = fleet.wait_all_done(ids)
    for worker in workers:
        assert "recovered" not in worker.output
    lost, dups = report("8. slow healthy job", "a 4 s job (dead-consumer timeout 1.3 s) "
                        "next to 1,000 others on 2 workers", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 9. a handler that blocks the hub --------------------------------------------------------


def test_9_a_cpu_bound_handler_does_not_get_its_jobs_recovered(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    busy = fleet.enqueue(1, b"busy:4", prefix="busy")  # 4 s > heartbeat 0.3 + timeout 1
    workers = [fleet.start("--concurrency", "1") for _ in range(2)]
    ids = [*busy, *fleet.enqueue(300, b"0.002")]
    done = fleet.wait_all_done(ids)
    outputs = "".join(worker.output for worker in workers)
    assert "gevent hub is blocked" in outputs  # the thread heartbeat stepped in, and said so
    assert "recovered" not in outputs
    lost, dups = report("9. CPU-bound handler", "a handler computes 4 s without yielding "
                        "(heartbeat 0.3 s + timeout 1 s) while another worker's custodian "
                        "runs", None, ids, done, "0", started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 10. garbage --------------------------------------------------------------------------


def test_10_garbage_in_the_queue_keys(make: Make) -> None:
    server, fleet = make()
    started = time.monotonic()
    q, direct = fleet.queue, fleet.direct
    ids = fleet.enqueue(500, b"0.002")
    direct.hset(f"{q}:data", mapping={"g-bytes": b"\xc1\xc1 not msgpack",
                                      "g-liar": jobs.encode(gq.Job(id="other"))})  # fmt: skip
    direct.lpush(f"{q}:active", "g-bytes", "g-missing", "g-liar")
    direct.zadd(f"{q}:scheduled", {"g-due-missing": 0})
    direct.set(f"{q}:inflight:ghost", "not a set")  # a registration whose set is a string
    direct.zadd(f"{q}:consumers", {f"{q}:inflight:ghost": 0})
    workers = [fleet.start() for _ in range(2)]
    done = fleet.wait_all_done(ids)
    wait_until(lambda: fleet.dead() == {"g-bytes", "g-liar"}, 10)
    assert direct.hget(f"{q}:data", "g-bytes") == b"\xc1\xc1 not msgpack"  # kept as it was
    wait_until(lambda: direct.zscore(f"{q}:consumers", f"{q}:inflight:ghost") is None, 10)
    outputs = "".join(worker.output for worker in workers)
    assert "cannot decode" in outputs and "g-missing" in outputs
    assert all(worker.alive() for worker in workers)
    fleet.enqueue(1, prefix="after")
    wait_until(lambda: fleet.done()["after0"] == 1, 10)
    lost, dups = report("10. garbage", "undecodable and mislabelled messages, ids without "
                        "messages (ready and scheduled), a registration whose set is a "
                        "string; 500 good jobs", None, ids, done, "0", started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 11. maxmemory -------------------------------------------------------------------------


def test_11_at_maxmemory_enqueue_fails_clearly_and_the_queue_drains(make: Make) -> None:
    server, fleet = make("--maxmemory-policy", "noeviction", recorder=True)
    started = time.monotonic()
    direct = fleet.direct
    direct.config_set("maxmemory", int(direct.info("memory")["used_memory"]) + 500_000)
    producer = gq.Producer(fleet.queue, url=server.url)
    ids: list[str] = []
    with pytest.raises(gq.QueueFullError) as refused:
        for i in range(10_000):
            ids.append(producer.perform(gq.Job(id=f"j{i}", data=b"0" * 1000)))
    producer.close()
    assert isinstance(refused.value.cause, redis.ResponseError)
    assert direct.llen(f"{fleet.queue}:active") == len(ids) > 100  # nothing queued was lost
    workers = [fleet.start() for _ in range(2)]  # still at maxmemory: they must drain it
    done = fleet.wait_all_done(ids)
    assert all("maxmemory-policy" not in worker.output for worker in workers)
    lost, dups = report("11. maxmemory", "noeviction at maxmemory: perform raises "
                        "QueueFullError; 2 workers drain the full queue", None, ids, done,
                        "0", started)  # fmt: skip
    assert (lost, dups) == (0, 0)


def test_11_the_worker_warns_when_redis_may_evict(make: Make) -> None:
    server, fleet = make("--maxmemory-policy", "allkeys-lru")
    worker = fleet.start()
    wait_until(lambda: "maxmemory-policy allkeys-lru" in worker.output, 15)
    stays_true(worker.alive, 0.2)
