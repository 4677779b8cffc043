"""saq: asyncio worker, concurrency=C."""
import asyncio
import os
import sys

from probe import Probe
from redis.asyncio import Redis
from saq.queue.redis import RedisQueue

# redis-py caps a pool at 100 connections by default, too few for concurrency=1000.
queue = RedisQueue(
    Redis.from_url(os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/6"), max_connections=5000),
    name="bench",
)
probe = Probe()


async def noop(ctx):
    probe.start()
    probe.end()


async def sleepy(ctx):
    probe.start()
    await asyncio.sleep(probe.sleep)
    probe.end()


settings = {
    "queue": queue,
    "functions": [noop, sleepy],
    "concurrency": int(os.environ.get("BENCH_C", "100")),
}


async def enqueue(task: str, n: int) -> None:
    for start in range(0, n, 500):
        await asyncio.gather(*(queue.enqueue(task) for _ in range(min(500, n - start))))


if __name__ == "__main__":
    asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
