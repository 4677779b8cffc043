"""gq as a backend of Django's own tasks framework (``django.tasks``, Django 6; Python
3.12 or newer): ``pip install 'gq[django]'``, then in settings::

    INSTALLED_APPS = [..., "gq.contrib.django"]     # for `python manage.py gq_worker`
    TASKS = {
        "default": {
            "BACKEND": "gq.contrib.django.GQBackend",
            "QUEUES": ["default", "emails"],
            "OPTIONS": {"url": "redis://localhost:6379/0", "retries": 3},
        }
    }

Django's ``@task`` functions and ``.enqueue()`` then run on gq's worker, started with
``python manage.py gq_worker`` (gq-worker's flags, ``--burst`` included). See
docs/integrations.md.
"""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: Django imports this package as an app before its settings allow tasks.
    if name in ("GQBackend", "GQTask"):
        from gq.contrib.django import backend

        return getattr(backend, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
