"""The ceiling: the least Redis and Python work per job that a reliable queue must do,
with redis-py under gevent, against gq's own data layout.

One greenlet loops: one pipeline acknowledges the previous batch (SREM from the in-flight
set, HDEL the messages) and fetches the next (a Lua call: LRANGE + LTRIM + SADD to the
in-flight set + HMGET), then decodes each MessagePack message and calls a noop handler
inline. No per-job greenlet, no timeout, no retry path, no stop protocol.

usage: ceiling_worker.py URL QUEUE BATCH
"""

from gevent import monkey

monkey.patch_all()

import json  # noqa: E402
import sys  # noqa: E402

import msgpack  # noqa: E402
import redis  # noqa: E402
from probe import Probe  # noqa: E402

FETCH = """
local ids = redis.call('LRANGE', KEYS[1], 0, tonumber(ARGV[1]) - 1)
if #ids == 0 then return {} end
redis.call('LTRIM', KEYS[1], #ids, -1)
redis.call('SADD', KEYS[2], unpack(ids))
return redis.call('HMGET', KEYS[3], unpack(ids))
"""


def main() -> None:
    url, queue, batch = sys.argv[1], sys.argv[2], int(sys.argv[3])
    client = redis.Redis.from_url(url)
    active, data, inflight = f"{queue}:active", f"{queue}:data", f"{queue}:inflight:ceiling"
    fetch = client.register_script(FETCH)
    probe = Probe()
    done: list[bytes] = []
    while probe.result is None:
        pipe = client.pipeline(transaction=False)
        if done:
            pipe.srem(inflight, *done)
            pipe.hdel(data, *done)
        fetch(keys=[active, inflight, data], args=[batch], client=pipe)
        messages = pipe.execute()[-1]
        done = []
        for message in messages:
            fields = msgpack.unpackb(message, raw=True)
            probe.start()
            probe.end()
            done.append(fields[b"ID"])
    if done:
        client.srem(inflight, *done)
        client.hdel(data, *done)
    print(json.dumps(probe.result))


if __name__ == "__main__":
    main()
