"""gq's benchmark worker for results and workflows (benchmarks/results.py): one Consumer
running a gq.App whose noop tasks keep their results for TTL seconds (0: none, the
plain ack). With BENCH_N set it stops once that many noop jobs ran (the drain);
without, it serves until SIGTERM (wake-up, chains, groups).

usage: results_worker.py URL QUEUE CONCURRENCY TTL [BUFFER]
(BUFFER: poller_buffer_size, default "auto"; benchmarks/instructions.py sets it)
"""

import os
import signal
import sys

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402

import gevent  # noqa: E402
from probe import Probe  # noqa: E402
from results_app import build  # noqa: E402

import gq  # noqa: E402

probe = Probe()


def main() -> None:
    url, queue, concurrency, ttl = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    given = sys.argv[5] if len(sys.argv) > 5 else "auto"
    buffer: int | str = "auto" if given == "auto" else int(given)
    app = build(queue, ttl, probe)
    app.connect(url)
    consumer = gq.Consumer(
        queue, url=url, processor_concurrency=concurrency, poller_buffer_size=buffer
    )
    serving = "BENCH_N" not in os.environ
    if serving:
        gevent.signal_handler(signal.SIGTERM, consumer.stop)
    else:
        probe.on_done = consumer.stop
    print("ready", flush=True)
    consumer.run(app)
    print(json.dumps(probe.result))


if __name__ == "__main__":
    main()
