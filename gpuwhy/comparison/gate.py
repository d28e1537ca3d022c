"""The CI gate: ``--fail-on`` conditions, and which of them a comparison or a record
crosses. Each crossing is one line that says which condition and by how much, so that a
red CI job says why without opening a report.

Conditions (``gpuwhy diff`` takes all of them, ``gpuwhy run`` the finding ones):

- ``step:+5%``: the step time is called slower (its 95 % interval leaves no change out)
  and by at least 5 % (the time per example where the batch size differs); not judged (said, not failed) where the host's other processes
  took a different share of its CPU in the two runs;
- ``projected:+5%``: the step projected onto the same GPU (``run --target``) is at least
  5 % slower (a prediction from each record's traced graph: deterministic where the
  graph did not change, so no spread to leave out);
- ``gpu-busy:-10``: the GPUs' busy share is called lower, by at least 10 points;
- ``new:medium``: a finding new in AFTER (or worse than in BEFORE) at medium or higher;
- ``medium`` (or ``finding:medium``): any finding of AFTER (of the run) at medium or
  higher.

A file of conditions (``--fail-on-file``) holds one per line; ``#`` starts a comment.
``--fail-ignore ID`` leaves findings out of every finding condition (``env.no-gpu`` on a
CPU-only CI runner, which has it in every record).
"""

from __future__ import annotations

import fnmatch
import re
from dataclasses import dataclass
from pathlib import Path

from gpuwhy.comparison.model import Comparison
from gpuwhy.finding import SEVERITIES, SEVERITY_RANK, Finding


class GateError(ValueError):
    """A condition that cannot be read; its message is the one line the user sees."""


@dataclass(frozen=True)
class Condition:
    kind: str  # step | projected | gpu-busy | new | finding
    text: str  # as written
    amount: float = 0.0  # step, projected: relative (0.05); gpu-busy: points of 1 (0.10)
    severity: str = "medium"  # new, finding: the lowest severity that fails
    ignore: tuple[str, ...] = ()  # finding ids (fnmatch patterns) it never fails on

    def counts(self, finding_id: str) -> bool:
        return not any(fnmatch.fnmatchcase(finding_id, pattern) for pattern in self.ignore)


_STEP = re.compile(r"^(step|projected):\+?(\d+(?:\.\d+)?)%$")
_BUSY = re.compile(r"^gpu-busy:-(\d+(?:\.\d+)?)$")


def parse(text: str, findings_only: bool = False) -> Condition:
    """One condition as written on the command line."""
    written = text.strip()
    lowered = written.lower()
    kind, _, severity = lowered.partition(":")
    if lowered in SEVERITIES:
        return Condition("finding", written, severity=lowered)
    if kind in ("finding", "new") and severity in SEVERITIES:
        if kind == "new" and findings_only:
            raise GateError(
                f"--fail-on {written!r}: a single run has no new findings; use {severity!r}"
            )
        return Condition(kind, written, severity=severity)
    if not findings_only:
        step = _STEP.match(lowered)
        if step:
            return Condition(step.group(1), written, amount=float(step.group(2)) / 100)
        busy = _BUSY.match(lowered)
        if busy:
            return Condition("gpu-busy", written, amount=float(busy.group(1)) / 100)
    choices = ", ".join(SEVERITIES)
    if findings_only:
        raise GateError(f"--fail-on {written!r}: expected a severity ({choices})")
    raise GateError(
        f"--fail-on {written!r}: expected step:+N%, projected:+N%, gpu-busy:-N, "
        "new:SEVERITY or SEVERITY "
        f"({choices})"
    )


