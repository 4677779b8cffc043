"""A queue handle with both sides of the Redis boundary, for tests that drive a queue as
a worker or producer (gq.store.jobs) and inspect it as an operator (gq.store.admin)."""

from __future__ import annotations

from gq.store.admin import QueueAdmin
from gq.store.jobs import RedisQueue


class BothSides(RedisQueue, QueueAdmin):
    """``RedisQueue`` and ``QueueAdmin`` on one client and one queue name."""
