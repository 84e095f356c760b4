"""Inline SVG bar charts for the report: linear axes from 0, ticks in a unit that fits.

Hand-written so the report stays one self-contained file and every axis is what it says: no
log scale (small bars would look empty), no negative ticks, each bar's value printed at its
end so even a bar one pixel long can be read.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from html import escape

from services.scan.report.format import byte_unit, human_bytes, human_count

FONT = "font-family='sans-serif' font-size='12'"
WIDTH = 820
ROW = 24
#: Series colours: BookKeeper blue, offload orange (also for ledgers vs objects).
BLUE, ORANGE, RED = "#3b6ea8", "#e39c37", "#b03030"


@dataclass(frozen=True)
class Axis:
    """Ticks in display units; `scale` turns a raw value into display units."""

    ticks: tuple[float, ...]
    scale: float
    unit: str

    @property
    def top(self) -> float:
        return self.ticks[-1]

    def label(self, tick: float) -> str:
        text = f"{int(tick):,}" if tick == int(tick) else f"{tick:g}"
        return f"{text} {self.unit}".strip()


def nice_ticks(maximum: float, *, integer: bool = False, count: int = 5) -> tuple[float, ...]:
    """0, step, 2·step, ... up to the first tick ≥ maximum; step is 1, 2 or 5 × 10^k."""
    if maximum <= 0:
        return (0.0, 1.0)
    raw = maximum / count
    magnitude = 10 ** math.floor(math.log10(raw))
    step = next(m * magnitude for m in (1, 2, 5, 10) if m * magnitude >= raw)
    if integer:
        step = max(1.0, math.ceil(step))
    steps = math.ceil(maximum / step - 1e-9)
    return tuple(round(i * step, 10) for i in range(steps + 1))


def count_axis(maximum: float) -> Axis:
    return Axis(nice_ticks(maximum, integer=True), 1.0, "")


def bytes_axis(maximum: float) -> Axis:
    """Ticks in the binary unit of the largest value (MiB data gets a MiB axis)."""
    unit, scaled = byte_unit(maximum)
    scale = scaled / maximum if maximum else 1.0
    return Axis(nice_ticks(scaled), scale, unit)


@dataclass(frozen=True)
class Series:
    name: str
    color: str


def _legend(series: Sequence[Series], x: float, y: float) -> str:
    parts = []
    for s in series:
        parts.append(
            f"<rect x='{x:.0f}' y='{y - 10:.0f}' width='12' height='12' fill='{s.color}'/>"
            f"<text x='{x + 16:.0f}' y='{y:.0f}' {FONT}>{escape(s.name)}</text>"
        )
        x += 24 + 7 * len(s.name)
    return "".join(parts)


def hbar_chart(
    title: str,
    rows: Sequence[tuple[str, Sequence[float]]],
    series: Sequence[Series],
    *,
    in_bytes: bool,
) -> str:
    """Horizontal stacked bars, one row per label, the total printed at the bar's end."""
    fmt: Callable[[float], str] = human_bytes if in_bytes else human_count
    totals = [sum(values) for _, values in rows]
    axis = (bytes_axis if in_bytes else count_axis)(max(totals, default=0))
    label_w = min(320, 20 + 7 * max((len(label) for label, _ in rows), default=10))
    plot_w = WIDTH - label_w - 110
    top, height = 40, ROW * len(rows)
    px = plot_w / axis.top

    def x_of(value: float) -> float:
        return label_w + value * axis.scale * px

    out = [f"<text x='0' y='16' {FONT} font-weight='bold'>{escape(title)}</text>"]
    out.append(_legend(series, label_w, 32) if len(series) > 1 else "")
    for tick in axis.ticks:
        x = label_w + tick * px
        out.append(
            f"<line x1='{x:.1f}' y1='{top}' x2='{x:.1f}' y2='{top + height}' stroke='#ddd'/>"
            f"<text x='{x:.1f}' y='{top + height + 16}' {FONT} text-anchor='middle'>"
            f"{escape(axis.label(tick))}</text>"
        )
    for i, ((label, values), total) in enumerate(zip(rows, totals, strict=True)):
        y = top + i * ROW
        out.append(
            f"<text x='{label_w - 6}' y='{y + 16}' {FONT} text-anchor='end'>"
            f"<title>{escape(label)}</title>{escape(_short(label, label_w))}</text>"
        )
        start = 0.0
        for value, s in zip(values, series, strict=True):
            if value > 0:
                w = max(1.0, x_of(start + value) - x_of(start))
                out.append(
                    f"<rect class='bar' x='{x_of(start):.1f}' y='{y + 4}' width='{w:.1f}' "
                    f"height='{ROW - 8}' fill='{s.color}'><title>{escape(s.name)}: "
                    f"{escape(fmt(value))}</title></rect>"
                )
            start += value
        out.append(
            f"<text x='{x_of(total) + 4:.1f}' y='{y + 16}' {FONT}>{escape(fmt(total))}</text>"
        )
    out.append(_axis_line(label_w, top, height))
    return _svg(out, top + height + 28, title)


