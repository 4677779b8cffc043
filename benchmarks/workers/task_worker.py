"""gq's benchmark worker for tasks: one Consumer running a gq.App whose noop task counts
itself, stopped once BENCH_N jobs ran (the twin of gq_worker.py's noop byte handler).

usage: task_worker.py URL QUEUE CONCURRENCY BUFFER
BENCH_HOOKS=after adds one noop after_job hook, =around one noop before_job context
manager (benchmarks/hooks.py).
"""

import os
import sys

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402

from probe import Probe  # noqa: E402

import gq  # noqa: E402

app = gq.App(queue=sys.argv[2] if len(sys.argv) > 2 else "bench")
probe = Probe()


@app.task(name="noop")
def noop(n: int) -> None:
    probe.start()
    probe.end()


def add_hooks(kind: str) -> None:
    if kind == "after":
        app.after_job(lambda attempt: None)
    elif kind == "around":
        from contextlib import nullcontext

        app.before_job(lambda attempt: nullcontext())


def main() -> None:
    url, queue, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    buffer: int | str = "auto" if sys.argv[4] == "auto" else int(sys.argv[4])
    add_hooks(os.environ.get("BENCH_HOOKS", ""))
    app.connect(url)
    consumer = gq.Consumer(
        queue, url=url, processor_concurrency=concurrency, poller_buffer_size=buffer
    )
    probe.on_done = consumer.stop
    print("ready", flush=True)
    consumer.run(app)
    print(json.dumps(probe.result))


if __name__ == "__main__":
    main()
