"""``gpuwhy diff`` in the terminal (rich): the verdict first, then where the time went
part by part, the findings that changed, what else differed, and how each run was read.

Piped output gets no colour codes and no hard wrapping, as the run report."""

from __future__ import annotations

import io

from rich.text import Text

from gpuwhy.comparison.model import Change, Comparison, FindingChange, PartChange, RunSide
from gpuwhy.formatting import duration
from gpuwhy.report.layout import table, text_console

VERDICT_STYLE = {"faster": "bold green", "slower": "bold red", "same": "bold"}
CHANGE_STYLE = {"new": "red", "worse": "red", "better": "green", "gone": "green"}


def render_comparison(c: Comparison, color: bool = False, width: int | None = None) -> str:
    buffer = io.StringIO()
    console = text_console(buffer, color, width)
    mark, called = verdict_mark(c)
    console.print(Text(f"{mark} {c.verdict}", style=VERDICT_STYLE.get(called, "bold")))
    if c.step_time is not None:
        console.print()
        console.print(Text("Step time", style="bold underline"))
        for line in step_lines(c.step_time, c):
            console.print(Text(line))
    if c.parts:
        console.print()
        console.print(Text("Where the time went, per step", style="bold underline"))
        for row in table(
            ("part", "BEFORE", "AFTER", "change (95%)", "of the change"),
            [part_row(p) for p in c.parts],
            indent=2,
        ):
            console.print(row)
    if c.projected_step is not None:
        console.print()
        console.print(Text(f"Projected onto {c.projected_gpu}", style="bold underline"))
        console.print(Text(projected_line(c.projected_step)))
    if c.gpu_busy is not None:
        console.print()
        console.print(Text("GPU busy", style="bold underline"))
        console.print(Text(busy_line(c.gpu_busy)))
    console.print()
    console.print(Text("Findings", style="bold underline"))
    if not c.findings:
        console.print(Text("  the same in both records"))
    for f in c.findings:
        entry = Text(f"  {f.change:<6} ", style=CHANGE_STYLE.get(f.change, ""))
        entry.append(f"{f.id}  {severities(f)}  {f.title}")
        if f.location:
            entry.append(f"  at {f.location}", style="dim")
        console.print(entry)
    if c.environment:
        console.print()
        console.print(Text("Also different", style="bold underline"))
        for row in table(
            ("what", "BEFORE", "AFTER"),
            [(e.what, e.before or "-", e.after or "-") for e in c.environment],
            indent=2,
        ):
            console.print(row)
    console.print()
    console.print(Text("Compared", style="bold underline"))
    for name, side in (("BEFORE", c.before), ("AFTER", c.after)):
        console.print(
            Text(f"  {name:<7}{side.path} ({side.command}, {side.created}): {side_read(side)}")
        )
    for note in c.notes:
        console.print(Text(f"  note: {note}", style="dim"))
    return buffer.getvalue()


def verdict_mark(c: Comparison) -> tuple[str, str]:
    """The verdict's mark and what the step time was called (faster, slower, same): the
    terminal's and the HTML page's (diff_html.py)."""
    judged = c.example_time or c.step_time
    called = judged.called if judged else "same"
    if c.confounded_by is not None:
        called = "same"  # no mark of victory or defeat on a contended host
    return {"faster": "✓", "slower": "✗"}.get(called, "•"), called


def step_lines(step: Change, c: Comparison | None = None) -> list[str]:
    """The step time's lines; where the batch differs, the time per example first."""
    lines = []
    example = c.example_time if c is not None else None
    if example is not None and c is not None and c.batches is not None:
        lines.append(
            f"  per example  {duration(example.before, True)} -> "
            f"{duration(example.after, True)} (batches of {c.batches[0]} -> {c.batches[1]}; "
            f"AFTER/BEFORE {example.estimate:.3f}, 95% interval {example.low:.3f}-"
            f"{example.high:.3f})"
        )
    lines += [
        f"  mean     {duration(step.before)} -> {duration(step.after)} "
        f"(AFTER/BEFORE {step.estimate:.3f}, 95% interval {step.low:.3f}-{step.high:.3f})"
    ]
    if step.median_before is not None and step.median_after is not None:
        lines.append(f"  median   {duration(step.median_before)} -> {duration(step.median_after)}")
    if step.called == "same":
        lines.append(f"  these runs cannot show a change under {step.detectable:.0%}")
    return lines


def severities(f: FindingChange) -> str:
    return f"{f.severity_before or '-'} -> {f.severity_after or '-'}"


def side_read(side: RunSide) -> str:
    """What of a record was compared: its steps and how they were resampled; with several
    runs a side, each run's mean step (how far they spread is the interval's width)."""
    read = f"{side.steps:,} steps, {side.basis}" if side.basis else "no training steps"
    if side.runs > 1 and side.run_step_s:
        read += "; the runs' mean steps " + ", ".join(
            duration(s) if s else "none" for s in side.run_step_s
        )
    return read


def part_row(p: PartChange) -> tuple[str, str, str, str, str]:
    if p.low_s is not None and p.high_s is not None:
        change = f"{_signed(p.delta_s)} ({_signed(p.low_s)} to {_signed(p.high_s)})"
    else:
        why = {
            "collectives": "measured once per run",
            "eager": "no interval: counted ops x one gap per run",
        }.get(p.part, "no interval: under 8 windows in a run")
        change = f"{_signed(p.delta_s)} ({why})"
    if not p.called:
        change += " ~"
    share = f"{p.share:.0%}" if p.share is not None and p.called else ""
    return (p.label, _time(p.before_s), _time(p.after_s), change, share)


def projected_line(p: Change) -> str:
    return (
        f"  {duration(p.before)} -> {duration(p.after)} of the GPU's work a step "
        f"(AFTER/BEFORE {p.estimate:.3f}; AFTER's band {p.low:.2f}-{p.high:.2f}x BEFORE): "
        "predicted from each record's traced graph, not measured; the host's own work "
        "in the projected step is what each run measured, compared in the step time above"
    )


def busy_line(busy: Change) -> str:
    return (
        f"  {busy.before:.0%} -> {busy.after:.0%} "
        f"({busy.estimate * 100:+.0f} points, {busy.low * 100:+.0f} to "
        f"{busy.high * 100:+.0f}, 95%){'' if busy.called != 'same' else ': no measurable change'}"
    )


def _signed(seconds: float) -> str:
    return ("+" if seconds >= 0 else "-") + _time(abs(seconds))


def _time(seconds: float) -> str:
    """A part's time: in µs below a millisecond (parts are often that small)."""
    return duration(seconds, microseconds=True)