def _axis_line(x: float, top: float, height: float) -> str:
    return f"<line x1='{x}' y1='{top}' x2='{x}' y2='{top + height}' stroke='#333'/>"


def _short(label: str, width: float) -> str:
    room = max(8, int((width - 10) / 7))
    return label if len(label) <= room else label[: room - 1] + "…"


def vbar_chart(
    title: str,
    categories: Sequence[str],
    values: Sequence[Sequence[float]],
    series: Sequence[Series],
    *,
    marker_at: int | None = None,
    marker_label: str = "",
    y_label: str = "",
) -> str:
    """Grouped vertical bars per category (count axis from 0); `values[s][c]` is series s in
    category c. A dashed line marks the boundary before category `marker_at`."""
    axis = count_axis(max((v for vs in values for v in vs), default=0))
    left, top, plot_h = 60, 44, 220
    slot = (WIDTH - left - 20) / max(1, len(categories))
    bar = slot * 0.8 / max(1, len(series))
    out = [f"<text x='0' y='16' {FONT} font-weight='bold'>{escape(title)}</text>"]
    out.append(_legend(series, left, 34))
    for tick in axis.ticks:
        y = top + plot_h - tick / axis.top * plot_h
        out.append(
            f"<line x1='{left}' y1='{y:.1f}' x2='{WIDTH - 20}' y2='{y:.1f}' stroke='#ddd'/>"
            f"<text x='{left - 6}' y='{y + 4:.1f}' {FONT} text-anchor='end'>"
            f"{escape(axis.label(tick))}</text>"
        )
    for c, category in enumerate(categories):
        x0 = left + c * slot + slot * 0.1
        for s, (ser, series_values) in enumerate(zip(series, values, strict=True)):
            value = series_values[c]
            if value <= 0:
                continue
            h = max(1.0, value / axis.top * plot_h)
            x = x0 + s * bar
            out.append(
                f"<rect class='bar' x='{x:.1f}' y='{top + plot_h - h:.1f}' width='{bar:.1f}' "
                f"height='{h:.1f}' fill='{ser.color}'><title>{escape(ser.name)} "
                f"{escape(category)}: {human_count(value)}</title></rect>"
                f"<text x='{x + bar / 2:.1f}' y='{top + plot_h - h - 3:.1f}' {FONT} "
                f"text-anchor='middle'>{human_count(value)}</text>"
            )
        cx = left + (c + 0.5) * slot
        out.append(
            f"<text {FONT} text-anchor='end' transform='translate({cx:.1f},{top + plot_h + 14})"
            f" rotate(-30)'>{escape(category)}</text>"
        )
    if marker_at is not None:
        x = left + marker_at * slot
        # The label sits on the side of the line with more room.
        anchor, dx = ("end", -4) if x > WIDTH / 2 else ("start", 4)
        out.append(
            f"<line class='window' x1='{x:.1f}' y1='{top - 6}' x2='{x:.1f}' y2='{top + plot_h}' "
            f"stroke='{RED}' stroke-width='2' stroke-dasharray='6 4'/>"
            f"<text x='{x + dx:.1f}' y='{top + 6}' {FONT} fill='{RED}' text-anchor='{anchor}'>"
            f"{escape(marker_label)}</text>"
        )
    out.append(_axis_line(left, top, plot_h))
    out.append(
        f"<line x1='{left}' y1='{top + plot_h}' x2='{WIDTH - 20}' y2='{top + plot_h}' "
        "stroke='#333'/>"
    )
    if y_label:
        out.append(
            f"<text {FONT} text-anchor='middle' transform='translate(14,{top + plot_h / 2})"
            f" rotate(-90)'>{escape(y_label)}</text>"
        )
    return _svg(out, top + plot_h + 90, title)


def _svg(parts: Sequence[str], height: float, title: str) -> str:
    return (
        f"<svg role='img' aria-label='{escape(title)}' "
        f"width='{WIDTH}' height='{height:.0f}' viewBox='0 0 {WIDTH} {height:.0f}'>"
        + "".join(parts)
        + "</svg>"
    )
