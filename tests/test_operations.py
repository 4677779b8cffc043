"""The "Redis operations" describe of curlyq's consumer_test.go, ported case by case.

Each Go helper maps to a BothSides method (one Lua script) or a loop step of the
Consumer: ackJob -> ack, enqueueScheduledJobs -> enqueue_due, getJobs -> fetch,
killJob -> kill, reenqueueActiveJobs -> requeue, reenqueueOrphanedJobs -> one
custodian pass (expired_consumers + recover), registerConsumer -> register,
retryJob -> retry. Where curlyq builds a job's updated message itself (retry, kill),
gq's Processor does, so these tests pass the message the Processor would build.
"""

from __future__ import annotations

import pytest
import redis

import gq
from gq import job as jobs
from gq.backoff import backoff
from gq.job import Job
from gq.store.keys import QueueKeys
from tests.curlyq_state import register_consumer, server_now, stored_job, texts
from tests.helpers import Backend

MINUTE = 60.0
HOUR = 3600.0


@pytest.fixture
def client(backend: Backend) -> redis.Redis:
    return backend.client()


@pytest.fixture
def consumer(backend: Backend, client: redis.Redis) -> gq.Consumer:
    return gq.Consumer(backend.queue, client=client)


@pytest.fixture
def keys(backend: Backend) -> QueueKeys:
    return QueueKeys(backend.queue)


def new_consumer(backend: Backend, client: redis.Redis, **options: object) -> gq.Consumer:
    return gq.Consumer(backend.queue, client=client, **options)


# --------------------------------------------------------------------------- ackJob

JOB_ID = "TestID"
JOB_DATA = b"TestData"


