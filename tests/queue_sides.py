"""A queue handle with both sides of the Redis boundary, for tests that drive a queue as
a worker or producer (gq.redis_queue) and inspect it as an operator (gq.redis_admin)."""

from __future__ import annotations

from gq.redis_admin import QueueAdmin
from gq.redis_queue import RedisQueue


class BothSides(RedisQueue, QueueAdmin):
    """``RedisQueue`` and ``QueueAdmin`` on one client and one queue name."""
