"""``python manage.py gq_worker [--backend ALIAS] [gq-worker's flags]``: a gq worker for
the tasks of a ``gq.contrib.django.GQBackend``.

The flags are gq-worker's (``--burst``, ``--concurrency``, ``--queue``...; ``--help``
lists them). Without ``--queue`` the worker serves the backend's ``QUEUES`` with equal
weights. The command replaces itself with ``python -m gq.cli.worker``, so that gevent
patches before Django and the tasks are imported, and signals reach the worker itself.
"""

from __future__ import annotations

import os
import sys
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from gq.contrib.django.worker_args import worker_argv


class Command(BaseCommand):  # type: ignore[misc]  # (Django has no type information)
    help = "Run a gq worker for Django's tasks (gq-worker's flags: see --help)."

    def run_from_argv(self, argv: list[str]) -> None:
        # gq-worker parses the flags: Django's parser would refuse them.
        try:
            args, env = worker_argv(argv[2:], settings.TASKS, dict(os.environ), sys.path[0])
        except ValueError as exc:
            raise CommandError(str(exc)) from exc
        sys.stdout.flush()
        os.execvpe(sys.executable, [sys.executable, "-m", "gq.cli.worker", *args], env)

    def handle(self, *args: Any, **options: Any) -> None:  # pragma: no cover - see above
        raise CommandError("gq_worker runs from the command line (run_from_argv)")
