"""TLS (``rediss://``, certificates checked), a Redis ACL user limited to one queue,
payload limits, no pickle, and no credentials in errors or logs."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import gevent
import gevent.event
import pytest
import redis

import gq
from gq import job as jobs
from gq.store.connection import client_from_url, redact_url
from tests.cli_support import ADMIN, WORKER, env_for, run
from tests.helpers import wait_until
from tests.queue_sides import BothSides
from tests.topologies import HOST, Node, make_certificates, start_node, start_tls_server

ROOT = Path(__file__).resolve().parent.parent


#: The rule docs/deployment.md gives, for queue {emails}, read from the page itself so the
#: documented rule and the tested one cannot drift apart (a new command in a gq script
#: fails these tests until the page names it).
def _documented_acl_commands() -> str:
    page = (ROOT / "docs" / "deployment.md").read_text()
    block = page.split("ACL SETUSER gq-emails", 1)[1].split("```", 1)[0]
    return " ".join(word for word in block.split() if word.startswith("+"))


ACL_COMMANDS = _documented_acl_commands()


def acl_rule(queue: str, password: str) -> list[str]:
    keys = [f"~{queue}*", "~gq:queues"]
    return ["on", f">{password}", "resetkeys", *keys, "resetchannels", f"&{queue}*", "-@all",
            *ACL_COMMANDS.split()]  # fmt: skip


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, dict[str, Path]]]:
    root = tmp_path_factory.mktemp("tls")
    certs = make_certificates(root)
    node = start_tls_server(root, certs)
    try:
        yield node, certs
    finally:
        node.stop()


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """A dedicated redis-server whose users the tests change (never the shared one)."""
    node = start_node(tmp_path_factory.mktemp("acl"), [])
    try:
        yield node
    finally:
        node.stop()


# --------------------------------------------------------------------------- TLS


def test_rediss_with_the_ca_works_and_checks_certificates(
    tls: tuple[Node, dict[str, Path]],
) -> None:
    node, certs = tls
    url = f"rediss://{HOST}:{node.port}/0?ssl_ca_certs={certs['ca']}"
    queue = f"q-{uuid.uuid4().hex[:8]}"
    producer = gq.Producer(queue, url=url)
    try:
        kwargs = producer._queue.client.connection_pool.connection_kwargs
        assert kwargs.get("ssl_cert_reqs", "required") == "required"
        producer.perform(b"over tls")
        assert BothSides(producer._queue.client, queue).counts()["ready"] == 1
        worker = run(WORKER, "builtins:id", "--queue", queue, "--burst",
                     env=env_for(url, None), timeout=30)  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        assert BothSides(producer._queue.client, queue).counts()["ready"] == 0
    finally:
        BothSides(producer._queue.client, queue).delete_queue()
        producer.close()


def test_rediss_without_the_ca_is_refused(tls: tuple[Node, dict[str, Path]]) -> None:
    node, _ = tls
    client = client_from_url(f"rediss://{HOST}:{node.port}/0", socket_connect_timeout=5)
    with pytest.raises(redis.ConnectionError, match="(?i)certificate verify failed"):
        client.ping()
    client.close()
    result = run(
        ADMIN, "stats", "--queue", "q", env=env_for(f"rediss://{HOST}:{node.port}/0", None)
    )
    assert result.returncode == 3, result.stderr
    assert "certificate" in result.stderr


# --------------------------------------------------------------------------- ACL


def test_an_acl_user_limited_to_the_queue_runs_producer_and_worker(server: Node) -> None:
    queue = "{" + f"acl-{uuid.uuid4().hex[:6]}" + "}"
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "gq-user", *acl_rule(queue, "s3cret"))
    url = f"redis://gq-user:s3cret@{HOST}:{server.port}/0"
    producer = gq.Producer(queue, url=url)
    try:
        producer.perform_many([b"a", b"b"])
        producer.perform_after(0, b"c")
        stats = run(ADMIN, "stats", "--queue", queue, env=env_for(url, None))
        assert stats.returncode == 0, stats.stderr
        worker = run(WORKER, "builtins:id", "--queue", queue, "--burst",
                     env=env_for(url, None), timeout=30)  # fmt: skip
        assert worker.returncode == 0, worker.stderr
        # The rule covers the facts, the history and the registry too (docs/metrics.md).
        assert "could not write facts" not in worker.stderr + worker.stdout, worker.stderr
        assert BothSides(admin, queue).counts() == {
            "ready": 0,
            "scheduled": 0,
            "due": 0,
            "dead": 0,
        }
        # The user cannot touch anything else.
        with pytest.raises(redis.exceptions.NoPermissionError):
            producer._queue.client.get("other")
    finally:
        producer.close()
        BothSides(admin, queue).delete_queue()
        admin.close()


def test_an_acl_user_limited_to_the_queue_keeps_and_reads_results_and_groups(
    server: Node, caplog: pytest.LogCaptureFixture
) -> None:
    """The documented rule covers what results and workflows send and call (lib/outcome.lua:
    the slots, the registry's expiry, a group's count and callback, the outcome's
    publish) and the subscription that wakes get()."""
    caplog.set_level(logging.WARNING, logger="gq")
    queue = "{" + f"aclr-{uuid.uuid4().hex[:6]}" + "}"
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "gq-results", *acl_rule(queue, "s3cret"))
    client = client_from_url(f"redis://gq-results:s3cret@{HOST}:{server.port}/0")
    app = gq.App(client=client, queue=queue)

    @app.task(result_ttl=60)
    def double(x: int) -> int:
        return 2 * x

    @app.task(result_ttl=60, retries=0)
    def broken() -> None:
        raise ValueError("no")

    @app.task(result_ttl=60)
    def total(values: list[int]) -> int:
        return sum(values)

    consumer = gq.Consumer(queue, client=client, poller_poll_duration=1.0)
    worker = gevent.spawn(consumer.run, app)
    try:
        kept, failed = double.enqueue(21), broken.enqueue()
        flow = gq.group(double.s(i) for i in range(3)).then(total.s()).enqueue()
        assert kept.get(timeout=10) == 42 and kept.status() == "done"
        with pytest.raises(gq.TaskFailed):
            failed.get(timeout=10)
        assert flow.get(timeout=10) == 6
        # (the one line expected: broken's failure)
        unexpected = [
            r
            for r in caplog.records
            if r.name.startswith("gq") and "ValueError" not in r.getMessage()
        ]
        assert not unexpected, caplog.text
    finally:
        consumer.stop()
        worker.join(timeout=10)
        assert worker.exception is None, worker.exception
        BothSides(admin, queue).delete_queue()
        admin.close()


def test_a_user_without_the_rights_gets_a_clear_error_at_start(server: Node) -> None:
    admin = server.client()
    # Right commands, wrong keys; and right keys, no scripts.
    admin.execute_command("ACL", "SETUSER", "wrong-keys", *acl_rule("{other}", "pw1"))
    admin.execute_command("ACL", "SETUSER", "no-scripts", "on", ">pw2", "~{emails}*", "+@all",
                          "-evalsha", "-eval")  # fmt: skip
    admin.close()
    for user, password in (("wrong-keys", "pw1"), ("no-scripts", "pw2")):
        url = f"redis://{user}:{password}@{HOST}:{server.port}/0"
        producer = gq.Producer("{emails}", url=url)
        with pytest.raises(redis.exceptions.NoPermissionError, match="(?i)permission"):
            producer.perform(b"x")
        producer.close()
        consumer = gq.Consumer("{emails}", url=url)
        with pytest.raises(redis.exceptions.NoPermissionError):
            consumer.run(lambda job: None)
        result = run(WORKER, "builtins:id", "--queue", "{emails}", env=env_for(url, None))
        assert result.returncode == 3, result.stderr
        [line] = [ln for ln in result.stderr.splitlines() if "error:" in ln]
        assert "permission" in line.lower() and password not in result.stderr


def test_a_user_refused_the_due_time_channel_still_enqueues_and_runs_delayed_jobs(
    server: Node, caplog: pytest.LogCaptureFixture
) -> None:
    """The channel that wakes the scheduler is a convenience: an ACL without it loses no
    delayed job (the enqueue script's PUBLISH is guarded) and the worker says once why
    delayed jobs wait for its poll."""
    caplog.set_level(logging.WARNING, logger="gq")
    queue = "{" + f"acln-{uuid.uuid4().hex[:6]}" + "}"
    rule = [part for part in acl_rule(queue, "pw") if part != f"&{queue}*"]
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "no-channels", "reset", *rule)
    url = f"redis://no-channels:pw@{HOST}:{server.port}/0"
    producer = gq.Producer(queue, url=url)
    ran: list[bytes] = []
    consumer = gq.Consumer(queue, url=url, scheduler_poll_interval=0.2,
                           poller_poll_duration=1.0)  # fmt: skip
    worker = gevent.spawn(consumer.run, lambda job: ran.append(job.data))
    try:
        assert producer.perform_after(0.1, b"later")
        wait_until(lambda: ran == [b"later"], timeout=10, message="the delayed job ran")
        refusals = [r for r in caplog.records if "due-time channel" in r.getMessage()]
        assert len(refusals) == 1, caplog.text
    finally:
        consumer.stop()
        worker.join(timeout=10)
        assert worker.exception is None, worker.exception
        producer.close()
        BothSides(admin, queue).delete_queue()
        admin.close()


def _life_user(server: Node, name: str, queue: str, *without: str) -> str:
    """An ACL user with the documented rule for ``queue``, less the ``without`` commands."""
    rule = [part for part in acl_rule(queue, "pw") if part not in without]
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", name, "reset", *rule)
    admin.close()
    return f"redis://{name}:pw@{HOST}:{server.port}/0"


def _fast(consumer: gq.Consumer) -> gq.Consumer:
    opts = consumer.opts
    opts.heartbeat_poll_interval, opts.custodian_consumer_timeout = 0.2, 0.3
    opts.custodian_poll_interval = opts.scheduler_poll_interval = 0.1
    opts.poller_poll_duration, opts.poller_max_backoff = 0.2, 0.1
    return consumer


def _lose_one_fetch_reply(consumer: gq.Consumer) -> None:
    """The next fetch that takes jobs runs in Redis, but its reply is lost."""
    real_fetch = consumer._queue.fetch
    lost: list[object] = []

    def fetch(*args: Any, **kwargs: Any) -> Any:
        fetched = real_fetch(*args, **kwargs)
        if fetched and not lost:
            lost.append(fetched)
            raise redis.ConnectionError("the reply was lost")
        return fetched

    consumer._queue.fetch = fetch  # type: ignore[method-assign]


@pytest.mark.timeout(60)
def test_the_documented_rule_runs_a_whole_consumer_life(server: Node) -> None:
    """Fetch, a lost fetch reply (SMEMBERS), a retry, a kill, a recovery, the custodian's
    tidying (HSCAN) and a graceful stop, all as the user of docs/deployment.md's rule."""
    queue = "{" + f"life-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-life", queue)
    admin = server.client()
    keys = BothSides(admin, queue).keys
    producer = gq.Producer(queue, url=url)
    producer.perform_many(
        [gq.Job(id=i) for i in ("flaky", "doomed", *(f"ok{i}" for i in range(20)))]
    )
    producer.close()
    # A crashed consumer's job for this one's custodian, and a count whose job is gone.
    admin.hset(keys.data, "orphan", jobs.encode(gq.Job(id="orphan")))
    admin.sadd(keys.inflight("ghost"), "orphan")
    admin.zadd(keys.consumers, {keys.inflight("ghost"): 0})
    admin.hset(keys.recovered, "gone", 1)
    done: list[str] = []

    def handler(job: gq.Job) -> None:
        if job.id == "doomed" or (job.id == "flaky" and job.attempt == 0):
            raise RuntimeError("fails")
        done.append(job.id)

    consumer = _fast(gq.Consumer(queue, url=url, job_max_attempts=1, job_max_backoff=0.1))
    _lose_one_fetch_reply(consumer)
    runner = gevent.spawn(consumer.run, handler)
    expected = {"flaky", "orphan", *(f"ok{i}" for i in range(20))}
    wait_until(lambda: set(done) == expected, 30, message="every job done")
    wait_until(lambda: BothSides(admin, queue).counts()["dead"] == 1, 10)
    wait_until(lambda: not admin.hexists(keys.recovered, "gone"), 10)
    consumer.stop()
    runner.join(10)
    assert runner.successful(), runner.exception
    assert sorted(done) == sorted(expected)  # each once: the lost reply's jobs given back
    assert admin.zrange(keys.dead, 0, -1) == [b"doomed"]
    assert admin.zcard(keys.consumers) == 0  # deregistered at the stop
    BothSides(admin, queue).delete_queue()
    admin.close()


