"""A minimal Django project whose tasks run on gq: $GQ_DJANGO_URL is its Redis (a
database of its own: the tests empty it)."""

import os

SECRET_KEY = "tests-only"
USE_TZ = True
INSTALLED_APPS = ["gq.contrib.django", "shop"]
# A file (the tests give one per run): Django never closes an in-memory SQLite database.
DATABASES = {
    "default": {
        "ENGINE": "django.db.backends.sqlite3",
        "NAME": os.environ.get("GQ_DJANGO_DB", ":memory:"),
    }
}
TASKS = {
    "default": {
        "BACKEND": "gq.contrib.django.GQBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {
            "url": os.environ.get("GQ_DJANGO_URL", "redis://127.0.0.1:6379/9"),
            "retries": 1,
            "backoff": 0.05,
        },
    },
    # Keeps no results: get_result is not supported there.
    "nokeep": {
        "BACKEND": "gq.contrib.django.GQBackend",
        "OPTIONS": {
            "url": os.environ.get("GQ_DJANGO_URL", "redis://127.0.0.1:6379/9"),
            "RESULT_TTL": 0,
        },
    },
}
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "loggers": {"django.tasks": {"level": "INFO"}},
}
