"""The task layer's side of the Redis boundary: ``TaskQueue``, a ``RedisQueue`` with the
uniqueness of ``unique_for`` (push_unique.lua) and what ``gq.testing`` needs."""

from __future__ import annotations

from collections.abc import Sequence

from gq.store.base import UniqueEntry, full_queue_errors, unique_calls, unique_replies
from gq.store.jobs import RedisQueue


class TaskQueue(RedisQueue):
    """Queue ``name`` as ``gq.App`` writes task jobs to it."""

    def push_unique(self, entries: Sequence[UniqueEntry], mode: str) -> list[bool | str]:
        """Store and queue ("now") or schedule ("at", "after") each job unless the
        unfinished job holding its uniqueness lock is still there: True where stored,
        False where the id exists, else that job's id (push_unique.lua)."""
        with full_queue_errors():
            replies = [self._run("push_unique", keys, args)
                       for keys, args in unique_calls(self.keys, entries, mode)]  # fmt: skip
        return unique_replies(replies)

    def due_now(self) -> int:
        """Make every scheduled job due at once (gq.testing's drain: retries and
        scheduled jobs run without waiting for their time); how many there were."""
        members = self.client.zrange(self.keys.scheduled, 0, -1)
        if members:
            self.client.zadd(self.keys.scheduled, dict.fromkeys(members, 0), xx=True)
        return len(members)
