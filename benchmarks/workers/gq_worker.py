"""gq's benchmark worker: one Consumer in this process, stopped once BENCH_N jobs ran.

usage: gq_worker.py URL QUEUE CONCURRENCY BUFFER [latency]
"""

import os
import sys

if os.environ.get("BENCH_NO_HIREDIS"):
    sys.modules["hiredis"] = None  # type: ignore[assignment]  # redis-py's pure-Python parser

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import time  # noqa: E402

import gevent  # noqa: E402
from probe import Probe  # noqa: E402

import gq  # noqa: E402

try:  # `--before REV` runs this file on a gq older than the gq/worker/ layout
    from gq.worker import watchdog  # noqa: E402
except ImportError:
    from gq import watchdog  # type: ignore[no-redef]  # noqa: E402

if os.environ.get("BENCH_NO_WATCHDOG"):  # gevent's monitor thread (and its tracer) off
    watchdog.enable = lambda hub_block_warning: False  # type: ignore[assignment]


def main() -> None:
    url, queue, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    buffer: int | str = "auto" if sys.argv[4] == "auto" else int(sys.argv[4])
    latency = len(sys.argv) > 5 and sys.argv[5] == "latency"
    probe = Probe()
    sleep = probe.sleep

    def handler(job: gq.Job) -> None:
        probe.start()
        if sleep:
            gevent.sleep(sleep)
        probe.end(time.time() - float(job.data) if latency else None)

    consumer = gq.Consumer(
        queue, url=url, processor_concurrency=concurrency, poller_buffer_size=buffer
    )
    if os.environ.get("BENCH_METRICS"):  # metrics_cost.py: count as --metrics-port does
        from gq import metrics

        metrics.enable(consumer, histograms=os.environ["BENCH_METRICS"] != "counters")
    probe.on_done = consumer.stop
    # Tell the parent we are about to take jobs (the latency runs wait for this line).
    print("ready", flush=True)
    consumer.run(handler)
    print(json.dumps(probe.result))


if __name__ == "__main__":
    main()
