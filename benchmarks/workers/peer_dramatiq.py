"""Dramatiq: dramatiq-gevent -p 1 -t C, Redis broker, no retries, no results."""
import os
import sys
import time

import dramatiq
from dramatiq.brokers.redis import RedisBroker
from probe import Probe

broker = RedisBroker(url=os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/3"))
dramatiq.set_broker(broker)
probe = Probe()


@dramatiq.actor(max_retries=0, queue_name="bench")
def noop():
    probe.start()
    probe.end()


@dramatiq.actor(max_retries=0, queue_name="bench")
def sleepy():
    probe.start()
    time.sleep(probe.sleep)  # gevent-patched in the worker
    probe.end()


if __name__ == "__main__":
    task, n = sys.argv[2], int(sys.argv[3])
    func = noop if task == "noop" else sleepy
    for _ in range(n):
        func.send()
