"""A plain (not gevent-patched) program that waits for results from OS threads and from
asyncio (``python -m tests.results_client URL QUEUE``), while a gq-worker runs the jobs:
SPEC section 16's get() in threads and aget() under asyncio. Prints one JSON object."""

from __future__ import annotations

import asyncio
import json
import sys
import threading

from tests.workflow_app import build


def main() -> None:
    url, queue = sys.argv[1], sys.argv[2]
    app = build(queue, url)
    echo = app.tasks["echo"]
    threaded = [echo.enqueue(i) for i in range(8)]
    got: dict[int, object] = {}

    def wait(index: int) -> None:
        got[index] = threaded[index].get(timeout=30)

    threads = [threading.Thread(target=wait, args=(i,)) for i in range(len(threaded))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(40)

    async def awaited() -> list[object]:
        rs = [await echo.aenqueue(f"a{i}") for i in range(4)]
        return list(await asyncio.gather(*(r.aget(timeout=30) for r in rs)))

    print(json.dumps({"threads": [got.get(i) for i in range(len(threaded))],
                      "asyncio": asyncio.run(awaited()),
                      "thread_names": [t.name for t in threading.enumerate()]}))


if __name__ == "__main__":
    main()