@pytest.mark.timeout(60)
def test_the_documented_rule_lets_an_operator_cancel_a_running_job(server: Node) -> None:
    """The canceller checks the running ids against the cancel set (ZMSCORE): a rule without
    it stopped the worker at its first check while a job ran."""
    queue = "{" + f"cancel-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-cancel", queue)
    producer = gq.Producer(queue, url=url)
    producer.perform(gq.Job(id="long"))
    producer.close()
    started, interrupted = gevent.event.Event(), gevent.event.Event()

    def handler(job: gq.Job) -> None:
        started.set()
        try:
            gevent.sleep(30)
        except gq.JobCancelled:
            interrupted.set()
            raise

    consumer = _fast(gq.Consumer(queue, url=url))
    runner = gevent.spawn(consumer.run, handler)
    assert started.wait(10)
    operator = gq.Queue(queue, url=url)
    assert operator.cancel("long") == 1
    assert interrupted.wait(10), runner.exception
    assert not runner.dead, runner.exception  # the canceller was allowed its check
    sides = BothSides(server.client(), queue)
    wait_until(lambda: not sides.client.hexists(sides.keys.data, "long"), 10)  # acknowledged
    consumer.stop()
    runner.join(10)
    assert runner.successful(), runner.exception
    assert sides.counts()["dead"] == 0 and sides.counts()["ready"] == 0  # not retried
    sides.delete_queue()


