"""A queue with one live consumer and one gone silent (issue #15 section 3), written exactly
as the worker side writes them: the silent one's heartbeat and facts are 30 s old, so its
3 jobs in flight are due for recovery 90 s from now (lease 120 s). Deterministic: no
process is killed, no time waited."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import redis
from fakeredis import TcpFakeServer

from gq.store.admin import QueueAdmin
from tests.helpers import free_port

SILENT, LIVE = "silent-c0ffee", "live-beef"
SILENT_FOR, LEASE = 30, 120


def facts(consumer_id: str, queue: str, at: float, **counts: Any) -> dict[str, Any]:
    return {
        "id": consumer_id, "host": f"host-{consumer_id[:4]}", "pid": 4242, "started_at": at - 600,
        "version": "1.0", "queues": [queue], "concurrency": 200, "rss_bytes": 80 * 2**20,
        "cpu_percent": 80.0, "updated_at": at, "heartbeat_at": at, "report_interval": 5,
        "heartbeat_interval": 60, "lease_seconds": LEASE, **counts,
    }  # fmt: skip


def one_live_one_silent(client: redis.Redis, queue: str) -> float:
    """Register both consumers; the server's time of the writing."""
    keys = QueueAdmin(client, queue).keys
    seconds, micros = client.time()
    now = seconds + micros / 1e6
    then = now - SILENT_FOR
    client.zadd(keys.consumers, {keys.inflight(LIVE): now, keys.inflight(SILENT): then})
    client.sadd(keys.inflight(SILENT), "job-1", "job-2", "job-3")
    live = facts(LIVE, queue, now, running=2, jobs_done=40, jobs_failed=0,
                 jobs_retried=0, jobs_dead=0)  # fmt: skip
    silent = facts(SILENT, queue, then, running=97, jobs_done=1600, jobs_failed=3,
                   jobs_retried=0, jobs_dead=3)  # fmt: skip
    client.set(keys.facts(LIVE), json.dumps(live), px=600_000)
    client.set(keys.facts(SILENT), json.dumps(silent), px=600_000)
    return now


@contextmanager
def fake_server() -> Iterator[str]:
    """fakeredis behind a TCP port, so that a subprocess (the real ``gq``) can reach it."""
    port = free_port()
    server = TcpFakeServer(("127.0.0.1", port), server_type="redis")
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        server.shutdown()
        server.server_close()
