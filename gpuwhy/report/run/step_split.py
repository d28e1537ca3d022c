"""The training step split into the parts gpuwhy measured, drawn as one line of
proportional bars right under the verdict: where a step's time goes is the first thing a
reader needs to judge the findings that follow.

The split is the one ``gpuwhy diff`` compares (comparison/comparable_units.py: waiting for input,
tracing, inside the traced step, eager ops, the Python between the calls), read here
rather than computed again, so that the run report and the diff can never disagree about
what a step is made of; a profiler capture's steps split into the GPU's kernels and
what the host did while the GPU idled (the capture reader's attribution). Each part's share is its time over the training windows' step
time (the input share as the verdict states it). The step split is the mean step, the one
those shares are of: its parts are then the times measured (its wait the input finding's
"a mean 65.3 ms of a 88.0 ms step"), where the median step split in the same shares would
give times no one measured; the median is said beside it. A record without the steps'
totals splits the median, or the windows' mean where a few long steps (those that
traced, an epoch's end) put it well above the median. A part the record did not measure
is left out, and what the measured parts do not cover is "the rest", never guessed.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text

from gpuwhy.comparison.comparable_units import PARTS, run_units
from gpuwhy.facts import Facts
from gpuwhy.formatting import duration

MIN_SHARE = 0.005  # a part under half a percent of the step is not drawn
BAR_WIDTH = 40  # characters of the bar; every drawn part gets one at least
MEAN_APART = 1.25  # a mean step this much above the median: the bar splits the mean

# Each part: its words for people, the glyph that draws it where there is no colour
# (piped output stays readable), and its colour on a terminal.
LOOKS = {
    "input": ("waiting for input", "░", "red"),
    "tracing": ("tracing tf.functions", "×", "magenta"),
    "traced_step": ("computing (in tf.function)", "█", "green"),
    "eager": ("eager dispatch", "▓", "yellow"),
    "python": ("host's Python between calls", "▒", "blue"),
    "rest": ("the rest (not split)", "·", "white"),
    # a profiler capture's steps: the GPU's kernels, then what the host was doing while
    # the GPU idled (facts.capture.HOST_ACTIVITIES)
    "gpu": ("GPU computing (kernels)", "█", "green"),
    "compile": ("compiling", "×", "magenta"),
    "synchronisation": ("waiting on results", "≈", "cyan"),
    "compute": ("TF ops on the host", "#", "yellow"),
    "dispatch": ("launch and dispatch", "▓", "yellow"),
    "untraced": ("host, untraced", ":", "white"),
}


@dataclass(frozen=True)
class StepPart:
    part: str  # a name of comparison.comparable_units.PARTS, or "rest"
    label: str
    share: float  # of the step
    seconds: float  # of the step split


@dataclass(frozen=True)
class StepSplit:
    step_s: float  # the step the parts split: the mean, or the median (``statistic``)
    parts: tuple[StepPart, ...]
    statistic: str = "median"
    median_s: float | None = None  # said beside a mean step

    @property
    def label(self) -> str:
        """``mean 88.0 ms, median 84.5 ms``: the step split, and the median the verdict
        states where the split is the mean's."""
        return f"{self.statistic} {duration(self.step_s)}" + self._median_beside(", {}")

    @property
    def caption(self) -> str:
        """``mean step 88.0 ms (median 84.5 ms)``: the label under the picture's bar."""
        return f"{self.statistic} step {duration(self.step_s)}" + self._median_beside(" ({})")

    def _median_beside(self, form: str) -> str:
        if self.median_s is None or self.statistic == "median":
            return ""
        return form.format(f"median {duration(self.median_s)}")


def step_split(facts: Facts) -> StepSplit | None:
    """The median step's parts, largest share first: a watched run's steps, else a
    profiler capture's; None where the record split no step (too few training steps, no
    timeline, a record without steps)."""
    return _run_split(facts) or _capture_split(facts)


def _run_split(facts: Facts) -> StepSplit | None:
    units = run_units(facts)
    if units.median_s is None or not units.part_units or not units.parts_measured:
        return None
    step_s = sum(u[1] for u in units.part_units)
    if step_s <= 0:
        return None
    shares = {
        # a part's windows are signed (the Python's: comparable_units._parts): their sum
        # is what it measured, never below nothing
        part: max(0.0, sum(u[2 + i] for u in units.part_units) / step_s)
        for i, part in enumerate(PARTS)
        if part in units.parts_measured
    }
    covered = sum(shares.values())
    if covered > 1:  # timers that overlap at a window's edge: the parts are the step
        shares = {part: share / covered for part, share in shares.items()}
    else:
        shares["rest"] = 1 - covered
    shares = _with_the_findings_eager(_with_the_verdicts_wait(shares, facts), facts)
    said = facts.steps.median_s if facts.steps is not None else None
    mean = facts.steps.mean_s if facts.steps is not None else None
    if mean is not None:  # the shares' own step: each part's time is the one measured
        return _split(mean, shares, "mean", said)
    steps = sum(u[0] for u in units.part_units)
    mean_s = step_s / steps if steps else units.median_s
    if mean_s > MEAN_APART * units.median_s:
        # a few long steps (those that traced, an epoch's end) hold much of the time:
        # the shares are of the mean step, which holds them; the median holds none
        return _split(mean_s, shares, "mean")
    # the median the verdict states (the steps' own, over all of them), where there is one
    return _split(said or units.median_s, shares)


