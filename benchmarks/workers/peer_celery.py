"""Celery: worker -P gevent, acks_late, results off."""
import os
import sys
import time

from celery import Celery
from probe import Probe

app = Celery("peer_celery", broker=os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/2"))
app.conf.update(
    task_acks_late=True,
    task_ignore_result=True,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    task_default_queue="bench",
)
probe = Probe()


@app.task
def noop():
    probe.start()
    probe.end()


@app.task
def sleepy():
    probe.start()
    time.sleep(probe.sleep)  # gevent-patched in the worker
    probe.end()


if __name__ == "__main__":
    task, n = sys.argv[2], int(sys.argv[3])
    func = noop if task == "noop" else sleepy
    with app.producer_or_acquire() as producer:
        for _ in range(n):
            func.apply_async(producer=producer)
