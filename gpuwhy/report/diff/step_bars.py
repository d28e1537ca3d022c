"""The diff page's picture beside its verdict (report/step_picture.py): BEFORE's and
AFTER's step side by side, as two bars on one time axis (the slower side fills the
width, so a faster AFTER is the shorter bar), each split into the parts the comparison
measured per step (comparison/comparable_units.py, the "Where the time went" table's rows).

The bars are the mean step, the figure the parts add up to and the interval is called
on; what the parts do not cover is "the rest". A side with no step time is not drawn.
"""

from __future__ import annotations

from gpuwhy.comparison.model import Comparison
from gpuwhy.formatting import duration
from gpuwhy.report.run.step_split import LOOKS
from gpuwhy.report.step_picture import Bar, segments


def diff_bars(c: Comparison) -> list[Bar]:
    step = c.step_time
    if step is None or max(step.before, step.after) <= 0:
        return []
    longest = max(step.before, step.after)
    bars = []
    for side, total, median in (
        ("BEFORE", step.before, step.median_before),
        ("AFTER", step.after, step.median_after),
    ):
        if total <= 0:
            continue
        measured: list[tuple[str, str, float]] = []
        for p in c.parts:
            seconds = p.before_s if side == "BEFORE" else p.after_s
            if seconds > 0:
                measured.append((p.part, LOOKS[p.part][0] if p.part in LOOKS else p.label, seconds))
        covered = sum(s for _, _, s in measured)
        # timers that overlap at a window's edge: the parts are the step, as the run's
        # own picture draws them (report/run/step_split.py)
        scale = total / covered if covered > total else 1.0
        parts: list[tuple[str, str, float, float | None]] = [
            (k, w, s * scale / total, s * scale) for k, w, s in measured
        ]
        covered *= scale
        if total - covered > 0.005 * total:
            parts.append(("rest", LOOKS["rest"][0], (total - covered) / total, total - covered))
        words = f"mean step {duration(total)}" + (
            f", median {duration(median)}" if median is not None else ""
        )
        bars.append(Bar(f"{side} (measured)", words, segments(parts), length=total / longest))
    return bars