def test_ack_when_this_consumer_owns_the_job_acknowledges_it_removing_it_from_redis(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    client.hset(keys.data, JOB_ID, JOB_DATA)
    client.sadd(consumer.inflight_key, JOB_ID)

    assert consumer._queue.ack(consumer.id, [JOB_ID]) == [True]

    assert client.hget(keys.data, JOB_ID) is None
    assert client.smembers(consumer.inflight_key) == set()


def test_ack_when_this_consumer_does_not_own_the_job_does_not_remove_the_job_data(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    client.hset(keys.data, JOB_ID, JOB_DATA)

    assert consumer._queue.ack(consumer.id, [JOB_ID]) == [False]

    assert client.hget(keys.data, JOB_ID) == b"TestData"


# --------------------------------------------------------------------------- enqueueScheduledJobs


def enqueue_scheduled_jobs(consumer: gq.Consumer) -> int:
    """curlyq's enqueueScheduledJobs: one scheduler pass of at most scheduler_max_jobs."""
    return consumer._queue.enqueue_due(consumer.opts.scheduler_max_jobs)


@pytest.fixture
def some_scheduled_jobs_due(client: redis.Redis, keys: QueueKeys) -> None:
    """job_id-1 and -2 are due (4 and 3 minutes ago), job_id-3 and -4 are not (3, 4 min ahead)."""
    now = server_now(client)
    for i in range(1, 5):
        at = now + i * MINUTE
        if i <= 2:
            at -= 5 * MINUTE
        client.zadd(keys.scheduled, {f"job_id-{i}": at})


@pytest.mark.usefixtures("some_scheduled_jobs_due")
def test_enqueue_due_enqueues_scheduled_jobs_that_are_ready_to_be_run(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    assert enqueue_scheduled_jobs(consumer) == 2

    assert texts(client.lrange(keys.active, 0, -1)) == ["job_id-1", "job_id-2"]
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]
    assert texts(client.zrange(keys.scheduled, 0, -1)) == ["job_id-3", "job_id-4"]


@pytest.mark.usefixtures("some_scheduled_jobs_due")
def test_enqueue_due_when_there_is_already_a_signal_does_not_add_extras(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    client.lpush(keys.signal, 1)

    assert enqueue_scheduled_jobs(consumer) == 2

    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


def test_enqueue_due_when_there_are_no_scheduled_jobs_ready_to_run_does_nothing(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    now = server_now(client)
    for i in range(1, 5):
        client.zadd(keys.scheduled, {f"job_id-{i}": now + i * HOUR})

    assert enqueue_scheduled_jobs(consumer) == 0

    assert texts(client.zrange(keys.scheduled, 0, -1)) == [f"job_id-{i}" for i in range(1, 5)]
    assert client.lrange(keys.active, 0, -1) == []
    assert client.lrange(keys.signal, 0, -1) == []


def test_enqueue_due_when_there_are_more_than_scheduler_max_jobs_ready_enqueues_only_the_maximum(
    backend: Backend, client: redis.Redis, keys: QueueKeys
) -> None:
    consumer = new_consumer(backend, client, scheduler_max_jobs=3)
    now = server_now(client)
    for i in range(1, 5):
        client.zadd(keys.scheduled, {f"job_id-{i}": now - 10 * MINUTE + i * MINUTE})

    assert enqueue_scheduled_jobs(consumer) == 3

    assert texts(client.lrange(keys.active, 0, -1)) == ["job_id-1", "job_id-2", "job_id-3"]
    assert texts(client.zrange(keys.scheduled, 0, -1)) == ["job_id-4"]

    # gq's loop step reports whether the pass was full (so that it repeats at once):
    # this one moves the last job, fewer than scheduler_max_jobs.
    assert consumer.scheduler_step() is False
    assert texts(client.lrange(keys.active, 0, -1)) == [f"job_id-{i}" for i in range(1, 5)]
    assert client.zcard(keys.scheduled) == 0


# --------------------------------------------------------------------------- getJobs


def test_fetch_when_the_consumer_is_not_registered_returns_an_error(
    consumer: gq.Consumer,
) -> None:
    with pytest.raises(redis.ResponseError, match="GQNOTREGISTERED"):
        consumer._queue.fetch(consumer.id, 10)


@pytest.fixture
def registered(consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys) -> None:
    register_consumer(client, keys, consumer.inflight_key, server_now(client))


@pytest.fixture
def four_queued_jobs(client: redis.Redis, keys: QueueKeys) -> None:
    for i in range(4):
        job = Job(id=f"job_id-{i}", data=f"job_data-{i}".encode(), attempt=i)
        client.rpush(keys.active, job.id)
        client.hset(keys.data, job.id, jobs.encode(job))
    client.lpush(keys.signal, 1)


def fetch_jobs(consumer: gq.Consumer, count: int) -> list[Job]:
    """curlyq's getJobs: fetch, then decode every message."""
    fetched = consumer._queue.fetch(consumer.id, count)
    decoded = []
    for job_id, message in fetched:
        assert message is not None, f"no message returned for {job_id}"
        job = jobs.decode(message)
        assert job.id == job_id
        decoded.append(job)
    return decoded


@pytest.mark.usefixtures("registered", "four_queued_jobs")
def test_fetch_when_count_is_at_least_the_queue_length_reserves_all_the_jobs_and_returns_them(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    fetched = fetch_jobs(consumer, 10)

    assert fetched == [
        Job(id=f"job_id-{i}", data=f"job_data-{i}".encode(), attempt=i) for i in range(4)
    ]
    assert client.lrange(keys.active, 0, -1) == []
    assert set(texts(client.smembers(consumer.inflight_key))) == {
        "job_id-0",
        "job_id-1",
        "job_id-2",
        "job_id-3",
    }
    assert client.lrange(keys.signal, 0, -1) == []


@pytest.mark.usefixtures("registered", "four_queued_jobs")
def test_fetch_when_count_is_less_than_the_queue_length_reserves_up_to_count_jobs(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    fetched = fetch_jobs(consumer, 2)

    assert fetched == [
        Job(id=f"job_id-{i}", data=f"job_data-{i}".encode(), attempt=i) for i in range(2)
    ]
    assert texts(client.lrange(keys.active, 0, -1)) == ["job_id-2", "job_id-3"]
    assert set(texts(client.smembers(consumer.inflight_key))) == {"job_id-0", "job_id-1"}
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


@pytest.mark.usefixtures("registered")
def test_fetch_when_there_are_no_jobs_in_the_queue_does_nothing(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    # Not in the Go case: a stale signal, so that "the signal is cleared" can fail.
    client.lpush(keys.signal, 1)

    assert fetch_jobs(consumer, 10) == []

    assert client.lrange(keys.signal, 0, -1) == []
    assert client.exists(consumer.inflight_key) == 0


# --------------------------------------------------------------------------- killJob


def kill_job(consumer: gq.Consumer, job: Job) -> bool:
    """curlyq's killJob: the Processor stores the message with the attempt incremented."""
    updated = Job(id=job.id, data=job.data, attempt=job.attempt + 1)
    return consumer._queue.kill(
        consumer.id,
        job.id,
        jobs.encode(updated),
        dead_max_jobs=consumer.opts.dead_max_jobs,
        dead_max_age=consumer.opts.dead_max_age,
    )


def test_kill_when_this_consumer_owns_the_job_moves_it_to_the_dead_set(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    job = Job(id=JOB_ID, data=JOB_DATA)
    client.hset(keys.data, job.id, jobs.encode(job))
    client.sadd(consumer.inflight_key, job.id)

    assert kill_job(consumer, job) is True

    assert stored_job(client, keys, job.id) == Job(id=JOB_ID, data=JOB_DATA, attempt=1)
    assert texts(client.zrange(keys.dead, 0, -1)) == [JOB_ID]
    assert client.smembers(consumer.inflight_key) == set()


def test_kill_when_this_consumer_does_not_own_the_job_does_not_alter_the_job_data(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    job = Job(id=JOB_ID, data=JOB_DATA)
    client.hset(keys.data, job.id, jobs.encode(job))

    assert kill_job(consumer, job) is False

    assert stored_job(client, keys, job.id).attempt == 0
    assert client.zrange(keys.dead, 0, -1) == []


# --------------------------------------------------------------------------- reenqueueActiveJobs

FOUR_IDS = [f"job_id-{i}" for i in range(4)]


@pytest.fixture
def four_stored_jobs(client: redis.Redis, keys: QueueKeys) -> None:
    for i, job_id in enumerate(FOUR_IDS):
        job = Job(id=job_id, data=f"job_data-{i}".encode(), attempt=i)
        client.hset(keys.data, job_id, jobs.encode(job))


@pytest.mark.usefixtures("four_stored_jobs")
def test_requeue_when_this_consumer_owns_the_jobs_moves_them_back_to_the_active_list(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    client.sadd(consumer.inflight_key, *FOUR_IDS)

    assert consumer._queue.requeue(consumer.id, FOUR_IDS) == 4

    # curlyq only asks for the same ids; gq also keeps their order (SPEC 4, requeue.lua).
    assert texts(client.lrange(keys.active, 0, -1)) == FOUR_IDS
    assert client.smembers(consumer.inflight_key) == set()
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


@pytest.mark.usefixtures("four_stored_jobs")
def test_requeue_when_this_consumer_does_not_own_some_of_the_jobs_moves_only_the_owned_ones(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    client.sadd(consumer.inflight_key, *FOUR_IDS[:2])

    assert consumer._queue.requeue(consumer.id, FOUR_IDS) == 2

    assert texts(client.lrange(keys.active, 0, -1)) == FOUR_IDS[:2]
    assert client.smembers(consumer.inflight_key) == set()
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


# --------------------------------------------------------------------------- reenqueueOrphanedJobs


def recover_orphans(consumer: gq.Consumer) -> int:
    """curlyq's reenqueueOrphanedJobs: one custodian pass; returns the count of jobs moved.

    It runs the real ``custodian_step`` and reads the count from the ``recover`` calls it
    makes (one per lease among the consumers silent long enough to be looked at, none when
    there is none), so the step's composition (which consumers, what lease) is tested too.
    """
    queue = consumer._queue
    original = queue.recover
    counts: list[int] = []

    def recording(*args: object, **kwargs: object) -> int:
        count = original(*args, **kwargs)  # type: ignore[arg-type]
        counts.append(count)
        return count

    queue.recover = recording  # type: ignore[method-assign]
    try:
        full = consumer.custodian_step()
    finally:
        del queue.recover
    assert len(counts) <= 1, counts  # these tests' consumers state no lease: one group
    moved = sum(counts)
    assert full == (moved >= consumer.opts.custodian_max_jobs)
    return moved


def store_orphan_message(client: redis.Redis, keys: QueueKeys, job_id: str) -> None:
    # The Go suite puts bare ids in the in-flight sets; a real in-flight job always has
    # its message, and gq's recover drops ids that have none (see the test below).
    client.hset(keys.data, job_id, jobs.encode(Job(id=job_id, data=job_id.encode())))


def consumer_keys(client: redis.Redis, keys: QueueKeys) -> list[str]:
    return texts(client.zrange(keys.consumers, 0, -1))


def test_recover_orphans_when_there_are_no_registered_consumers_does_nothing(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    assert recover_orphans(consumer) == 0

    assert client.zrange(keys.consumers, 0, -1) == []
    assert client.lrange(keys.active, 0, -1) == []
    assert client.lrange(keys.signal, 0, -1) == []


def test_recover_orphans_when_there_are_no_out_of_date_consumers_does_nothing(
    backend: Backend, consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    now = server_now(client)
    others = [new_consumer(backend, client).inflight_key for _ in range(4)]
    job_ids = [f"job-{i}" for i in range(4)]
    for inflight, job_id in zip(others, job_ids):
        register_consumer(client, keys, inflight, now)
        client.sadd(inflight, job_id)
        store_orphan_message(client, keys, job_id)

    assert recover_orphans(consumer) == 0

    assert sorted(consumer_keys(client, keys)) == sorted(others)
    assert client.lrange(keys.active, 0, -1) == []
    for inflight, job_id in zip(others, job_ids):
        assert texts(client.smembers(inflight)) == [job_id]
    assert client.lrange(keys.signal, 0, -1) == []


class Orphans:
    """Four registered consumers with one job each: 0 and 1 live, 2 and 3 expired (3 oldest)."""

    def __init__(
        self, backend: Backend, consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
    ) -> None:
        opts = consumer.opts
        now = server_now(client)
        self.inflight_sets = [new_consumer(backend, client).inflight_key for _ in range(4)]
        self.job_ids = [f"job-{i}" for i in range(4)]
        for i, (inflight, job_id) in enumerate(zip(self.inflight_sets, self.job_ids)):
            if i < 2:
                seen = now
            else:
                seen = now - opts.custodian_consumer_timeout - opts.heartbeat_poll_interval
                seen -= i * MINUTE
            register_consumer(client, keys, inflight, seen)
            client.sadd(inflight, job_id)
            store_orphan_message(client, keys, job_id)


@pytest.fixture
def orphans(
    backend: Backend, consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> Orphans:
    return Orphans(backend, consumer, client, keys)


def test_recover_orphans_when_some_consumers_are_out_of_date_reschedules_only_their_jobs(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys, orphans: Orphans
) -> None:
    retained, removed = orphans.inflight_sets[:2], orphans.inflight_sets[2:]

    assert recover_orphans(consumer) == 2

    assert sorted(consumer_keys(client, keys)) == sorted(retained)
    assert sorted(texts(client.lrange(keys.active, 0, -1))) == orphans.job_ids[2:]
    for i, inflight in enumerate(retained):
        assert texts(client.smembers(inflight)) == [orphans.job_ids[i]]
    for inflight in removed:
        assert client.smembers(inflight) == set()
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


def test_recover_orphans_only_processes_as_many_jobs_as_it_can_oldest_consumer_first(
    backend: Backend, client: redis.Redis, keys: QueueKeys, orphans: Orphans
) -> None:
    # "When there are more jobs to process than CustodianMaxJobs"
    consumer = new_consumer(backend, client, custodian_max_jobs=3)
    sets, job_ids = orphans.inflight_sets, orphans.job_ids
    client.sadd(sets[2], "extra_job_1")
    client.sadd(sets[3], "extra_job_2")
    store_orphan_message(client, keys, "extra_job_1")
    store_orphan_message(client, keys, "extra_job_2")
    retained, removed, modified = sets[:3], sets[3:], sets[2]

    assert recover_orphans(consumer) == 3

    assert sorted(consumer_keys(client, keys)) == sorted(retained)
    active = texts(client.lrange(keys.active, 0, -1))
    assert len(active) == 3
    assert job_ids[3] in active
    assert "extra_job_2" in active
    assert job_ids[2] in active or "extra_job_1" in active
    for i, inflight in enumerate(retained):
        if inflight != modified:
            assert texts(client.smembers(inflight)) == [job_ids[i]]
    for inflight in removed:
        assert client.smembers(inflight) == set()
    left = texts(client.smembers(modified))
    assert len(left) == 1
    assert left[0] in (job_ids[2], "extra_job_1")
    assert left[0] not in active
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


def test_recover_orphans_leaves_a_consumer_whose_last_job_was_the_final_one_for_a_later_call(
    backend: Backend, client: redis.Redis, keys: QueueKeys, orphans: Orphans
) -> None:
    # "When the final job processed is the last job in a consumer's set"
    consumer = new_consumer(backend, client, custodian_max_jobs=1)
    sets, job_ids = orphans.inflight_sets, orphans.job_ids
    retained, removed = sets[:3], sets[3:]

    assert recover_orphans(consumer) == 1

    assert sorted(consumer_keys(client, keys)) == sorted(sets)
    assert texts(client.lrange(keys.active, 0, -1)) == [job_ids[3]]
    for i, inflight in enumerate(retained):
        assert texts(client.smembers(inflight)) == [job_ids[i]]
    for inflight in removed:
        assert client.smembers(inflight) == set()
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


def test_recover_orphans_when_an_expired_consumer_has_no_jobs_removes_it_and_moves_on(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys, orphans: Orphans
) -> None:
    sets, job_ids = orphans.inflight_sets, orphans.job_ids
    client.delete(sets[2])
    retained, removed = sets[:2], sets[2:]

    assert recover_orphans(consumer) == 1

    assert sorted(consumer_keys(client, keys)) == sorted(retained)
    assert texts(client.lrange(keys.active, 0, -1)) == [job_ids[3]]
    for i, inflight in enumerate(retained):
        assert texts(client.smembers(inflight)) == [job_ids[i]]
    for inflight in removed:
        assert client.smembers(inflight) == set()
    assert texts(client.lrange(keys.signal, 0, -1)) == ["1"]


def test_recover_orphans_drops_an_orphaned_id_that_has_no_message(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys, orphans: Orphans
) -> None:
    # gq only (SPEC 6, bad data): the bare ids of the Go suite would be dropped, not queued.
    client.hdel(keys.data, orphans.job_ids[3])

    assert recover_orphans(consumer) == 2  # moved counts the dropped id too

    assert texts(client.lrange(keys.active, 0, -1)) == [orphans.job_ids[2]]
    assert client.smembers(orphans.inflight_sets[3]) == set()
    assert client.zcard(keys.dead) == 0


# --------------------------------------------------------------------------- registerConsumer


def test_register_when_the_consumer_is_not_registered_adds_it_to_the_consumers_set(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    consumer._queue.register(consumer.id)

    assert consumer_keys(client, keys) == [consumer.inflight_key]


def test_register_when_the_consumer_was_previously_registered_updates_its_last_seen_time(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    before = server_now(client)
    register_consumer(client, keys, consumer.inflight_key, before - 5 * MINUTE)

    written = consumer._queue.register(consumer.id)

    after = server_now(client)
    stored = client.zrange(keys.consumers, 0, -1, withscores=True)
    assert len(stored) == 1
    member, score = stored[0]
    assert member.decode() == consumer.inflight_key
    assert before <= score <= after  # the server's clock, now (Go: later than a minute ago)
    assert written == pytest.approx(score)


# --------------------------------------------------------------------------- retryJob


def retry_job(consumer: gq.Consumer, job: Job) -> bool:
    """curlyq's retryJob: the Processor stores attempt + 1 and picks the backoff delay."""
    updated = Job(id=job.id, data=job.data, attempt=job.attempt + 1)
    delay = backoff(job.attempt, consumer.opts.job_max_backoff)
    return consumer._queue.retry(consumer.id, job.id, jobs.encode(updated), delay)


def test_retry_when_this_consumer_owns_the_job_schedules_it_at_the_backoff_time(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    job = Job(id=JOB_ID, data=JOB_DATA, attempt=6)
    client.hset(keys.data, job.id, jobs.encode(job))
    client.sadd(consumer.inflight_key, job.id)
    before = server_now(client)

    assert retry_job(consumer, job) is True

    after = server_now(client)
    assert stored_job(client, keys, job.id) == Job(id=JOB_ID, data=JOB_DATA, attempt=7)
    scheduled = client.zrange(keys.scheduled, 0, -1, withscores=True)
    assert len(scheduled) == 1
    member, score = scheduled[0]
    assert member.decode() == JOB_ID
    assert before + 32 <= score <= after + 64  # attempt 6 waits 2**6 / 2 to 2**6 seconds
    assert client.smembers(consumer.inflight_key) == set()


def test_retry_when_this_consumer_does_not_own_the_job_does_not_alter_the_job_data(
    consumer: gq.Consumer, client: redis.Redis, keys: QueueKeys
) -> None:
    job = Job(id=JOB_ID, data=JOB_DATA, attempt=6)
    client.hset(keys.data, job.id, jobs.encode(job))

    assert retry_job(consumer, job) is False

    assert stored_job(client, keys, job.id).attempt == 6
    assert client.zrange(keys.scheduled, 0, -1) == []