def read_file(path: str, findings_only: bool = False) -> list[Condition]:
    """The conditions of a gate file, one per line (``#`` comments, blank lines)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise GateError(f"cannot read {path}: {e.strerror or e}") from None
    conditions = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        try:
            conditions.append(parse(line, findings_only))
        except GateError as e:
            raise GateError(f"{path}:{number}: {e}") from None
    return conditions


def crossed_by_comparison(conditions: list[Condition], comparison: Comparison) -> list[str]:
    """One line per condition the comparison crosses."""
    out = []
    for c in conditions:
        step = comparison.example_time or comparison.step_time
        if c.kind == "step" and step is not None:
            what = "the time per example" if comparison.example_time else "the step time"
            if step.called == "slower" and step.estimate - 1 >= c.amount - 1e-12:
                if comparison.confounded_by is None:
                    out.append(
                        f"{c.text}: {what} is {step.estimate - 1:.1%} slower "
                        f"({step.low - 1:+.1%} to {step.high - 1:+.1%}, 95%)"
                    )
        elif c.kind == "projected" and comparison.projected_step is not None:
            projected = comparison.projected_step
            if projected.called == "slower" and projected.estimate - 1 >= c.amount - 1e-12:
                out.append(
                    f"{c.text}: the step projected on {comparison.projected_gpu} is "
                    f"{projected.estimate - 1:.1%} slower (a prediction from the traced graph)"
                )
        elif c.kind == "gpu-busy" and comparison.gpu_busy is not None:
            busy = comparison.gpu_busy
            if busy.called == "lower" and -busy.estimate >= c.amount - 1e-12:
                out.append(
                    f"{c.text}: the GPUs are busy {-busy.estimate * 100:.0f} points less "
                    f"({busy.before:.0%} -> {busy.after:.0%})"
                )
        elif c.kind == "new":
            for f in comparison.findings:
                new = f.change in ("new", "worse")
                if new and _at_least(f.severity_after, c.severity) and c.counts(f.id):
                    where = f" at {f.location}" if f.location else ""
                    out.append(f"{c.text}: {f.change} {f.severity_after} {f.id}{where}: {f.title}")
    return out


def near_threshold(conditions: list[Condition], comparison: Comparison) -> list[str]:
    """One line per new-finding condition a finding would cross but for its measure only
    crossing its threshold (comparison/near_threshold.py): the gate passes it, and says
    so rather than hide it."""
    out = []
    for c in conditions:
        if c.kind != "new":
            continue
        for f in comparison.findings_near_threshold:
            if f.change in ("new", "worse") and _at_least(f.severity_after, c.severity):
                if c.counts(f.id):
                    where = f" at {f.location}" if f.location else ""
                    out.append(
                        f"note: {c.text}: {f.severity_after} {f.id}{where} not counted "
                        f"{f.change}: BEFORE's runs reach it too with its thresholds a "
                        "fifth looser (its measure only crossed the line; the diff's "
                        "notes give the thresholds)"
                    )
    return out


def not_judged(conditions: list[Condition], comparison: Comparison) -> list[str]:
    """One line per step condition the comparison does not judge: no step time was
    compared (say so: a gate that passes because a run failed must not look like a pass),
    or it would cross it but the two sides' hosts were not alike (say so rather than fail
    a CI job on a neighbour)."""
    step = comparison.example_time or comparison.step_time
    if step is None:
        return [
            f"{c.text} not judged: no step time was compared (the comparison's notes say why)"
            for c in conditions
            if c.kind == "step"
        ]
    if comparison.confounded_by is None or step.called != "slower":
        return []
    return [
        f"{c.text} not judged: the step time is {step.estimate - 1:.1%} slower, but "
        f"{comparison.confounded_by}"
        for c in conditions
        if c.kind == "step" and step.estimate - 1 >= c.amount - 1e-12
    ]


def blind(conditions: list[Condition], comparison: Comparison) -> list[str]:
    """One line per step condition below what the comparison could show: it could only
    fail on a change of that larger size (the runs' spread hides smaller ones)."""
    step = comparison.example_time or comparison.step_time
    if step is None or step.called != "same" or not comparison.step_time:
        return []
    shown = comparison.step_time.detectable
    return [
        f"note: {c.text}: these runs cannot show a change under {shown:.0%}, so this gate could "
        "only fail on a larger one (more runs a side, or --noise with a calibration, show "
        "smaller ones)"
        for c in conditions
        if c.kind == "step" and c.amount < shown
    ]


def crossed_by_findings(conditions: list[Condition], findings: list[Finding]) -> list[str]:
    """One line per finding-severity condition a record's findings cross."""
    out = []
    for c in conditions:
        if c.kind != "finding":
            continue
        for f in findings:
            if _at_least(f.severity, c.severity) and c.counts(f.id):
                where = f" at {f.location}" if f.location else ""
                out.append(f"{c.text}: {f.severity} {f.id}{where}: {f.title}")
    return out


def _at_least(severity: str | None, threshold: str) -> bool:
    return severity is not None and SEVERITY_RANK[severity] <= SEVERITY_RANK[threshold]
