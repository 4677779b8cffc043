"""streaQ: asyncio worker on Redis streams, concurrency=C."""
import asyncio
import os
import sys

from probe import Probe
from streaq import Worker

worker = Worker(redis_url=os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/8"),
                concurrency=int(os.environ.get("BENCH_C", "100")), queue_name="bench")
probe = Probe()


@worker.task
async def noop() -> None:
    probe.start()
    probe.end()


@worker.task
async def sleepy() -> None:
    probe.start()
    await asyncio.sleep(probe.sleep)
    probe.end()


async def enqueue(task: str, n: int) -> None:
    fn = noop if task == "noop" else sleepy
    async with worker:
        for start in range(0, n, 500):
            await worker.enqueue_many([fn.enqueue() for _ in range(min(500, n - start))])


if __name__ == "__main__":
    asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
