"""Regenerate the dashboard screenshots in docs/img/ (shown in README.md).

    python -m tests.dashboard_screenshots

Starts a throwaway redis-server, fills three queues the way running workers would
(jobs, dead jobs with errors, consumers' facts and an hour of throughput history, all
written as the cross-branch contract says), serves the dashboard in-process and saves
PNGs of the main pages with headless Chromium.
"""

from gevent import monkey

monkey.patch_all()

import math  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from pathlib import Path  # noqa: E402

import redis  # noqa: E402

import gq  # noqa: E402
from gq import dashboard, envelope  # noqa: E402
from tests.dashboard_support import (  # noqa: E402
    chromium,
    make_dead,
    serving,
    write_facts,
    write_history,
)
from tests.helpers import start_redis_server, stop_process  # noqa: E402
from tests.queue_sides import BothSides  # noqa: E402

OUT = Path(__file__).resolve().parent.parent / "docs" / "img"
ERRORS = [
    "ConnectionError: smtp.example.com:587 timed out after 30 s",
    "ValueError: invalid address '<script>alert(1)</script>@example'",
    "KeyError: 'template'",
]


def fill(client: redis.Redis) -> None:
    emails = BothSides(client, "emails")
    make_dead(
        emails,
        [
            (b'{"to": "ann@example.com", "template": "welcome"}', ERRORS[0]),
            (b"<script>alert('job data is shown as text')</script>", ERRORS[1]),
            (b"\x93\xa5hello\xcc\xff binary payload", ERRORS[2]),
            (b'{"to": "bob@example.com", "template": "reset"}', ERRORS[0]),
        ],
        attempt=20,
    )
    producer = gq.Producer("emails", client=client)
    producer.perform_many([f'{{"n": {i}}}'.encode() for i in range(1284)])
    for delay in (90, 600, 3600):
        producer.perform_after(delay, b'{"digest": "daily"}')
    gq.Producer("reports", client=client).perform_many([b"r"] * 12)
    gq.Producer("thumbnails", client=client).perform_after(300, b"t")
    for name in ("emails", "reports", "thumbnails"):
        client.sadd("gq:queues", name)
    consumers(client, emails)
    history(client, emails)
    gq.Queue("emails", client=client).set_limits(rate=(200, 1.0), concurrency=100)
    webhooks(client)


def webhooks(client: redis.Redis) -> None:
    """Task jobs (gq.App): dead deliveries with their arguments, and scheduled ones."""
    app = gq.App(client=client, queue="webhooks")

    @app.task(name="hooks.deliver")
    def deliver(url: str, payload: dict[str, object], tenant: str) -> int:
        return 200

    hooks = BothSides(client, "webhooks")
    calls = [
        (["https://shop.example/hooks/paid", {"invoice": 4711, "amount": "19.90"}], "acme"),
        (["https://crm.example/in", {"event": "<script>alert('shown as text')</script>"}], "beta"),
        (["https://api.example/v2/" + "very-long-path/" * 12, {"ids": list(range(40))}], "acme"),
    ]
    dead = [envelope.encode("hooks.deliver", args, {"tenant": t}) for args, t in calls]
    make_dead(hooks, [(dead[0], "gq.Kill: endpoint gone (410)"), (dead[1], ERRORS[0]),
                      (dead[2], "HTTPError: 500 Server Error")], attempt=9)  # fmt: skip
    deliver.using(after=900).enqueue("https://shop.example/hooks/refund", {"n": 1}, tenant="acme")
    client.sadd("gq:queues", "webhooks")


def consumers(client: redis.Redis, emails: BothSides) -> None:
    for i, (host, running) in enumerate([("web-1", 48), ("web-2", 50)]):
        consumer = str(uuid.uuid4())
        emails.register(consumer)
        write_facts(client, "emails", consumer, host=host, pid=3100 + i, running=running,
                    jobs_done=182_311 + 9_000 * i, jobs_failed=37 + i,
                    jobs_retried=35 + i, jobs_dead=2,
                    rss_bytes=(142 + 11 * i) * 1048576, cpu_percent=41.0 + 7 * i)  # fmt: skip
    client.zadd(emails.keys.consumers, {emails.keys.inflight(str(uuid.uuid4())): time.time() - 900})


def history(client: redis.Redis, emails: BothSides) -> None:
    now = int(emails.server_time() // 60) * 60
    per_minute = {}
    for back in range(60):
        minute = now - 60 * back
        done = int(900 + 350 * math.sin(back / 6) + 120 * math.cos(back / 2.3))
        per_minute[minute] = (done, int(12 + 10 * max(0.0, math.sin(back / 4))))
    write_history(client, "emails", per_minute)


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        proc, server = start_redis_server(tmp)
        try:
            client = server.client()
            fill(client)
            browser = chromium(Path(tmp))
            try:
                shoot(browser, client)
            finally:
                browser.quit()
        finally:
            stop_process(proc)


def shoot(browser: object, client: redis.Redis) -> None:
    with serving(dashboard.app(client=client, refresh=0)) as address:
        for page, name, height in [
            ("/", "dashboard-queues.png", 420),
            ("/queues/emails", "dashboard-queue.png", 900),
            ("/queues/emails/dead", "dashboard-dead.png", 640),
            ("/queues/webhooks/dead", "dashboard-dead-tasks.png", 620),
        ]:
            browser.set_window_size(1280, height)  # type: ignore[attr-defined]
            browser.get(f"http://{address}{page}")  # type: ignore[attr-defined]
            browser.save_screenshot(str(OUT / name))  # type: ignore[attr-defined]
            print(OUT / name)


if __name__ == "__main__":
    main()
