"""Checked by mypy in tests/test_tasks_typing.py: a Task keeps its function's types."""

import gq

app = gq.App(url="redis://localhost:6379/0")


@app.task(queue="webhooks", retries=8)
def deliver(url: str, payload: dict[str, object], tenant: str = "-") -> int:
    return 200


@app.task
def send_email(to: str, subject: str) -> None: ...


result = deliver.enqueue("https://example.com/hook", {"event": "paid"}, tenant="acme")
reveal_type(result)  # noqa: F821
reveal_type(result.get())  # noqa: F821
reveal_type(deliver("https://a", {}))  # noqa: F821
reveal_type(deliver.using(after=60).enqueue("https://a", {}))  # noqa: F821
deliver.enqueue(1, 2)  # E: rejected
send_email.delay("a@b", subject=3)  # E: rejected
deliver.s("https://a", {}, tenant="x")
