"""RQ: tasks and enqueue. Worker: rq worker --worker-class rq.worker.SimpleWorker (no fork)."""
import sys
import time

from probe import Probe

probe = Probe()


def noop():
    probe.start()
    probe.end()


def sleepy():
    probe.start()
    time.sleep(probe.sleep)
    probe.end()


if __name__ == "__main__":
    from redis import Redis
    from rq import Queue

    url, task, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    queue = Queue("bench", connection=Redis.from_url(url))
    import peer_rq as tasks  # named by module, not __main__

    func = tasks.noop if task == "noop" else tasks.sleepy
    for start in range(0, n, 1000):
        queue.enqueue_many(
            [Queue.prepare_data(func, result_ttl=0, ttl=3600) for _ in range(min(1000, n - start))]
        )
