"""Logging for the commands: text or JSON lines on stderr, with credentials scrubbed.

The library only names its loggers (``gq.*``); the command configures the root logger,
so a handler's own log lines come out in the same format. Whatever a line says, the
password of the Redis URL never reaches the output: every formatter replaces it.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import datetime, timezone
from typing import Any, TextIO

from gq.store.topology import hide
from gq.store.topology import url_secrets as url_secrets  # (the commands' import)
from gq.tasks.joblog import FIELDS, JobFields, suffix

LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")
FORMATS = ("text", "json")

TEXT_FORMAT = "%(asctime)s %(levelname)-7s %(name)s: %(message)s"

#: ``scrub(text, url_secrets(url))``: the one scrubber, shared with the store's errors.
scrub = hide


class TextFormatter(logging.Formatter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__(TEXT_FORMAT)
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        # The job a line is about (gq.tasks.joblog) after its first line, before a traceback.
        first, newline, rest = text.partition("\n")
        return scrub(first + suffix(record) + newline + rest, self.secrets)


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time (UTC, ISO 8601), level, logger, message, pid, exc,
    and for a line about a job its ``job_id``, ``task`` and ``queue``."""

    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = secrets

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, timezone.utc).isoformat(),
            "level": record.levelname,
            "logger": record.name,
            "message": scrub(record.getMessage(), self.secrets),
            "pid": record.process,
        }
        for name in FIELDS:  # the job the line is about (gq.tasks.joblog)
            value = getattr(record, name, None)
            if value is not None:
                entry[name[3:]] = scrub(value, self.secrets)
        if record.exc_info:
            entry["exc"] = scrub(self.formatException(record.exc_info), self.secrets)
        return json.dumps(entry, ensure_ascii=False)


def configure(
    level: str = "INFO",
    fmt: str = "text",
    secrets: list[str] | None = None,
    stream: TextIO | None = None,
) -> None:
    """Send every log record at ``level`` or above to ``stream`` (stderr) in ``fmt``."""
    handler = logging.StreamHandler(stream or sys.stderr)
    # A lock of the OS, not gevent's: native threads log too (the thread heartbeat, the hub
    # monitor), and a gevent lock taken by one of them while a greenlet waits for it could
    # leave that greenlet waiting for good (seen: the ticker, right after a SIGCONT).
    handler.lock = _os_rlock()
    secrets = list(secrets or [])
    handler.addFilter(JobFields())
    handler.setFormatter(JsonFormatter(secrets) if fmt == "json" else TextFormatter(secrets))
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.captureWarnings(True)


def _os_rlock() -> Any:
    try:
        from gevent import monkey
    except ImportError:  # pragma: no cover - gevent is a dependency
        import threading

        return threading.RLock()
    return monkey.get_original("threading", "RLock")()
