"""The picture of the training step that opens every HTML page, beside the verdict: the
step split into the parts gpuwhy measured, one bar per thing compared (the run as
measured, the GPU it was projected onto, BEFORE and AFTER, each worker), drawn as a small
inline SVG.

Why SVG written here and not a plotly chart: the first screen must show the answer the
moment the file opens, on a cluster with no internet, without waiting for 4.8 MB of
JavaScript to lay out a chart; a few hundred bytes of SVG are drawn with the page.

The bars only carry what the record measured (or, for a projection, what the model
projected, labelled so): a part the record did not measure is not drawn, what the parts do
not cover is "the rest", and a bar without any measured part is not drawn at all.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

# Each part's colour: the terminal's step split colours (step_split.LOOKS), as the page's
# palette draws them; "rest" and "idle" are the grey of what was not split.
COLOURS = {
    "input": "#c62828",
    "tracing": "#8e24aa",
    "traced_step": "#2e7d32",
    "eager": "#f9a825",
    "python": "#1565c0",
    "collectives": "#6d4c41",
    "rest": "#bdbdbd",
    "gpu": "#2e7d32",
    "busy": "#2e7d32",
    "compile": "#8e24aa",
    "synchronisation": "#00838f",
    "compute": "#ef6c00",
    "dispatch": "#fbc02d",
    "untraced": "#9e9e9e",
    "idle": "#e0e0e0",
    "tensor": "#2e7d32",
    "kernels": "#66bb6a",
    "copies": "#00838f",
    "cpu_ops": "#ef6c00",
    "host": "#1565c0",
}
OTHER = "#90a4ae"

WIDTH = 1100  # the SVG's own units; it scales to its box
NAME_W = 250  # the bars' names, left of them
BAR_X = NAME_W + 10
BAR_W = WIDTH - BAR_X - 10
BAR_H = 26
LEGEND_H = 18
GAP = 14
CHAR_W = 6.7  # a 12px system-ui character, on average: where the legend wraps
CAPTION_H = 15  # between the lines of a bar's caption
MIN_TEXT_W = 40  # a segment narrower than this carries no percentage inside


@dataclass(frozen=True)
class Segment:
    part: str  # a key of COLOURS
    label: str  # for people: "waiting for input"
    share: float  # of its bar
    seconds: float | None = None  # per step, where known


@dataclass(frozen=True)
class Bar:
    name: str  # "this run (measured)", "A100 (projected)"
    total: str  # "median step 77.4 ms", "step 2.1 ms (band 1.5–3.0 ms)"
    segments: tuple[Segment, ...]
    projected: bool = False
    length: float = 1.0  # of the bar area: bars on one time axis are shorter than 1
    # the verdict's clause this bar draws, which the page's verdict then leaves out
    # (verdict.verdict's ``drawn``): "step", "projection", or None
    draws: str | None = None


def segments(shares: Sequence[tuple[str, str, float, float | None]]) -> tuple[Segment, ...]:
    """Segments from (part, label, share, seconds), the shares scaled to fill their bar
    where they overlap past it, parts under half a percent left out."""
    covered = sum(max(0.0, s) for _, _, s, _ in shares)
    scale = 1 / covered if covered > 1 else 1.0
    return tuple(
        Segment(part, label, share * scale, seconds)
        for part, label, share, seconds in shares
        if share * scale >= 0.005
    )


def svg(bars: Sequence[Bar], title: str = "The training step, split") -> str | None:
    """The SVG of the bars (their parts' widths proportional to their shares, each
    followed by its legend), or None where no bar has a part to draw."""
    drawn = [b for b in bars if b.segments]
    if not drawn:
        return None
    rows: list[str] = []
    y = 4
    for bar in drawn:
        rows.append(_bar(bar, y))
        legend, lines = _legend(bar, y + BAR_H + 15)
        rows.append(legend)
        caption = 26 + (len(_caption_lines(bar.total)) - 1) * CAPTION_H + 6
        y += max(BAR_H + lines * LEGEND_H, caption) + GAP
    height = y
    return (
        f'<svg class="step-picture" xmlns="http://www.w3.org/2000/svg" '
        f'viewBox="0 0 {WIDTH} {height}" width="100%" role="img" '
        f'aria-label="{escape(title)}" data-bars="{len(drawn)}">'
        f"<title>{escape(title)}</title>"
        # its text's sizes and colours, once (not on each of its elements); an inline
        # SVG's style sheet is the page's, so each rule is the picture's own
        "<style>svg.step-picture text{font-size:12px}svg.step-picture .name{font-size:13px;"
        "font-weight:600}svg.step-picture .total{fill:#59636e}"
        "svg.step-picture .pct{text-anchor:middle}</style>"
        '<defs><pattern id="projected-hatch" width="6" height="6" '
        'patternUnits="userSpaceOnUse" patternTransform="rotate(45)">'
        '<rect width="3" height="6" fill="#ffffff" fill-opacity="0.45"/></pattern></defs>'
        + "".join(rows)
        + "</svg>"
    )


def _bar(bar: Bar, y: int) -> str:
    out = [
        f'<g class="bar{" projected" if bar.projected else ""}" data-name="{escape(bar.name)}">',
        f'<text class="name" x="0" y="{y + 11}">{escape(bar.name)}</text>',
        f'<text class="total" x="0" y="{y + 26}">'
        + "".join(
            f'<tspan x="0" dy="{0 if i == 0 else CAPTION_H}">{escape(line)}</tspan>'
            for i, line in enumerate(_caption_lines(bar.total))
        )
        + "</text>",
    ]
    x = float(BAR_X)
    full = BAR_W * max(0.0, min(1.0, bar.length))
    for seg in bar.segments:
        w = full * seg.share
        colour = COLOURS.get(seg.part, OTHER)
        tip = f"{seg.label}: {seg.share:.0%}" + (
            f" ({_ms(seg.seconds)})" if seg.seconds is not None else ""
        )
        out.append(
            f'<rect class="part" data-part="{escape(seg.part)}" data-share="{seg.share:.4f}" '
            f'x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_H}" fill="{colour}">'
            f"<title>{escape(tip)}</title></rect>"
        )
        if bar.projected:
            out.append(
                f'<rect x="{x:.1f}" y="{y}" width="{w:.1f}" height="{BAR_H}" '
                'fill="url(#projected-hatch)"/>'
            )
        if w >= MIN_TEXT_W:
            out.append(
                f'<text class="pct" x="{x + w / 2:.0f}" y="{y + 17}" '
                f'fill="{_ink(colour)}">{seg.share:.0%}</text>'
            )
        x += w
    dash = ' stroke-dasharray="5 3"' if bar.projected else ""
    out.append(
        f'<rect x="{BAR_X}" y="{y}" width="{full:.1f}" height="{BAR_H}" fill="none" '
        f'stroke="#59636e" stroke-width="1"{dash}/>'
    )
    out.append("</g>")
    return "".join(out)


def _caption_lines(total: str) -> list[str]:
    """The caption under a bar's name, wrapped at the names' column (a projected step's
    "step 85.3 ms, paced by its input (the step alone …)" is longer than it)."""
    return textwrap.wrap(total, int((NAME_W - 6) / CHAR_W)) or [total]


def _legend(bar: Bar, y: int) -> tuple[str, int]:
    """The bar's parts in words under it, wrapped at the bar's width: (svg, lines)."""
    out = []
    x, line = float(BAR_X), 0
    for seg in bar.segments:
        words = f"{seg.label} {seg.share:.0%}" + (
            f" ({_ms(seg.seconds)})" if seg.seconds is not None else ""
        )
        w = 16 + len(words) * CHAR_W + 18
        if x + w > WIDTH and x > BAR_X:
            x, line = float(BAR_X), line + 1
        top = y + line * LEGEND_H
        out.append(
            f'<rect x="{x:.0f}" y="{top - 10}" width="11" height="11" '
            f'fill="{COLOURS.get(seg.part, OTHER)}"/>'
            f'<text x="{x + 16:.0f}" y="{top}">{escape(words)}</text>'
        )
        x += w
    return '<g class="legend">' + "".join(out) + "</g>", line + 1


def _ms(seconds: float) -> str:
    if seconds >= 10:
        return f"{seconds:,.1f} s"
    if seconds >= 0.001:
        return f"{seconds * 1000:,.1f} ms"
    return f"{seconds * 1e6:,.0f} µs"


def _ink(fill: str) -> str:
    """Black or white text, whichever reads on the fill."""
    r, g, b = (int(fill[i : i + 2], 16) for i in (1, 3, 5))
    return "#1f2328" if 0.299 * r + 0.587 * g + 0.114 * b > 150 else "#ffffff"