@pytest.mark.timeout(60)
def test_a_loop_refused_a_command_stops_the_consumer_naming_it(server: Node) -> None:
    queue = "{" + f"perm-{uuid.uuid4().hex[:6]}" + "}"
    url = _life_user(server, "gq-no-smembers", queue, "+smembers")
    producer = gq.Producer(queue, url=url)
    producer.perform_many([b"a", b"b"])
    producer.close()
    consumer = _fast(gq.Consumer(queue, url=url))
    _lose_one_fetch_reply(consumer)  # what follows needs SMEMBERS
    with pytest.raises(gq.PermissionDeniedError) as refused:
        consumer.run(lambda job: None)
    assert refused.value.operation == "SMEMBERS" and refused.value.process == "Poller"
    BothSides(server.client(), queue).delete_queue()


def test_gq_worker_exits_1_when_refused_while_running_and_3_at_start(server: Node) -> None:
    queue = "{" + f"perm-{uuid.uuid4().hex[:6]}" + "}"
    # No HSCAN: the custodian's first pass (tidy) is refused once the worker runs.
    url = _life_user(server, "gq-no-hscan", queue, "+hscan")
    result = run(WORKER, "builtins:id", "--queue", queue, env=env_for(url, None), timeout=30)
    assert result.returncode == 1, result.stderr
    assert "tidy" in result.stderr and "Custodian" in result.stderr
    # No ZADD: the registration, before anything runs, is refused.
    url = _life_user(server, "gq-no-zadd", queue, "+zadd")
    result = run(WORKER, "builtins:id", "--queue", queue, env=env_for(url, None), timeout=30)
    assert result.returncode == 3, result.stderr
    assert "register" in result.stderr and "pw@" not in result.stderr


