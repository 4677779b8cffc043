"""Prometheus metrics: a real gq-worker's /metrics scraped over HTTP after it ran jobs, the
queue exporter against Redis (fakeredis and a real server), and ``gq metrics``."""

from __future__ import annotations

import random
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import pytest
import redis

import gq
from gq import job as jobs
from gq import metrics
from gq.cli import admin_cmd, worker_cmd
from gq.store.admin import QueueAdmin
from gq.store.jobs import RedisQueue
from gq.store.keys import REGISTRY
from gq.worker import sampling
from gq.worker.ledger import Ledger
from gq.worker.recorder import OUTCOMES, Recorder
from gq.worker.sampling import Sample, Sampler
from tests.cli_support import ADMIN, Worker, env_for, log_lines
from tests.helpers import Backend, RedisServer, delete_keys, free_port, stop_process, wait_until
from tests.metrics_support import answers, fetch, parse, scrape, value

# -- the worker's metrics ------------------------------------------------------------------


@pytest.fixture
def queue(redis_server: RedisServer) -> Iterator[str]:
    name = f"test_metrics_{uuid.uuid4().hex[:8]}"
    yield name
    client = redis_server.client()
    delete_keys(client, f"{name}*")
    client.srem(REGISTRY, name)


def start_worker(
    tmp_path: Path, server: RedisServer, queue: str, port: int, *flags: str, **env: str
) -> Worker:
    return Worker(
        tmp_path,
        "tests.metrics_handlers:outcome",
        *flags,
        "--metrics-port",
        str(port),
        "--job-max-attempts",
        "1",  # a failing job is retried once, then killed
        "--scheduler-poll-interval",
        "0.2",
        "--stats-interval",
        "0",
        env=env_for(server.url, queue, **env),
    )


