"""gq through its task API: ``@app.task`` tasks enqueued with ``enqueue_many``, run by
``gq-worker peer_gq:app`` (the app's queue, default settings but C and the buffer)."""
import os
import sys
import time

from probe import Probe

import gq

app = gq.App(url=os.environ.get("BENCH_URL", "redis://127.0.0.1:6379/7"), queue="bench")
probe = Probe()


@app.task(name="bench.noop")
def noop() -> None:
    probe.start()
    probe.end()


@app.task(name="bench.sleepy")
def sleepy() -> None:
    probe.start()
    time.sleep(probe.sleep)  # gevent-patched: gq-worker patches before it imports the app
    probe.end()


if __name__ == "__main__":
    task, n = sys.argv[2], int(sys.argv[3])
    func = noop if task == "noop" else sleepy
    for first in range(0, n, 1000):
        func.enqueue_many([()] * min(1000, n - first))
