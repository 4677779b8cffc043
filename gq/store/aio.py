"""The asyncio producer's side of the Redis boundary, for ``gq.aio``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from gq.store.base import (
    UniqueEntry,
    check_client,
    flags,
    full_queue_errors,
    push_batches,
    registered,
    schedule_batches,
    unique_calls,
    unique_replies,
    wire,
)
from gq.store.groups import GroupEntry, push_group_calls
from gq.store.keys import QueueKeys


class AsyncRedisQueue:
    """The producer's half of ``RedisQueue`` on a ``redis.asyncio`` client, for ``gq.aio``:
    the same scripts, keys, arguments and replies, awaited."""

    def __init__(self, client: Any, name: str) -> None:
        self.cluster = check_client(client, name)
        self.client: Any = client
        self.keys = QueueKeys(name)
        self._scripts = registered(client, ("push", "schedule", "push_unique", "push_group"))

    async def push(self, messages: Sequence[tuple[str, bytes]]) -> list[bool]:
        """``RedisQueue.push``, awaited."""
        keys = self.keys.push_keys
        with full_queue_errors():
            return flags(await self._run_batches("push", keys, push_batches(messages)))

    async def schedule(
        self, entries: Sequence[tuple[str, bytes, float]], *, relative: bool
    ) -> list[bool]:
        """``RedisQueue.schedule``, awaited."""
        keys = self.keys.schedule_keys
        batches = schedule_batches(entries, relative)
        with full_queue_errors():
            return flags(await self._run_batches("schedule", keys, batches))

    async def push_unique(self, entries: Sequence[UniqueEntry], mode: str) -> list[bool | str]:
        """``RedisQueue.push_unique``, awaited."""
        script = self._scripts["push_unique"]
        with full_queue_errors():
            replies = [await script(keys=keys, args=args)
                       for keys, args in unique_calls(self.keys, entries, mode)]  # fmt: skip
        return unique_replies(replies)

    async def push_group(self, mode: str, entries: Sequence[GroupEntry]) -> list[bool]:
        """``gq.store.groups.push_group``, awaited."""
        keys, batches = push_group_calls(self.keys, mode, entries)
        with full_queue_errors():
            return flags(await self._run_batches("push_group", keys, batches))

    async def _run_batches(self, name: str, keys: list[str], batches: list[list[Any]]) -> list[Any]:
        """As ``RedisQueue._run_batches``: several calls go in one pipeline, except on a
        cluster, whose pipeline cannot run scripts."""
        script = self._scripts[name]
        if len(batches) == 1 or self.cluster:
            return [await script(keys=keys, args=wire(args)) for args in batches]
        pipe = self.client.pipeline(transaction=False)
        for args in batches:
            await script(keys=keys, args=wire(args), client=pipe)
        return list(await pipe.execute())
