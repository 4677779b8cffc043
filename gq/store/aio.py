"""The asyncio producer's side of the Redis boundary, for ``gq.aio``."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import redis

from gq.store import servers
from gq.store.base import (
    NOSCRIPT_TRIES,
    UniqueEntry,
    check_client,
    flags,
    flushed,
    full_queue_errors,
    push_batches,
    registered,
    schedule_batches,
    settled,
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
        self._server_ok = type(client).__module__.startswith("fakeredis")

    async def _check_server(self) -> None:
        """As ``ScriptedQueue._check_server``: Redis 6.2 or newer, read once per client."""
        if not self._server_ok:
            await servers.require_supported_async(self.client)
            self._server_ok = True

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
        with full_queue_errors():
            replies = [await self._run("push_unique", keys, args)
                       for keys, args in unique_calls(self.keys, entries, mode)]  # fmt: skip
        return unique_replies(replies)

    async def push_group(self, mode: str, entries: Sequence[GroupEntry]) -> list[bool]:
        """``gq.store.groups.push_group``, awaited."""
        keys, batches = push_group_calls(self.keys, mode, entries)
        with full_queue_errors():
            return flags(await self._run_batches("push_group", keys, batches))

    async def _run(self, name: str, keys: list[str], args: list[Any]) -> Any:
        """As ``RedisQueue._run``: sent again while the script cache is flushed under it."""
        await self._check_server()
        script, args = self._scripts[name], wire(args)
        for _ in range(NOSCRIPT_TRIES - 1):
            try:
                return await script(keys=keys, args=args)
            except redis.exceptions.NoScriptError:
                continue
        return await script(keys=keys, args=args)

    async def _run_batches(self, name: str, keys: list[str], batches: list[list[Any]]) -> list[Any]:
        """As ``RedisQueue._run_batches``: several calls go in one pipeline, except on a
        cluster, whose pipeline cannot run scripts; a call that met a flush goes again alone."""
        if len(batches) == 1 or self.cluster:
            return [await self._run(name, keys, args) for args in batches]
        await self._check_server()
        script = self._scripts[name]
        pipe = self.client.pipeline(transaction=False)
        for args in batches:
            await script(keys=keys, args=wire(args), client=pipe)
        replies = list(await pipe.execute(raise_on_error=False))
        return settled([await self._run(name, keys, args) if flushed(reply) else reply
                        for args, reply in zip(batches, replies)])  # fmt: skip