@pytest.mark.timeout(60)
def test_a_worker_serves_its_counters_histograms_and_process_metrics(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    port = free_port()
    # The worker runs gevent's monitor thread (gq.worker.watchdog); report a hub blocked 50 ms.
    worker = start_worker(tmp_path, redis_server, queue, port, "--hub-block-warning", "0.05")
    try:
        wait_until(lambda: answers(port), 15, message="the metrics server")
        producer = gq.Producer(queue, url=redis_server.url)
        producer.perform_many([b""] * 6 + [b"fail"] * 2 + [b"block"])
        client = redis_server.client()
        wait_until(lambda: client.zcard(f"{queue}:dead") == 2, 20, message="2 killed jobs")
        # The last acknowledgements may still be on their way.
        wait_until(
            lambda: value(scrape(port), "gq_jobs_total", queue=queue, outcome="done") == 7,
            10,
            message="7 jobs done in the metrics",
        )
        samples = scrape(port)
    finally:
        worker.stop()
    totals = {o: value(samples, "gq_jobs_total", queue=queue, outcome=o) for o in OUTCOMES}
    assert totals == {"done": 7, "retried": 2, "killed": 2, "cancelled": 0, "rate_limited": 0}
    # 7 successes and 2 x 2 failed attempts ran a handler; every message said when it was ready.
    assert value(samples, "gq_job_duration_seconds_count", queue=queue) == 11
    assert value(samples, "gq_job_wait_seconds_count", queue=queue) == 11
    # The blocking job took at least 0.3 s, the rest next to nothing.
    assert value(samples, "gq_job_duration_seconds_bucket", queue=queue, le="0.25") == 10
    assert value(samples, "gq_job_duration_seconds_sum", queue=queue) >= 0.3
    assert value(samples, "gq_handlers_running", queue=queue) == 0
    assert value(samples, "gq_jobs_buffered", queue=queue) == 0
    assert value(samples, "gq_jobs_recovered_total", queue=queue) == 0
    assert value(samples, "gq_hub_blocked_seconds_total") > 0
    assert value(samples, "process_resident_memory_bytes") > 1e6
    log_lines(worker.output)


@pytest.mark.timeout(30)
def test_the_worker_serves_only_metrics_and_running_handlers_show(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    port = free_port()
    worker = Worker(
        tmp_path,
        "tests.handlers:hang",
        "--metrics-port",
        str(port),
        "--concurrency",
        "2",
        "--buffer-size",
        "3",
        env=env_for(redis_server.url, queue, handler_url=redis_server.url),
    )
    try:
        wait_until(lambda: answers(port), 15, message="the metrics server")
        gq.Producer(queue, url=redis_server.url).perform_many([b""] * 5)

        def running_and_buffered() -> tuple[float | None, float | None]:
            samples = scrape(port)
            return (
                value(samples, "gq_handlers_running", queue=queue),
                value(samples, "gq_jobs_buffered", queue=queue),
            )

        # 2 handlers hang, the buffer holds the other 3 (once the poller topped it up).
        wait_until(lambda: running_and_buffered() == (2, 3), 10, message="2 running, 3 buffered")
        assert fetch(port, "/")[0] == 404
    finally:
        worker.stop()


def test_metrics_port_without_the_extra_is_a_usage_error(
    redis_server: RedisServer, monkeypatch: pytest.MonkeyPatch, capsys: Any
) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)  # import fails
    code = worker_cmd.run(
        ["tests.handlers:record", "--url", redis_server.url, "--queue", "q", "--metrics-port", "1"]
    )
    assert code == 2
    assert "pip install 'gq[metrics]'" in capsys.readouterr().err
    assert admin_cmd.run(["metrics", "--url", redis_server.url, "--port", "1"]) == 2
    assert "pip install 'gq[metrics]'" in capsys.readouterr().err


def test_a_metrics_port_in_use_is_a_usage_error(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    port = free_port()
    first = start_worker(tmp_path, redis_server, queue, port)
    try:
        wait_until(lambda: answers(port), 15, message="the first metrics server")
        second = start_worker(tmp_path, redis_server, queue, port)
        assert second.wait() == 2
        assert f"cannot serve metrics on 127.0.0.1:{port}" in second.output
    finally:
        first.stop()


def test_buckets_count_each_value_once_in_the_first_bucket_that_holds_it() -> None:
    buckets = metrics.Buckets([0.1, 1.0])
    for observed in (0.05, 0.1, 0.5, 1.0, 7.0):
        buckets.observe(observed)
    assert buckets.cumulative() == [("0.1", 2.0), ("1.0", 4.0), ("+Inf", 5.0)]
    assert buckets.total == pytest.approx(8.65)


def test_a_sampled_value_counts_as_many_times_as_its_weight() -> None:
    buckets = metrics.Buckets([0.1, 1.0])
    buckets.observe(0.5, 16)
    buckets.observe(-3.0, 2)  # a producer's clock ahead of this host's: 0
    assert buckets.cumulative() == [("0.1", 2.0), ("1.0", 18.0), ("+Inf", 18.0)]
    assert buckets.total == pytest.approx(8.0)


def _offered(sampler: Sampler, message: bytes) -> gq.Job:
    """What the poller does with a fetched message while the sampler is on."""
    job = jobs.decode(message)
    sampler.offer([job], [message])
    return job


def test_the_wait_is_measured_from_the_messages_ready_at() -> None:
    recorder = metrics.PrometheusRecorder("q")
    sampler = Sampler()
    sampler.start()  # every job is picked until the rate is known
    job = _offered(sampler, jobs.encode(gq.Job("a", b"x"), ready_at=time.time() - 20))
    sample = sampler.picked.pop(id(job))
    assert sample.job is job and sample.ready_at is not None and sample.weight == 1
    assert job == gq.Job("a", b"x") and repr(job) == repr(gq.Job("a", b"x"))  # left alone
    recorder.finished(sample, recorder.started(sample))
    curlyq = _offered(sampler, jobs.encode(gq.Job("b", b"x")))  # no ReadyAt: no wait
    recorder.started(sampler.picked.pop(id(curlyq)))
    ahead = jobs.encode(gq.Job("c", b"x"), ready_at=time.time() + 60)  # producer's clock
    recorder.started(sampler.picked.pop(id(_offered(sampler, ahead))))
    assert recorder.wait.counts[metrics.WAIT_BUCKETS.index(30)] == 1  # 10 < 20 s <= 30
    assert recorder.wait.counts[0] == 1  # ahead: counted as 0
    assert sum(recorder.wait.counts) == 2 and sum(recorder.duration.counts) == 1
    assert 20 <= recorder.wait.total < 30


def test_the_sampler_picks_one_job_in_every_at_random_with_its_ready_at() -> None:
    sampler = Sampler()
    sampler._random = random.Random(12)  # reproducible; the bounds hold for most seeds
    assert sampler.every == 0  # metrics off: the poller offers nothing
    now = time.time()
    messages = [jobs.encode(gq.Job(f"{q}{i}", b"x"), ready_at=None if q == "c" else now)
                for i in range(8000) for q in ("a", "c")]  # fmt: skip
    sampler._set(16)
    decoded = [jobs.decode(message) for message in messages]
    for start in range(0, len(messages), 100):  # in fetches of 100, as the poller offers
        sampler.offer(decoded[start : start + 100], messages[start : start + 100])
    picked = list(sampler.picked.values())
    # 16,000 jobs at p = 1/16: 1,000 expected, standard deviation 31. Strictly
    # alternating queues each get their share (a counter would give one of them all).
    assert 850 < len(picked) < 1150
    assert {sample.weight for sample in picked} == {16}
    with_ready_at = [sample for sample in picked if sample.job.id[0] == "a"]
    assert 400 < len(with_ready_at) < 600 and 400 < len(picked) - len(with_ready_at) < 600
    assert all(sample.ready_at == now for sample in with_ready_at)
    assert all(sample.ready_at is None for sample in picked if sample.job.id[0] == "c")
    # The Job type carries nothing of the sampling: no subclass, no extra attribute.
    assert all(type(job) is gq.Job for job in decoded) and not hasattr(decoded[0], "ready_at")


def _acked(ledger: Ledger, count: int) -> None:
    done = [gq.Job(id=f"j{i}") for i in range(count)]
    for job in done:
        job.queue = "q"
    ledger.acked(done)


def test_above_the_sampling_rate_about_sample_above_jobs_a_second_are_timed(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The sampler's clock stands still: acking 2,000 jobs takes real time, which on a
    # loaded host lowered the measured rate below what the test means (every 9, not 20).
    monkeypatch.setattr(sampling, "perf_counter", lambda: 1000.0)
    recorder = metrics.PrometheusRecorder("q")
    ledger = Ledger({"q": recorder})  # a consumer's run: its recorder times jobs
    sampler = ledger.sampler
    assert sampler.every == 1  # slow (or not known yet): every job is timed
    sampler._start -= sampling.RATE_WINDOW  # a window of RATE_WINDOW s has passed
    _acked(ledger, int(sampling.SAMPLE_ABOVE * sampling.RATE_WINDOW * 20))  # at 20x the rate
    every = sampler.every
    assert every == 20  # the rate over SAMPLE_ABOVE
    for i in range(every * 50):
        _offered(sampler, jobs.encode(gq.Job(f"j{i}"), ready_at=time.time()))
    picked = list(sampler.picked.values())
    assert picked and {sample.weight for sample in picked} == {every}
    recorder.finished(picked[0], recorder.started(picked[0]))
    assert sum(recorder.duration.counts) == every == sum(recorder.wait.counts)
    sampler._start -= sampling.RATE_WINDOW
    _acked(ledger, 1)  # slow again: every job is timed
    assert sampler.every == 1
    sampler.picked.clear()
    job = _offered(sampler, jobs.encode(gq.Job("k")))
    assert sampler.picked[id(job)].weight == 1


def test_a_fast_worker_samples_after_rate_jobs_not_a_whole_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(sampling, "RATE_WINDOW", 3600.0)  # never over, however slow the host
    sampler = Sampler()
    sampler.start()
    sampler.count(sampling.RATE_JOBS - 1)
    assert sampler.every == 1  # too few jobs, too short a time to tell
    sampler.count(1)  # RATE_JOBS jobs well within RATE_WINDOW s: above SAMPLE_ABOVE jobs/s
    assert sampler.every > 1


def test_a_consumer_without_metrics_samples_nothing() -> None:
    assert Ledger({"q": Recorder("q")}).sampler.every == 0
    assert Ledger({"q": metrics.PrometheusRecorder("q", histograms=False)}).sampler.every == 0


def test_the_processor_times_the_jobs_the_poller_picked_and_counts_them_by_weight(
    backend: Backend, monkeypatch: pytest.MonkeyPatch
) -> None:
    timed: list[str] = []

    class Counting(metrics.PrometheusRecorder):
        def started(self, sample: Sample) -> float:
            timed.append(sample.job.id)
            return super().started(sample)

    recorder = Counting(backend.queue)
    monkeypatch.setattr(Sampler, "start", lambda self: self._set(4))
    monkeypatch.setattr(Sampler, "count", lambda self, done: None)  # keep what is set
    monkeypatch.setattr(Sampler, "_gap", lambda self: 4)  # pick the 4th, 8th, ... job fetched
    consumer = gq.Consumer(backend.queue, client=backend.client(), processor_concurrency=1)
    consumer.recorders[backend.queue] = recorder
    done: list[str] = []
    gq.Producer(backend.queue, client=backend.client()).perform_many(
        [gq.Job(id=f"j{i}") for i in range(16)]  # the producer writes ReadyAt
    )
    runner = gevent.spawn(consumer.run, lambda job: done.append(job.id))
    try:
        wait_until(lambda: len(done) == 16)
    finally:
        consumer.stop()
        runner.join(10)
    assert len(timed) == 4  # one in 4, each standing for 4
    assert sum(recorder.duration.counts) == 16
    assert sum(recorder.wait.counts) == 16  # the picked jobs carry their ReadyAt


# -- the queue exporter ----------------------------------------------------------------------


def fill(q: RedisQueue, c: redis.Redis) -> None:
    """2 in flight, 2 ready (the oldest ready for 100 s), 2 scheduled, 1 dead, 1 consumer
    alive and 1 dead."""
    now = time.time()
    q.push([(i, jobs.encode(gq.Job(i), ready_at=now)) for i in ("f1", "f2")])
    q.push([("old", jobs.encode(gq.Job("old"), ready_at=now - 100))])
    q.push([("new", jobs.encode(gq.Job("new"), ready_at=now))])
    q.register("c1")
    assert len(q.fetch("c1", 2)) == 2
    q.schedule([("s1", b"m", 3600.0), ("s2", b"m", 3600.0)], relative=True)
    c.zadd(q.keys.dead, {"d1": 1.0})
    c.hset(q.keys.data, "d1", b"m")
    c.zadd(q.keys.consumers, {q.keys.inflight("gone"): now - 3600})


def collect(client: Any, queues: list[str] | None) -> dict[Any, float]:
    from prometheus_client import generate_latest

    return parse(generate_latest(metrics.queue_metrics_registry(client, queues)).decode())


def test_the_exporter_reads_each_queue_in_one_round_trip(backend: Backend) -> None:
    client = backend.client()
    q = RedisQueue(client, backend.queue)
    fill(q, backend.direct())
    empty = f"{backend.queue}_empty"
    calls: list[tuple[Any, ...]] = []
    execute = client.execute_command

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        return execute(*args, **kwargs)

    registry = metrics.queue_metrics_registry(client, [backend.queue, empty])
    from prometheus_client import generate_latest

    generate_latest(registry)  # the first scrape may load the script
    client.execute_command = counted  # type: ignore[method-assign]
    samples = parse(generate_latest(registry).decode())
    assert len(calls) == 2, calls  # one per queue
    name = backend.queue
    states = {s: value(samples, "gq_queue_jobs", queue=name, state=s) for s in
              ("ready", "scheduled", "inflight", "dead")}  # fmt: skip
    assert states == {"ready": 2, "scheduled": 2, "inflight": 2, "dead": 1}
    assert 99 <= value(samples, "gq_queue_oldest_ready_seconds", queue=name) < 130
    assert value(samples, "gq_queue_consumers", queue=name, state="alive") == 1
    assert value(samples, "gq_queue_consumers", queue=name, state="dead") == 1
    assert value(samples, "gq_queue_jobs", queue=empty, state="ready") == 0
    assert value(samples, "gq_queue_oldest_ready_seconds", queue=empty) == 0
    assert value(samples, "gq_exporter_scrape_errors_total") == 0


def test_the_exporter_finds_queues_in_the_registry(backend: Backend) -> None:
    client, direct = backend.client(), backend.direct()
    q = RedisQueue(client, backend.queue)
    q.push([("a", jobs.encode(gq.Job("a")))])  # no ReadyAt, as curlyq writes
    q.report("c1", None, 1.0, {}, 10)  # what every heartbeat does: join the registry
    try:
        samples = collect(client, None)
    finally:
        direct.srem(REGISTRY, backend.queue)
    assert value(samples, "gq_queue_jobs", queue=backend.queue, state="ready") == 1
    # The age of a job whose message does not say when it became ready is unknown: no series.
    assert value(samples, "gq_queue_oldest_ready_seconds", queue=backend.queue) is None


def test_a_failed_scrape_shows_no_stale_values_and_counts_the_error() -> None:
    port = free_port()  # nothing listens there
    client = redis.Redis(port=port, socket_connect_timeout=1)
    registry = metrics.queue_metrics_registry(client, ["a"])
    from prometheus_client import generate_latest

    for expected in (1, 2):
        samples = parse(generate_latest(registry).decode())
        assert value(samples, "gq_exporter_scrape_errors_total") == expected
        assert value(samples, "gq_queue_jobs", queue="a", state="ready") is None


def test_the_wsgi_app_takes_a_url(redis_server: RedisServer, queue: str) -> None:
    q = RedisQueue(redis_server.client(), queue)
    q.push([("a", jobs.encode(gq.Job("a"), ready_at=time.time()))])
    app = metrics.queue_metrics_wsgi_app(redis_server.url, [queue])
    replies: list[str] = []
    body = b"".join(
        app(
            {"REQUEST_METHOD": "GET", "PATH_INFO": "/metrics", "QUERY_STRING": ""},
            lambda status, headers: replies.append(status),
        )  # fmt: skip
    )
    assert replies == ["200 OK"]
    assert value(parse(body.decode()), "gq_queue_jobs", queue=queue, state="ready") == 1


@pytest.mark.timeout(30)
def test_gq_metrics_serves_the_queue_gauges_until_a_signal(
    tmp_path: Path, redis_server: RedisServer, queue: str
) -> None:
    import subprocess

    q = RedisQueue(redis_server.client(), queue)
    fill(q, redis_server.client())
    q.report("c1", None, 1.0, {}, 10)  # in the registry, as a worker's heartbeat puts it
    # Named queues: exactly those; no --queue: every queue in the registry.
    for args in (("--queue", queue), ()):
        port = free_port()
        out = tmp_path / f"metrics-{port}.log"
        with open(out, "wb") as sink:
            proc = subprocess.Popen(
                [*ADMIN, "metrics", "--port", str(port), *args],
                env=env_for(redis_server.url, None),
                stdout=sink,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(
                lambda port=port, proc=proc: answers(port) or proc.poll() is not None,
                15,
                message="gq metrics",
            )
            samples = scrape(port)
            assert value(samples, "gq_queue_jobs", queue=queue, state="inflight") == 2
            assert value(samples, "gq_queue_consumers", queue=queue, state="dead") == 1
            assert value(samples, "gq_queue_jobs", queue="other", state="ready") is None
            proc.terminate()
            assert proc.wait(10) == 0
        finally:
            stop_process(proc)
        log_lines(out.read_text())


def test_the_docs_and_the_grafana_dashboard_use_only_names_gq_exposes() -> None:
    import json
    import re

    names = {v for k, v in vars(metrics).items() if k.isupper() and isinstance(v, str)}
    exposed = {n for n in names if n.startswith("gq_")}
    exposed |= {f"{h}{s}" for h in (metrics.DURATION, metrics.WAIT)
                for s in ("_bucket", "_count", "_sum")}  # fmt: skip
    root = Path(__file__).resolve().parent.parent / "docs"
    dashboard = (root / "grafana-dashboard.json").read_text()
    exprs = " ".join(t["expr"] for p in json.loads(dashboard)["panels"] for t in p["targets"])
    used = set(re.findall(r"\bgq_[a-z_]+", exprs + (root / "metrics.md").read_text()))
    assert used - {"gq_queues"} <= exposed, used - exposed
    assert {metrics.JOBS, metrics.QUEUE_OLDEST_READY, metrics.HUB_BLOCKED} <= used


def test_recoveries_by_this_workers_custodian_are_counted(backend: Backend) -> None:
    from prometheus_client import REGISTRY, generate_latest

    direct = backend.direct()
    q = RedisQueue(direct, backend.queue)
    q.push([(i, jobs.encode(gq.Job(i))) for i in ("a", "b")])
    q.register("crashed")
    assert len(q.fetch("crashed", 2)) == 2
    direct.zadd(q.keys.consumers, {q.keys.inflight("crashed"): 1.0})  # silent since 1970
    consumer = gq.Consumer(backend.queue, client=backend.client())
    recorder = metrics.enable(consumer)
    consumer._queue.register(consumer.id)
    consumer.custodian_step()
    assert recorder.recoveries == 2
    samples = parse(generate_latest(REGISTRY).decode())
    assert value(samples, "gq_jobs_recovered_total", queue=backend.queue) == 2


def test_gq_metrics_exits_3_when_redis_is_not_there() -> None:
    from tests.cli_support import closed_port_url, run

    for args in ((), ("--queue", "q")):
        result = run(ADMIN, "metrics", "--port", str(free_port()), *args,
                     env=env_for(closed_port_url(), None))  # fmt: skip
        assert result.returncode == 3, result.stderr
        assert "cannot use Redis" in result.stderr


def test_without_histograms_jobs_are_counted_and_not_timed(backend: Backend) -> None:
    from prometheus_client import REGISTRY, generate_latest

    consumer = gq.Consumer(backend.queue, client=backend.client())
    consumer.opts.poller_poll_duration = 0.2
    metrics.enable(consumer, histograms=False)
    gq.Producer(backend.queue, client=backend.direct()).perform_many([b"a", b"b", b"c"])
    ran: list[str] = []

    def handler(job: gq.Job) -> None:
        ran.append(job.id)
        if len(ran) == 3:
            consumer.stop()

    consumer.run(handler)
    samples = parse(generate_latest(REGISTRY).decode())
    assert value(samples, "gq_jobs_total", queue=backend.queue, outcome="done") == 3
    assert value(samples, "gq_job_duration_seconds_count", queue=backend.queue) == 0
    assert value(samples, "gq_job_wait_seconds_count", queue=backend.queue) == 0


def test_a_consumer_of_two_queues_counts_each_job_under_its_own_queue(
    backend: Backend,
) -> None:
    import prometheus_client

    first, second = names = [f"{backend.queue}-a", f"{backend.queue}-b"]
    consumer = gq.Consumer(names, client=backend.client(), job_max_attempts=0)
    consumer.opts.poller_poll_duration = 0.2
    recorder = metrics.enable(consumer)
    assert recorder is consumer.recorders[first]
    gq.Producer(first, client=backend.direct()).perform_many([b"ok"] * 2)
    gq.Producer(second, client=backend.direct()).perform_many([b"ok"] * 3 + [b"fail"])
    ran: list[str] = []
    running: set[tuple[int, int]] = set()

    def handler(job: gq.Job) -> None:
        ran.append(job.id)
        scraped = parse(prometheus_client.generate_latest().decode())
        running.add((value(scraped, "gq_handlers_running", queue=first),
                     value(scraped, "gq_handlers_running", queue=second)))  # fmt: skip
        if len(ran) == 6:
            consumer.stop()
        if job.data == b"fail":
            raise RuntimeError("failed on purpose")

    try:
        consumer.run(handler)
    finally:
        backend.direct().srem(REGISTRY, *names)  # gq:queues, written by the heartbeat
    samples = parse(prometheus_client.generate_latest().decode())
    counts = {
        (queue, outcome): value(samples, "gq_jobs_total", queue=queue, outcome=outcome)
        for queue in names
        for outcome in ("done", "killed")
    }
    assert counts == {(first, "done"): 2, (first, "killed"): 0,
                      (second, "done"): 3, (second, "killed"): 1}  # fmt: skip
    assert value(samples, "gq_job_duration_seconds_count", queue=first) == 2
    assert value(samples, "gq_job_duration_seconds_count", queue=second) == 4
    # The handlers are the consumer's: shown whole under its first queue, so a sum over
    # queues counts each once.
    assert {second_queue for _, second_queue in running} == {0}
    assert min(first_queue for first_queue, _ in running) >= 1


def test_a_retry_counts_as_retried_and_only_a_job_gone_to_dead_as_killed(
    backend: Backend,
) -> None:
    """Issue 32: gq_jobs_total{outcome="retried"} counts retries (gq.Retry and retried
    errors) apart from killed (dead); the facts and the history count them apart too."""
    import prometheus_client

    consumer = gq.Consumer(backend.queue, client=backend.client(), job_max_attempts=1,
                           job_max_backoff=0.05, scheduler_poll_interval=0.1)  # fmt: skip
    consumer.opts.poller_poll_duration = 0.2
    recorder = metrics.enable(consumer)

    def handler(job: gq.Job) -> None:
        if job.data == b"fail":
            raise RuntimeError("failed on purpose")
        if job.attempt == 0:
            raise gq.Retry(after=0.05)

    gq.Producer(backend.queue, client=backend.direct()).perform_many([b"asks", b"fail"])
    greenlet = gevent.spawn(consumer.run, handler)
    try:
        wait_until(lambda: recorder.totals["done"] + recorder.totals["killed"] == 2)
    finally:
        consumer.stop()
        greenlet.join(timeout=10)
        backend.direct().srem(REGISTRY, backend.queue)
    samples = parse(prometheus_client.generate_latest().decode())
    totals = {o: value(samples, "gq_jobs_total", queue=backend.queue, outcome=o) for o in OUTCOMES}
    # "asks": a retry asked for, then done; "fail": retried once, then dead.
    assert totals == {"done": 1, "retried": 2, "killed": 1, "cancelled": 0, "rate_limited": 0}
    # The history the consumer wrote at its stop: failed attempts 3, of which retried 2.
    points = QueueAdmin(backend.direct(), backend.queue).history(time.time(), 2)
    assert [sum(p[i] for p in points) for i in (1, 2, 3)] == [1, 3, 2]