# --------------------------------------------------------------------------- payload limit


def test_a_message_over_the_limit_is_refused_before_anything_is_written() -> None:
    queue = f"q-{uuid.uuid4().hex[:8]}"
    url = f"fakeredis://{queue}"
    producer = gq.Producer(queue, url=url, max_message_bytes=1000)
    big = gq.Job(id="big", data=b"x" * 1000)
    with pytest.raises(gq.MessageTooLargeError) as caught:
        producer.perform(big)
    assert (caught.value.job, caught.value.limit) == (big, 1000)
    assert caught.value.size > 1000
    with pytest.raises(gq.MessageTooLargeError):
        producer.perform_after(5, big)
    with pytest.raises(gq.MessageTooLargeError):
        producer.perform_many([b"small", big, b"small too"])
    counts = BothSides(producer._queue.client, queue).counts()
    assert counts == {"ready": 0, "scheduled": 0, "due": 0, "dead": 0}
    assert producer.perform(b"x" * 900)
    assert gq.Producer(queue, url=url, max_message_bytes=None).perform(b"x" * 2_000_000)
    with pytest.raises(gq.MessageTooLargeError):  # the default: 1 MiB
        gq.Producer(queue, url=url).perform(b"x" * (1 << 20))
    for bad in (0, -1, 1.5, True, "10"):
        with pytest.raises(gq.ConfigurationError, match="max_message_bytes"):
            gq.Producer(queue, url=url, max_message_bytes=bad)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- hygiene


