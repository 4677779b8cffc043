"""The last hour's throughput as plain SVG geometry, drawn on the server.

No chart library: the page needs three lines over sixty points, which SVG draws natively,
so the chart works without JavaScript, under a strict CSP, and offline.
"""

from __future__ import annotations

from typing import Any

WIDTH, HEIGHT = 1200, 220
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 10, 22
LINES = ("done", "retried", "dead")


def nice_ceiling(value: int) -> int:
    """The smallest 1, 2 or 5 times a power of ten at or above ``value`` (at least 1)."""
    step = 1
    while True:
        for factor in (1, 2, 5):
            if step * factor >= value:
                return step * factor
        step *= 10


def throughput(points: list[dict[str, int]]) -> dict[str, Any]:
    """Polyline points for ``done``, ``retried`` and ``dead`` per minute, and the axis
    labels: a retry is no failure of the job, so it is not drawn as one."""
    peak = nice_ceiling(max([p[kind] for p in points for kind in LINES] + [1]))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(points) - 1)

    def line(kind: str) -> str:
        return " ".join(
            f"{LEFT + i * step:.1f},{TOP + plot_h * (1 - p[kind] / peak):.1f}"
            for i, p in enumerate(points)
        )

    return {
        "width": WIDTH,
        "height": HEIGHT,
        "left": LEFT,
        "right": WIDTH - RIGHT,
        "top": TOP,
        "bottom": TOP + plot_h,
        "middle": TOP + plot_h / 2,
        "peak": peak,
        "half": peak // 2 if peak % 2 == 0 else peak / 2,
        "minutes": len(points),
        **{kind: line(kind) for kind in LINES},
        **{f"total_{kind}": sum(p[kind] for p in points) for kind in LINES},
    }
