"""arq: asyncio worker, max_jobs=C, keep_result=0."""
import asyncio
import os
import sys
from urllib.parse import urlparse

from arq import create_pool
from arq.connections import RedisSettings
from probe import Probe

_url = urlparse(os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/5"))
SETTINGS = RedisSettings(host=_url.hostname, port=_url.port, database=int(_url.path[1:] or 0))
probe = Probe()


async def noop(ctx):
    probe.start()
    probe.end()


async def sleepy(ctx):
    probe.start()
    await asyncio.sleep(probe.sleep)
    probe.end()


class WorkerSettings:
    functions = [noop, sleepy]
    redis_settings = SETTINGS
    max_jobs = int(os.environ.get("BENCH_C", "100"))
    keep_result = 0
    poll_delay = 0.05  # arq polls; its default is 0.5 s


async def enqueue(task: str, n: int) -> None:
    pool = await create_pool(SETTINGS)
    for start in range(0, n, 500):
        await asyncio.gather(*(pool.enqueue_job(task) for _ in range(min(500, n - start))))


if __name__ == "__main__":
    asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
