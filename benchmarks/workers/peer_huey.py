"""huey: huey_consumer -k greenlet -w C (monkey-patched by the launcher), results off."""
import os
import sys
import time

from huey import RedisHuey
from probe import Probe
from redis import ConnectionPool

# redis-py 8 caps a pool at 100 connections by default; huey's greenlets each take one.
_pool = ConnectionPool.from_url(os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/4"),
                                max_connections=20000)
huey = RedisHuey("bench", connection_pool=_pool, results=False)
probe = Probe()


@huey.task()
def noop():
    probe.start()
    probe.end()


@huey.task()
def sleepy():
    probe.start()
    time.sleep(probe.sleep)  # gevent-patched in the worker
    probe.end()


if __name__ == "__main__":
    task, n = sys.argv[2], int(sys.argv[3])
    import peer_huey as tasks  # named by module, not __main__

    func = tasks.noop if task == "noop" else tasks.sleepy
    for _ in range(n):
        func()
