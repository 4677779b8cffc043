"""gq's benchmark worker for async tasks: a gq.App whose ``async def`` tasks count
themselves (noop; sleepy awaits asyncio.sleep(BENCH_SLEEP_MS)), stopped once BENCH_N ran.

usage: async_task_worker.py URL QUEUE CONCURRENCY BUFFER
"""

import sys

from gevent import monkey

monkey.patch_all()

import asyncio  # noqa: E402
import json  # noqa: E402

from probe import Probe  # noqa: E402

import gq  # noqa: E402

app = gq.App(queue=sys.argv[2] if len(sys.argv) > 2 else "bench")
probe = Probe()


@app.task(name="noop")
async def noop() -> None:
    probe.start()
    probe.end()


@app.task(name="sleepy")
async def sleepy() -> None:
    probe.start()
    await asyncio.sleep(probe.sleep)
    probe.end()


def main() -> None:
    url, queue, concurrency = sys.argv[1], sys.argv[2], int(sys.argv[3])
    buffer: int | str = "auto" if sys.argv[4] == "auto" else int(sys.argv[4])
    app.connect(url)
    if len(sys.argv) > 5:  # prefill: N jobs of the task named there, then exit
        calls = [()] * int(sys.argv[6])
        for start in range(0, len(calls), 5000):
            (noop if sys.argv[5] == "noop" else sleepy).enqueue_many(calls[start:start + 5000])
        return
    consumer = gq.Consumer(queue, url=url, processor_concurrency=concurrency,
                           poller_buffer_size=buffer)
    probe.on_done = consumer.stop
    print("ready", flush=True)
    consumer.run(app)
    print(json.dumps(probe.result))


if __name__ == "__main__":
    main()
