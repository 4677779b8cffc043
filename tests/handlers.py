"""Handlers for the command-line tests, run by ``gq-worker tests.handlers:NAME``.

Each records what it did in Redis, where the test reads it back: the id of every job it
finished in ``<queue>:test:done`` and of every job it started in ``<queue>:test:started``
(lists, so a job run twice shows up twice). The worker's environment says where:
``GQ_TEST_HANDLER_URL`` (the real server, never a proxy) and ``GQ_QUEUE``.

A job's data is the number of seconds the handler waits (simulated I/O), empty for none.
"""

from __future__ import annotations

import os

import gevent
import redis

import gq

NOT_CALLABLE = 42

_client: redis.Redis | None = None


def _redis() -> redis.Redis:
    global _client
    if _client is None:
        _client = redis.Redis.from_url(os.environ["GQ_TEST_HANDLER_URL"])
    return _client


def _key(what: str) -> str:
    return f"{os.environ['GQ_QUEUE']}:test:{what}"


def _wait(job: gq.Job) -> None:
    if job.data:
        gevent.sleep(float(job.data))


def record(job: gq.Job) -> None:
    """Wait as long as the job says, then record it as done."""
    _redis().rpush(_key("started"), job.id)
    _wait(job)
    _redis().rpush(_key("done"), job.id)


def fail(job: gq.Job) -> None:
    """Record the start, then fail."""
    _redis().rpush(_key("started"), job.id)
    raise RuntimeError(f"job {job.id} failed on purpose")


def hang(job: gq.Job) -> None:
    """Record the start, then never finish (until the process is stopped)."""
    _redis().rpush(_key("started"), job.id)
    gevent.sleep(3600)


# Running at once, over every process: the ids running now (a set) and the most seen.
_ENTER = """
redis.call('SADD', KEYS[1], ARGV[1])
local n = redis.call('SCARD', KEYS[1])
if n > tonumber(redis.call('GET', KEYS[2]) or '0') then redis.call('SET', KEYS[2], n) end
return n
"""


def concurrent(job: gq.Job) -> None:
    """Record how many jobs run at once over all workers (``<queue>:test:running``, a set
    of ids, and ``<queue>:test:peak``), wait as long as the job says, record it as done."""
    client = _redis()
    client.eval(_ENTER, 2, _key("running"), _key("peak"), job.id)
    try:
        record(job)
    finally:
        client.srem(_key("running"), job.id)


def greenlet_exit_first(job: gq.Job) -> None:
    """Raise gevent.GreenletExit at a job's first attempt (a library killing "the current
    greenlet"), record it as done at the next."""
    _redis().rpush(_key("started"), job.id)
    if job.attempt == 0:
        raise gevent.GreenletExit
    _redis().rpush(_key("done"), job.id)


async def async_record(job: gq.Job) -> None:
    """An ``async def`` handler, which gq-worker refuses until async handlers are run."""
    _redis().rpush(_key("done"), job.id)
