"""What ``python manage.py gq_worker`` runs: ``gq-worker gq.contrib.django.worker:app``,
imported after gq-worker's gevent patching (so Django, and everything the tasks import,
cooperate with gevent). Sets Django up, imports the ``tasks`` module of every installed
app (their ``@task`` functions register themselves as gq tasks), and exposes the app of
the backend ``$GQ_DJANGO_BACKEND`` (``default``)."""

from __future__ import annotations

import os

import django

django.setup()

from django.tasks import task_backends  # noqa: E402
from django.utils.module_loading import autodiscover_modules  # noqa: E402

from gq.contrib.django.backend import GQBackend  # noqa: E402

ENV_BACKEND = "GQ_DJANGO_BACKEND"

autodiscover_modules("tasks")
_backend = task_backends[os.environ.get(ENV_BACKEND, "default")]
if not isinstance(_backend, GQBackend):
    raise SystemExit(f"gq_worker: TASKS[{_backend.alias!r}] is not gq.contrib.django.GQBackend")
app = _backend.app
