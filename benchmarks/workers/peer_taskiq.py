"""taskiq with taskiq-redis's stream broker (acknowledged after the task ran)."""
import asyncio
import os
import sys

from probe import Probe
from taskiq_redis import RedisStreamBroker

broker = RedisStreamBroker(os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/7"),
                           queue_name="bench", consumer_group_name="bench")
probe = Probe()


@broker.task(task_name="noop")
async def noop() -> None:
    probe.start()
    probe.end()


@broker.task(task_name="sleepy")
async def sleepy() -> None:
    probe.start()
    await asyncio.sleep(probe.sleep)
    probe.end()


async def enqueue(task: str, n: int) -> None:
    await broker.startup()  # creates the consumer group before the messages
    fn = noop if task == "noop" else sleepy
    for start in range(0, n, 500):
        await asyncio.gather(*(fn.kiq() for _ in range(min(500, n - start))))
    await broker.shutdown()


if __name__ == "__main__":
    asyncio.run(enqueue(sys.argv[2], int(sys.argv[3])))