def test_no_pickle_anywhere_in_the_package() -> None:
    pattern = re.compile(r"\b(c?pickle|marshal|shelve|dill|cloudpickle)\b")
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sorted((ROOT / "gq").rglob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if pattern.search(line) and not line.lstrip().startswith("#")
    ]
    assert offenders == []


@pytest.mark.parametrize("form", ["userinfo", "query", "sentinel", "cluster"])
def test_a_wrong_password_never_shows_in_errors_or_logs(
    server: Node, form: str, caplog: pytest.LogCaptureFixture
) -> None:
    secret = "Wr0ng-Pa55w0rd"
    port = server.port
    url = {
        "userinfo": f"redis://default:{secret}@{HOST}:{port}/0",
        "query": f"redis://{HOST}:{port}/0?password={secret}",
        "sentinel": f"redis+sentinel://:{secret}@{HOST}:{port},{HOST}:1/svc/0",
        "cluster": f"redis+cluster://:{secret}@{HOST}:{port},{HOST}:1/",
    }[form]
    assert secret not in redact_url(url)
    admin = server.client()
    admin.config_set("requirepass", "the-real-one")
    texts: list[str] = []
    try:
        with caplog.at_level(logging.DEBUG):
            try:
                gq.Producer("{emails}", url=url).perform(b"x")
            except Exception as exc:  # noqa: BLE001 - any error: its text is what matters
                texts += [str(exc), repr(exc), str(exc.__cause__), str(exc.__context__)]
            else:
                pytest.fail("a wrong password was accepted")
        result = run(ADMIN, "stats", "--queue", "{emails}", env=env_for(url, None))
        assert result.returncode in (2, 3), result.stderr
        texts += [result.stdout, result.stderr, caplog.text]
    finally:
        with redis.Redis(HOST, port, password="the-real-one") as again:
            again.config_set("requirepass", "")
        admin.close()
    assert not [text for text in texts if secret in text]


def test_the_documented_rule_writes_and_reads_a_running_task_s_progress(server: Node) -> None:
    """current_job().progress() (SET ... PX) and Result.progress() (GET) as the ACL user."""
    queue = "{" + f"aclp-{uuid.uuid4().hex[:6]}" + "}"
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "gq-progress", *acl_rule(queue, "s3cret"))
    client = client_from_url(f"redis://gq-progress:s3cret@{HOST}:{server.port}/0")
    app = gq.App(client=client, queue=queue)
    release = gevent.event.Event()

    @app.task(result_ttl=60)
    def halfway() -> None:
        job = gq.current_job()
        assert job is not None
        job.progress(0.5, "half")
        release.wait(20)

    consumer = gq.Consumer(queue, client=client, poller_poll_duration=1.0)
    worker = gevent.spawn(consumer.run, app)
    try:
        r = halfway.enqueue()
        assert wait_until(r.progress) == (0.5, "half")
        release.set()
        r.get(timeout=10)
    finally:
        release.set()
        consumer.stop()
        worker.join(timeout=10)
        assert worker.exception is None, worker.exception
        BothSides(admin, queue).delete_queue()
        admin.close()


def test_the_documented_rule_adds_runs_pauses_and_removes_a_runtime_schedule(
    server: Node,
) -> None:
    """gq periodic add/pause/remove (HSET, HEXISTS, HDEL) and the worker's read of them
    (HGETALL) as the ACL user."""
    queue = "{" + f"aclpr-{uuid.uuid4().hex[:6]}" + "}"
    admin = server.client()
    admin.execute_command("ACL", "SETUSER", "gq-sched", *acl_rule(queue, "s3cret"))
    client = client_from_url(f"redis://gq-sched:s3cret@{HOST}:{server.port}/0")
    ran: list[str] = []
    consumer = gq.Consumer(queue, client=client, heartbeat_poll_interval=1,
                           poller_poll_duration=1.0)  # fmt: skip
    worker = gevent.spawn(consumer.run, lambda job: ran.append(job.id))
    q = gq.Queue(queue, client=client)
    try:
        q.add_periodic("rt", "stamp", every=1)
        wait_until(lambda: ran, 15, message="an occurrence run")
        q.pause_periodic("rt")
        assert q.periodic_schedules()[0].paused
        assert q.remove_periodic("rt")
    finally:
        consumer.stop()
        worker.join(timeout=10)
        assert worker.exception is None, worker.exception
        BothSides(admin, queue).delete_queue()
        admin.close()
    assert ran[0].startswith("periodic:rt:")
