"""Handlers of the group process tests, run by ``gq-worker tests.group_handlers:per_group``.

The group is the part of a job's id before its last "-" (tests/group_support.py). Each
job records, over every process, the ids of its group running now
(``<queue>:test:running:<group>``, a set) and the most seen at once
(``<queue>:test:peaks``, group -> count), waits as long as its data says, and records
itself as done as tests/handlers.py does.
"""

from __future__ import annotations

import gq
from tests import handlers

_ENTER = """
redis.call('SADD', KEYS[1], ARGV[1])
local n = redis.call('SCARD', KEYS[1])
if n > tonumber(redis.call('HGET', KEYS[2], ARGV[2]) or '0') then
  redis.call('HSET', KEYS[2], ARGV[2], n)
end
return n
"""


def per_group(job: gq.Job) -> None:
    group = job.id.rsplit("-", 1)[0]
    client = handlers._redis()
    running = handlers._key(f"running:{group}")
    client.eval(_ENTER, 2, running, handlers._key("peaks"), job.id, group)
    try:
        handlers.record(job)
    finally:
        client.srem(running, job.id)
