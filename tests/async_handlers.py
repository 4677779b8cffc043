"""``async def`` handlers for the command-line tests (``gq-worker tests.async_handlers:NAME``).

Like tests/handlers.py, they record in Redis what they did, here with redis.asyncio: the
id of every job finished in ``<queue>:test:done`` and the most coroutines seen running at
once in ``<queue>:test:most``. A job's data is the seconds it awaits, empty for none.
"""

from __future__ import annotations

import asyncio
import os

import redis.asyncio

import gq

_clients: list[redis.asyncio.Redis] = []
_running = {"now": 0}


def _redis() -> redis.asyncio.Redis:
    if not _clients:  # made on the worker's loop, by the first job
        _clients.append(redis.asyncio.Redis.from_url(os.environ["GQ_TEST_HANDLER_URL"]))
    return _clients[0]


def _key(what: str) -> str:
    return f"{os.environ['GQ_QUEUE']}:test:{what}"


async def record(job: gq.Job) -> None:
    """Await as long as the job says, then record it as done."""
    _running["now"] += 1
    try:
        most = int(await _redis().get(_key("most")) or 0)
        if _running["now"] > most:
            await _redis().set(_key("most"), _running["now"])
        if job.data:
            await asyncio.sleep(float(job.data))
        await _redis().rpush(_key("done"), job.id)
    finally:
        _running["now"] -= 1
