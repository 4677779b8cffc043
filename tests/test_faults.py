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
import re
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import gevent
import pytest
import redis

import gq
from gq import job as jobs
from tests import faults
from tests.fault_handlers import POISON_EXIT, RECORDER
from tests.faults import FAST, SOAK_SECONDS, Fleet, Server, count, report
from tests.helpers import TcpProxy, stays_true, wait_until

pytestmark = [pytest.mark.timeout(90 + SOAK_SECONDS), pytest.mark.real_redis]

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
        assert worker.alive() and "dead consumer(s)" not in worker.output
    assert fleet.direct.zcard(f"{fleet.queue}:consumers") == 3  # nobody reaped
    lost, dups = report("6. clock skew", "3 workers, clocks +5 min, -5 min and right "
                        "(time.time patched in the worker)", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 7. poison job ----------------------------------------------------------------------

_RECOVERED = re.compile(r"recovered (?:its )?(\d+) job\(s\)")


def recovered_in(output: str) -> int:
    """Jobs a worker's log says it recovered (its custodian's passes, a name's take-over)."""
    return sum(int(n) for n in _RECOVERED.findall(output))


@pytest.mark.parametrize("recoveries, crashes_expected", [(3, 4), (1, 3)])
def test_7_a_poison_job_ends_in_dead_and_the_others_complete(
    make: Make, recoveries: int, crashes_expected: int
) -> None:
    # The poison job sits among the others and workers run 5 at a time with 5 buffered.
    # Its first crash charges a recovery to every job its worker held, and they all run
    # again at full speed; its second crash makes it and its neighbours of that run
    # suspects that run alone (lib/recovery.lua); only a crash alone can send a job to
    # dead, so no neighbour ever gets there, even with --job-max-recoveries 1 (where the
    # poison job needs one crash more than the limit says: docs/decisions.md).
    options = [*FAST, "--concurrency", "5", "--buffer-size", "5",
               "--job-max-recoveries", str(recoveries)]  # fmt: skip
    server, fleet = make(options=options)
    started = time.monotonic()
    ids = fleet.enqueue(250, b"0.002")
    fleet.enqueue(1, b"poison", prefix="poison")
    ids += fleet.enqueue(250, b"0.002", prefix="k")
    workers = [fleet.start() for _ in range(3)]
    every = list(workers)
    crashes, bound = 0, 0
    while "poison0" not in fleet.dead():
        assert crashes <= crashes_expected, "the poison job outlived its recovery limit"
        wait_until(lambda: not all(w.alive() for w in workers) or "poison0" in fleet.dead(), 30)
        for worker in [w for w in workers if not w.alive()]:
            assert worker.proc.returncode == POISON_EXIT, worker.output
            bound += len(fleet.inflight(worker.consumer_id()) - {"poison0"})
            crashes += 1
            workers.remove(worker)
            workers.append(fleet.start())
            every.append(workers[-1])
    done = fleet.wait_all_done(ids)
    # On a loaded host a live worker can also miss its 1.3 s lease: its jobs, recovered
    # too, may run twice, as at-least-once allows. The bound is every job recovered.
    bound = max(bound, sum(recovered_in(worker.output) for worker in every))
    assert crashes == crashes_expected
    assert fleet.dead() == {"poison0"}
    message = fleet.direct.hget(f"{fleet.queue}:data", "poison0")
    assert f"recovered {recoveries} times" in jobs.decode_error(message)
    lost, dups = report(f"7. poison job, --job-max-recoveries {recoveries}", "a job that "
                        "kills its worker (os._exit) in the middle of 500 others, 3 workers "
                        "running 5 and buffering 5 each; a supervisor restarts workers; "
                        f"dead after {crashes} crashes, no neighbour dead", None, ids, done,
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
        assert "dead consumer(s)" not in worker.output
    lost, dups = report("8. slow healthy job", "a 4 s job (dead-consumer timeout 1.3 s) "
                        "next to 1,000 others on 2 workers", None, ids, done, "0",
                        started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 9. a handler that blocks the hub --------------------------------------------------------


def test_9_a_cpu_bound_handler_does_not_get_its_jobs_recovered(make: Make) -> None:
    # 3 s > heartbeat 0.3 + timeout 2 (the lease without the thread heartbeat), but less
    # than the timeout for which the thread heartbeat keeps beating + the lease after it.
    server, fleet = make(options=[*FAST, "--custodian-consumer-timeout", "2"])
    started = time.monotonic()
    busy = fleet.enqueue(1, b"busy:3", prefix="busy")
    workers = [fleet.start("--concurrency", "1") for _ in range(2)]
    ids = [*busy, *fleet.enqueue(300, b"0.002")]
    done = fleet.wait_all_done(ids)
    outputs = "".join(worker.output for worker in workers)
    assert "gevent hub is blocked" in outputs  # the thread heartbeat stepped in, and said so
    assert "dead consumer(s)" not in outputs
    lost, dups = report("9. CPU-bound handler", "a handler computes 3 s without yielding "
                        "(heartbeat 0.3 s + timeout 2 s) while another worker's custodian "
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
    producer = gq.Producer(fleet.queue, url=server.url)
    # A first job before the limit is set: its scripts and connection take about 300 KB on
    # Redis 7.0+ and Valkey (70 KB on 6.2), most of the headroom: 83 jobs fitted on 7.4.
    ids = [producer.perform(gq.Job(id="j-first", data=b"0" * 1000))]
    direct.config_set("maxmemory", int(direct.info("memory")["used_memory"]) + 500_000)
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


# -- 12. recovery at full speed -----------------------------------------------------------


def test_12_jobs_of_a_crashed_worker_are_recovered_at_full_speed(make: Make) -> None:
    # Issue #9, scenario 1: before the fix every recovered job was a suspect that ran
    # alone, and while one sat at the head of the queue every consumer ran one job at a
    # time. Now a job recovered once runs like any other: the survivor runs many of them
    # at once (measured on its in-flight set), and benchmarks/recovery.py times it.
    options = [*FAST, "--concurrency", "100", "--buffer-size", "100"]
    server, fleet = make(options=options)
    started = time.monotonic()
    victim, survivor = fleet.start(), fleet.start()
    ids = fleet.enqueue(1200, b"0.3")
    victim_id, survivor_id = victim.consumer_id(), survivor.consumer_id()
    wait_until(lambda: len(fleet.inflight(victim_id)) >= 150, 30, message="victim holds jobs")
    victim.proc.send_signal(signal.SIGKILL)
    victim.proc.wait(10)
    held = fleet.inflight(victim_id)
    most_at_once = 0
    while not set(ids) <= set(fleet.done()):  # sample the survivor while it drains
        most_at_once = max(most_at_once, len(fleet.inflight(survivor_id) & held))
        assert time.monotonic() - started < 80, fleet.describe(set(ids) - set(fleet.done()))
    done = fleet.done()
    lost, dups = report("12. recovery at full speed", f"2 workers running 100 and buffering "
                        f"100; one SIGKILLed holding {len(held)} of 1,200 jobs of 0.3 s; the "
                        f"survivor held up to {most_at_once} recovered jobs at once", None,
                        ids, done, f"<= in flight at the kill ({len(held)})",
                        started)  # fmt: skip
    assert lost == 0 and dups <= len(held)
    assert most_at_once >= 20, most_at_once  # not one at a time
    assert fleet.dead() == set()


# -- 13. a handler that never yields ---------------------------------------------------------


def test_13_a_spinning_handler_is_stopped_and_its_neighbours_run(make: Make) -> None:
    # Issue #9, scenario 2: a handler spins in pure Python with 45 ordinary jobs fetched
    # with it. The watchdog interrupts it at its job timeout (twice: one retry), it ends in
    # dead, and every neighbour runs.
    options = [*FAST, "--concurrency", "10", "--buffer-size", "40", "--job-timeout", "2",
               "--job-max-attempts", "1", "--hub-block-warning", "0.2"]  # fmt: skip
    server, fleet = make(options=options)
    started = time.monotonic()
    spin = fleet.enqueue(1, b"spin", prefix="spin")
    ids = fleet.enqueue(45, b"0.05")
    first = fleet.start()
    wait_until(lambda: "spin0" in fleet.inflight(first.consumer_id()), 15)
    second = fleet.start()
    done = fleet.wait_all_done(ids, timeout=40)
    wait_until(lambda: fleet.dead() == set(spin), 30, message="the spinning job in dead")
    error = jobs.decode_error(fleet.direct.hget(f"{fleet.queue}:data", "spin0"))
    assert "JobTimeout" in error
    outputs = first.output + second.output
    assert "hub has been blocked" in outputs  # the blocked hub, reported with its stack
    assert first.alive() and second.alive()
    lost, dups = report("13. handler that never yields", "a job spins in pure Python among "
                        "45 others (concurrency 10, buffer 40, --job-timeout 2, 2 attempts); "
                        "a second worker joins; the spinner is interrupted twice and dead",
                        None, ids, done, "0", started)  # fmt: skip
    assert (lost, dups) == (0, 0)


# -- 14. the hub held by C code past the lease; 15. SIGSTOP ----------------------------------


def _survives_a_stopped_hub(
    fleet: Fleet,
    stopped: faults.Worker,
    rescuer: faults.Worker,
    ids: list[str],
    stop: Callable[[], None],
) -> tuple[set[str], float]:
    """``stop()`` makes ``stopped`` stand still past its lease; ``rescuer`` recovers its
    jobs; once ``stopped`` runs again it must write nothing for them and lose nothing.
    Returns (what ``stopped`` held, the time it took)."""
    started = time.monotonic()
    consumer = stopped.consumer_id()
    wait_until(lambda: len(fleet.inflight(consumer)) >= 10, 15, message="jobs taken")
    held = fleet.inflight(consumer)
    stop()
    wait_until(lambda: "dead consumer(s)" in rescuer.output, 20, message="the rescuer recovers")
    done = fleet.wait_all_done(ids)
    wait_until(lambda: "stood still" in stopped.output, 20)
    assert stopped.alive() and rescuer.alive()
    assert fleet.dead() == set()
    wait_until(lambda: fleet.inflight(consumer) == set(), 10, message="nothing left held")
    lost, dups = count(ids, done)
    assert lost == 0 and dups <= len(held)
    assert {i for i, n in done.items() if n > 1} <= held
    return held, started


def test_14_a_hub_held_in_c_code_past_the_lease_loses_its_jobs_safely(make: Make) -> None:
    server, fleet = make()
    fleet.enqueue(1, b"freeze:4", prefix="freeze")  # first in line
    ids = ["freeze0", *fleet.enqueue(200, b"0.5")]
    frozen = fleet.start("--concurrency", "5", "--buffer-size", "10")
    wait_until(lambda: "freeze0" in fleet.inflight(frozen.consumer_id()), 15)
    rescuer = fleet.start("--concurrency", "20")
    held, started = _survives_a_stopped_hub(fleet, frozen, rescuer, ids, lambda: None)
    assert "no more heartbeats" in frozen.output  # the thread heartbeat gave up
    done = fleet.done()
    report("14. hub held by C code", "a handler holds the hub 4 s in C (lease 1.3 s) among "
           "200 jobs; another worker recovers its jobs; it wakes, drops what it lost",
           None, ids, done, f"<= it held ({len(held)})", started)  # fmt: skip


def test_15_a_worker_stopped_past_its_lease_then_continued(make: Make) -> None:
    # A 2.3 s lease: on a loaded machine a 1.3 s one can run out before the SIGSTOP (a
    # late heartbeat), and the stop would then be too short to show.
    server, fleet = make(options=[*FAST, "--custodian-consumer-timeout", "2"])
    paused = fleet.start("--concurrency", "5", "--buffer-size", "10")
    ids = fleet.enqueue(200, b"0.5")
    rescuer = fleet.start("--concurrency", "20")

    def sigstop() -> None:
        paused.proc.send_signal(signal.SIGSTOP)
        try:
            wait_until(lambda: "dead consumer(s)" in rescuer.output, 20)
        finally:
            paused.proc.send_signal(signal.SIGCONT)

    # The "stood still" report is asserted too. It used to be missing in about 3 runs out
    # of 10: the SIGSTOP, sent as soon as the jobs are in flight, often lands before the
    # worker's ticker greenlet first ran, and the ticker started its clock after the
    # SIGCONT (now it starts with the thread heartbeat's; see docs/decisions.md).
    held, started = _survives_a_stopped_hub(fleet, paused, rescuer, ids, sigstop)
    report("15. SIGSTOP past the lease", "a worker with 15 jobs held is SIGSTOPped until "
           "another recovers them, then SIGCONT", None, ids, fleet.done(),
           f"<= it held ({len(held)})", started)  # fmt: skip


# -- 16. a worker cut off from Redis past its lease ------------------------------------------


def test_16_a_worker_cut_off_past_its_lease_then_reconnected(make: Make) -> None:
    options = [*RESTART, "--custodian-consumer-timeout", "1"]
    server, fleet = make(options=options)
    started = time.monotonic()
    proxy = TcpProxy("127.0.0.1", server.port)
    proxy.start()
    try:
        cut = fleet.start("--concurrency", "5", "--buffer-size", "5",
                          "--url", f"redis://127.0.0.1:{proxy.port}/0")  # fmt: skip
        ids = fleet.enqueue(100, b"4")  # longer than the cut: they finish after it
        consumer = cut.consumer_id()
        wait_until(lambda: len(fleet.inflight(consumer)) == 10, 15, message="jobs taken")
        held = fleet.inflight(consumer)
        proxy.outage()
        rescuer = fleet.start("--concurrency", "100")
        wait_until(lambda: fleet.inflight(consumer) == set(), 20, message="recovered")
        proxy.restore()
        done = fleet.wait_all_done(ids)
        assert cut.alive() and rescuer.alive()
    finally:
        proxy.stop()
    lost, dups = report("16. worker cut off past its lease", "a worker behind a proxy "
                        "that stops forwarding for longer than its lease while its 4 s jobs "
                        "run; another recovers them; then the proxy forwards again", None,
                        ids, done, f"<= it held ({len(held)})", started)  # fmt: skip
    assert lost == 0 and dups <= len(held)
    assert {i for i, n in done.items() if n > 1} <= held
    assert fleet.dead() == set()


# -- 17. Redis killed with appendfsync everysec ---------------------------------------------


def test_17_redis_killed_with_appendfsync_everysec_loses_at_most_the_last_second(
    make: Make,
) -> None:
    server, fleet = make("--appendfsync", "everysec", appendonly=True, options=RESTART,
                         recorder=True)  # fmt: skip
    started = time.monotonic()
    workers = [fleet.start() for _ in range(3)]
    for worker in workers:
        worker.consumer_id()
    enqueued: list[tuple[str, float]] = []  # (id, when its perform returned)

    def produce() -> None:
        producer = gq.Producer(fleet.queue, url=server.url)
        try:
            for i in range(100_000):
                producer.perform(gq.Job(id=f"p{i}", data=b"0.01"))
                enqueued.append((f"p{i}", time.monotonic()))
        except redis.RedisError:
            pass  # the server is gone
        finally:
            producer.close()

    producing = gevent.spawn(produce)
    wait_until(lambda: len(enqueued) >= 2000, 30, message="enqueued under load")
    # Acknowledgements of the last moments before the kill may be lost with the AOF's
    # last second: every job done from here on may run again.
    snapshot, snapshot_at = set(fleet.done()), time.monotonic()
    wait_until(lambda: len(enqueued) >= 3000 and time.monotonic() - snapshot_at > 2, 30)
    exposed = inflight_total(fleet)
    killed_at = time.monotonic()
    server.proc.kill()  # SIGKILL: no clean shutdown, the AOF as fsync left it
    server.proc.wait(10)
    producing.join(10)
    exposed |= set(fleet.done()) - snapshot
    server.start()
    safe = [job_id for job_id, at in enqueued if at < killed_at - 1.0]
    done = fleet.wait_all_done(safe)
    late = [job_id for job_id, at in enqueued if at >= killed_at - 1.0]
    late_lost = sum(1 for job_id in late if done[job_id] == 0)
    assert all(worker.alive() for worker in workers)
    lost, dups = report("17. Redis SIGKILL, appendfsync everysec", f"3 workers, a producer "
                        f"enqueuing one by one; redis-server SIGKILLed after {len(enqueued)} "
                        f"jobs and restarted; of the {len(late)} enqueued in its last second, "
                        f"{late_lost} lost", None, safe, done,
                        f"<= in flight or done in the last moments ({len(exposed)})",
                        started)  # fmt: skip
    assert lost == 0  # nothing enqueued more than a second before the kill
    assert {i for i, n in done.items() if n > 1} <= exposed