def _capture_split(facts: Facts) -> StepSplit | None:
    """A capture's steps (``gpuwhy report CAPTURE``): the GPU's busy share (the union of
    its kernels), then its idle time by what the host was doing, as the capture reader
    attributed it (facts.capture.idle); without a GPU the idle time is the whole step."""
    capture = facts.capture
    median = capture.median_step_s if capture is not None else None
    if capture is None or median is None or capture.steps_s <= 0:
        return None
    shares: dict[str, float] = {}
    if capture.busy_share is not None:
        shares["gpu"] = capture.busy_share
    for idle in capture.idle:
        if idle.activity in LOOKS:
            shares[idle.activity] = shares.get(idle.activity, 0.0) + idle.seconds / capture.steps_s
    covered = sum(shares.values())
    if covered > 1:
        shares = {part: share / covered for part, share in shares.items()}
    else:
        shares["rest"] = 1 - covered
    return _split(median, shares)


def _split(
    step_s: float,
    shares: dict[str, float],
    statistic: str = "median",
    median_s: float | None = None,
) -> StepSplit:
    parts = [
        StepPart(part, LOOKS[part][0], share, share * step_s)
        for part, share in shares.items()
        if share >= MIN_SHARE
    ]
    parts.sort(key=lambda p: -p.share)
    return StepSplit(step_s, tuple(parts), statistic, median_s)


def _with_the_verdicts_wait(shares: dict[str, float], facts: Facts) -> dict[str, float]:
    """The input share as the verdict states it (the steps' own figure, over every step
    after warm-up, where the windows leave out the partial ones at the edges), the other
    parts splitting the remainder in the windows' proportions: the line under the verdict
    never contradicts it, also where too few windows timed the wait to split it there."""
    whole = facts.steps.input_wait_fraction if facts.steps is not None else None
    windowed = shares.get("input")
    if whole is None and facts.steps is not None and windowed is not None:
        # the Steps line says the wait was not measured (a loop whose wait no timer
        # reads beside one that was timed: fit's steps beside a next() loop's): the
        # windows that timed it are not the step's, and the bar does not say otherwise
        rest = {part: share for part, share in shares.items() if part != "input"}
        return {**rest, "rest": rest.get("rest", 0.0) + windowed}
    if whole is None or not 0 <= whole <= 1 or (windowed or 0.0) >= 1:
        return shares
    if windowed is None and not whole:
        return shares
    # where too few windows timed the wait to split it, the verdict's share still stands
    scale = (1 - whole) / (1 - (windowed or 0.0))
    scaled = {part: share * scale for part, share in shares.items() if part != "input"}
    return {"input": whole, **scaled}


def _with_the_findings_eager(shares: dict[str, float], facts: Facts) -> dict[str, float]:
    """The eager ops' share as launch.eager-ops and the Run table state it: the sum of
    the gaps the counter measured between them, over the sampled steps' time (the direct
    measurement), where the windows estimate it as their count times the median gap. The
    difference is the host's Python between the calls, the time the estimate is cut
    from: the parts still add up to the step."""
    measured = facts.eager.dispatch_fraction if facts.eager is not None else None
    if measured is None or "eager" not in shares or "python" not in shares:
        return shares
    pool = shares["eager"] + shares["python"]
    eager = min(measured, pool)
    return {**shares, "eager": eager, "python": pool - eager}


def bar_cells(shares: list[float], width: int = BAR_WIDTH) -> list[int]:
    """Characters per part, proportional to its share (largest remainders), each part at
    least one so that none drawn disappears."""
    total = sum(shares) or 1.0
    exact = [s / total * width for s in shares]
    cells = [max(1, int(e)) for e in exact]
    order = sorted(range(len(shares)), key=lambda i: int(exact[i]) - exact[i])
    for i in order:
        if sum(cells) >= width:
            break
        cells[i] += 1
    while sum(cells) > width and max(cells) > 1:
        cells[cells.index(max(cells))] -= 1
    return cells


def split_line(split: StepSplit) -> Text:
    """One line: the proportional bar, then each part with its glyph, share and time."""
    line = Text()
    line.append("Step ", style="bold")
    line.append(f"({split.label})  ")
    cells = bar_cells([p.share for p in split.parts])
    for part, n in zip(split.parts, cells):
        _, glyph, colour = LOOKS[part.part]
        line.append(glyph * n, style=colour)
    for i, part in enumerate(split.parts):
        _, glyph, colour = LOOKS[part.part]
        line.append("  " if i == 0 else " · ")
        line.append(glyph, style=colour)
        line.append(f" {part.label} {part.share:.0%} ({duration(part.seconds)})")
    return line
