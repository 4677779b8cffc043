"""curlyq's own Lua scripts, read from its Go source at test time, run as curlyq runs them.

curlyq's Go code loads each script with ``loadLua("/lua/<name>.lua")`` (go:embed of the
``lua/`` folder of the shared tree): the names come from those calls, the text from the
files they name, so the oracle runs exactly what a Go consumer sends. Where the shared tree
is missing the tests skip, or fail under ``GQ_REQUIRE_INTEROP=1``, as the interop tests do.
The arguments mirror curlyq's consumer.go and producer.go: times are whole unix seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

import redis
from redis.commands.core import Script

from tests.interop.golang import CURLYQ, shared_go_tree, unavailable

_LOAD = re.compile(r'loadLua\("/lua/([a-z_]+)\.lua"\)')


def curlyq_dir() -> Path:
    tree = shared_go_tree() / CURLYQ
    if not tree.is_dir():
        unavailable(f"the curlyq source tree is missing: {tree} (set GQ_SHARED_DIR)")
    return tree


def load_scripts() -> dict[str, str]:
    """{name: Lua source} of every script curlyq's Go code loads."""
    tree = curlyq_dir()
    names = {name for go in tree.glob("*.go") for name in _LOAD.findall(go.read_text())}
    return {name: (tree / "lua" / f"{name}.lua").read_text() for name in sorted(names)}


class Curlyq:
    """One curlyq queue ``name`` on ``client``, driven through curlyq's scripts."""

    def __init__(self, client: redis.Redis, name: str, sources: dict[str, str]) -> None:
        self.client = client
        self.k = {part: f"{name}:{part}" for part in
                  ("active", "consumers", "dead", "data", "scheduled", "signal")}  # fmt: skip
        self.name = name
        self.scripts: dict[str, Script] = {n: client.register_script(s) for n, s in sources.items()}

    def inflight(self, consumer: str) -> str:
        return f"{self.name}:inflight:{consumer}"

    def _run(self, script: str, keys: list[str], args: list[object]) -> object:
        return self.scripts[script](keys=keys, args=args)

    def push(self, job_id: str, message: bytes) -> bool:
        k = self.k
        return self._run("push_job", [k["data"], k["active"], k["signal"]], [job_id, message]) == 1

    def schedule(self, job_id: str, message: bytes, at: int) -> bool:
        keys = [self.k["data"], self.k["scheduled"]]
        return self._run("schedule_job", keys, [job_id, message, float(at)]) == 1

    def register(self, consumer: str, now: int) -> None:
        self._run("register_consumer", [self.k["consumers"]], [float(now), self.inflight(consumer)])

    def fetch(self, consumer: str, count: int) -> list[bytes]:
        k = self.k
        keys = [k["consumers"], k["active"], self.inflight(consumer), k["data"], k["signal"]]
        return list(self._run("get_jobs", keys, [count, self.inflight(consumer)]))  # type: ignore[call-overload]

    def ack(self, consumer: str, job_id: str) -> bool:
        return self._run("ack_job", [self.inflight(consumer), self.k["data"]], [job_id]) == 1

    def retry(self, consumer: str, job_id: str, at: int, message: bytes) -> bool:
        keys = [self.inflight(consumer), self.k["scheduled"], self.k["data"]]
        return self._run("retry_job", keys, [job_id, float(at), message]) == 1

    def kill(self, consumer: str, job_id: str, now: int, message: bytes) -> bool:
        keys = [self.inflight(consumer), self.k["dead"], self.k["data"]]
        return self._run("kill_job", keys, [job_id, float(now), message]) == 1

    def requeue(self, consumer: str, ids: list[str]) -> None:
        keys = [self.inflight(consumer), self.k["active"], self.k["signal"]]
        self._run("reenqueue_active_jobs", keys, list(ids))

    def enqueue_due(self, now: int, limit: int) -> int:
        keys = [self.k["scheduled"], self.k["active"], self.k["signal"]]
        return int(self._run("enqueue_scheduled_jobs", keys, [float(now), limit]))  # type: ignore[call-overload]

    def recover(self, expired_before: int, limit: int) -> int:
        keys = [self.k["consumers"], self.k["active"], self.k["signal"]]
        return int(self._run("reenqueue_orphaned_jobs", keys, [float(expired_before), limit]))  # type: ignore[call-overload]
