"""``gpuwhy diff --calibrate`` in the terminal and as JSON: the recommendation first, then
what it rests on (each run's level, the spread, the table of runs a side, the checks on
the runs themselves). The JSON's schema is gpuwhy/schema/calibration.schema.json,
generated from gpuwhy/comparison/calibration.py."""

from __future__ import annotations

import io
import json
from typing import Any

from rich.text import Text

from gpuwhy.comparison.calibration import Calibration
from gpuwhy.facts import to_dict
from gpuwhy.formatting import duration
from gpuwhy.report.diff.json_ import with_tool
from gpuwhy.report.layout import table, text_console


def render_calibration(c: Calibration, color: bool = False, width: int | None = None) -> str:
    buffer = io.StringIO()
    console = text_console(buffer, color, width)
    console.print(Text(c.verdict, style="bold"))
    console.print()
    console.print(Text("Runs", style="bold underline"))
    rows = [
        (
            path,
            duration(step),
            "-" if load is None else f"{load:.0%}",
        )
        for path, step, load in zip(c.paths, c.step_s, c.others_cpu)
    ]
    for line in table(("record", "mean step", "others' CPU"), rows, indent=2):
        console.print(line)
    console.print(
        Text(
            f"  a run's level spreads by {c.between_runs:.1%} (standard deviation, between "
            f"runs); within a run its own sampling gives {c.within_run:.1%}"
        )
    )
    console.print()
    console.print(Text("Runs a side", style="bold underline"))
    table_rows = [
        (
            str(r.runs),
            _pct(r.called_half),
            _pct(r.called_9_in_10),
            f"{r.splits_called} of {r.splits}" if r.splits else "too few runs",
        )
        for r in c.by_runs
    ]
    header = ("runs a side", "calls changes of", "9 times in 10", "unchanged runs called")
    for line in table(header, table_rows, indent=2):
        console.print(line)
    console.print(
        Text(
            "  unchanged runs called: these runs split N against N at random and compared; "
            "a 95% interval calls about 1 in 20"
        )
    )
    if c.one_run_pairs:
        console.print(
            Text(
                f"  one run a side (gpuwhy diff A B): {c.one_run_called} of "
                f"{c.one_run_pairs} pairs of these unchanged runs were called different"
            )
        )
    console.print()
    console.print(Text("In CI", style="bold underline"))
    console.print(
        Text(
            f"  record {c.runs_a_side} runs of each revision, interleaved (base, head, base, "
            f"...), then: gpuwhy diff --fail-on {c.fail_on} base/*.json -- head/*.json"
        )
    )
    for note in c.notes:
        console.print(Text(f"  note: {note}"))
    return buffer.getvalue()


def calibration_dict(c: Calibration) -> dict[str, Any]:
    return with_tool(to_dict(c))


def calibration_json(c: Calibration) -> str:
    return json.dumps(calibration_dict(c), indent=2) + "\n"


def _pct(change: float) -> str:
    return f"{change:.1%}" if change == change and change != float("inf") else "-"
