"""The command line ``manage.py gq_worker`` hands to ``gq-worker`` (no Django imports:
unit-tested on its own)."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

HANDLER = "gq.contrib.django.worker:app"
BACKEND_FLAG = "--backend"
ENV_BACKEND = "GQ_DJANGO_BACKEND"


def worker_argv(
    flags: list[str], tasks: Mapping[str, Any], environ: dict[str, str], project: str
) -> tuple[list[str], dict[str, str]]:
    """gq-worker's arguments and environment for ``flags`` (``--backend ALIAS`` is
    ours); ``ValueError`` when the alias names no backend of ``TASKS``."""
    alias, rest = _backend_flag(flags)
    if alias not in tasks:
        raise ValueError(f"TASKS has no backend {alias!r} (--backend)")
    queues = list(tasks[alias].get("QUEUES") or ["default"])
    helps = "-h" in rest or "--help" in rest
    given = any(f == "--queue" or f.startswith("--queue=") for f in rest)
    if not given and not helps:
        rest = [*rest, *(part for q in queues for part in ("--queue", f"{q}:1"))]
    env = dict(environ, **{ENV_BACKEND: alias})
    # The project's directory (manage.py's), so that the worker imports its modules.
    env["PYTHONPATH"] = os.pathsep.join(p for p in (project, environ.get("PYTHONPATH")) if p)
    return [HANDLER, *rest], env


def _backend_flag(flags: list[str]) -> tuple[str, list[str]]:
    alias, rest, i = "default", [], 0
    while i < len(flags):
        flag = flags[i]
        if flag == BACKEND_FLAG:
            if i + 1 >= len(flags):
                raise ValueError("--backend needs a TASKS alias")
            alias, i = flags[i + 1], i + 2
            continue
        if flag.startswith(BACKEND_FLAG + "="):
            alias = flag.split("=", 1)[1]
        else:
            rest.append(flag)
        i += 1
    return alias, rest
