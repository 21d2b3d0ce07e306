"""Tokens and cost per turn as a small inline SVG: no script, no external file, no style attribute.

One bar per turn (prompt tokens, with the completion tokens stacked on top) against the left
scale, and the cumulative cost as a line against the right one. The figures are the run's
own (`turn_usage`); cost per turn is taken from the trace's `turn` events when the trace has
them, else priced at the default prices (`harness.usage.Pricing`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from harness.ui.markup import Markup, html, join

W, H = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 56, 64, 12, 28


@dataclass(frozen=True, kw_only=True)
class TurnPoint:
    turn: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    """Cumulative, after this turn."""


def _nice(top: float) -> float:
    """A round upper bound for an axis (1, 2 or 5 times a power of ten)."""
    if top <= 0:
        return 1.0
    power = 10.0 ** math.floor(math.log10(top))
    return next(m * power for m in (1, 2, 5, 10) if m * power >= top)


def svg(points: list[TurnPoint]) -> Markup:
    if not points:
        return html('<p class="muted">No model turn yet.</p>')
    n = len(points)
    plot_w, plot_h = W - LEFT - RIGHT, H - TOP - BOTTOM
    tokens_top = _nice(max(p.prompt_tokens + p.completion_tokens for p in points))
    cost_top = _nice(max(p.cost_usd for p in points)) if points[-1].cost_usd > 0 else 1.0
    slot = plot_w / n
    bar = max(1.0, min(28.0, slot * 0.7))
    parts: list[Markup] = []
    for i, p in enumerate(points):
        x = LEFT + slot * i + (slot - bar) / 2
        h_in = plot_h * p.prompt_tokens / tokens_top
        h_out = plot_h * p.completion_tokens / tokens_top
        y_in = TOP + plot_h - h_in
        tip = (f"turn {p.turn}: {p.prompt_tokens} prompt + {p.completion_tokens} completion tokens, "
               f"${p.cost_usd:.6f} so far")
        parts.append(html('<g><title>{}</title><rect class="in" x="{}" y="{}" width="{}" height="{}"/>'
                          '<rect class="out" x="{}" y="{}" width="{}" height="{}"/></g>',
                          tip, f"{x:.1f}", f"{y_in:.1f}", f"{bar:.1f}", f"{h_in:.1f}",
                          f"{x:.1f}", f"{y_in - h_out:.1f}", f"{bar:.1f}", f"{h_out:.1f}"))
    xy = [(LEFT + slot * i + slot / 2, TOP + plot_h - plot_h * p.cost_usd / cost_top)
          for i, p in enumerate(points)]
    line = " ".join(f"{x:.1f},{y:.1f}" for x, y in xy)
    dots = join(html('<circle class="cost" cx="{}" cy="{}" r="3"/>', f"{x:.1f}", f"{y:.1f}") for x, y in xy)
    every = max(1, n // 10)
    labels = join(html('<text x="{}" y="{}" class="tick" text-anchor="middle">{}</text>',
                       f"{LEFT + slot * i + slot / 2:.1f}", H - BOTTOM + 14, p.turn)
                  for i, p in enumerate(points) if i % every == 0 or i == n - 1)
    return html(
        '<svg class="chart" role="img" viewBox="0 0 {} {}" width="{}" height="{}" '
        'xmlns="http://www.w3.org/2000/svg"><title>{}</title>'
        '<line class="axis" x1="{}" y1="{}" x2="{}" y2="{}"/>'
        '<text class="tick" x="{}" y="{}" text-anchor="end">{}</text>'
        '<text class="tick" x="{}" y="{}" text-anchor="end">0</text>'
        '<text class="tick cost" x="{}" y="{}">{}</text>'
        '{}<polyline class="cost" points="{}"/>{}{}'
        '<text class="tick" x="{}" y="{}" text-anchor="middle">turn</text></svg>',
        W, H, W, H, f"Tokens per turn (bars) and cumulative cost (line) over {n} turns",
        LEFT, TOP + plot_h, W - RIGHT, TOP + plot_h,
        LEFT - 6, TOP + 8, f"{tokens_top:,.0f} tok",
        LEFT - 6, TOP + plot_h,
        W - RIGHT + 6, TOP + 8, f"${cost_top:g}",
        join(parts), line, dots, labels, LEFT + plot_w / 2, H - 2,
    )
