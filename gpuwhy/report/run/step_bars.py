"""What the first screen of a record's HTML page draws (report/step_picture.py): its bars.

Each kind of record has its own measured step, and each is read where the terminal reads
it, so that the picture and the words never disagree:

- a run or a capture: the median step as step_split.py splits it (the terminal's line
  under the verdict), and with ``--target`` the step projected onto that GPU, labelled
  projected, with its band and the projected input wait only where
  input.projected-bound reports it (verdict.projection_clause's rule);
- a recording of the GPU alone (``gpuwhy watch``): no steps, so one bar of the GPU's
  time, busy by the one busy figure (derived/gpu_busy.py), where that figure is
  reliable;
- a merge: one bar per worker on one time axis (its median step, the input wait in it
  where the worker measured one), so a straggler is the longer bar.
"""

from __future__ import annotations

from collections.abc import Sequence

from gpuwhy.derived.stage import derived
from gpuwhy.facts import Facts, ProjectionFacts, WorkerRun, WorkersFacts
from gpuwhy.finding import Finding
from gpuwhy.formatting import duration
from gpuwhy.report.run.step_split import step_split
from gpuwhy.report.step_picture import Bar, segments
from gpuwhy.verdict import PROJECTED_INPUT, busy_text


def run_bars(facts: Facts, findings: Sequence[Finding] = ()) -> list[Bar]:
    """The bars of a record's picture, in the order drawn."""
    if facts.workers is not None:
        return worker_bars(facts.workers)
    bars = []
    split = step_split(facts)
    if split is not None:
        captured = facts.steps is None and facts.capture is not None
        bars.append(
            Bar(
                "captured steps (measured)" if captured else "this run (measured)",
                split.caption,
                segments([(p.part, p.label, p.share, p.seconds) for p in split.parts]),
                draws=None if captured else "step",
            )
        )
    projection = derived(facts).projection
    if projection is not None:
        bars.append(projected_bar(projection, findings))
    if split is None and projection is None:
        bars.extend(recording_bars(facts))
    return bars


def projected_bar(p: ProjectionFacts, findings: Sequence[Finding] = ()) -> Bar:
    """The step on the target GPU as projected: its input wait where input.projected-bound
    reports it, then the device's parts (matmul/conv, other kernels, copies, ops that stay
    on the CPU) in their projected times, then what the step has beyond them (the host's
    own work where it sets the step). The band is in its words."""
    at_least = "" if p.graph else "at least "
    alone = (
        f"{at_least}{duration(p.step_s)} (band {duration(p.step_low_s)}–{duration(p.step_high_s)})"
    )
    total = f"step {alone}"
    step = p.step_s
    if step <= 0:
        return Bar(f"{p.gpu} (projected)", total, (), projected=True)
    paced = p.paced_step_s if any(f.id == PROJECTED_INPUT for f in findings) else None
    wait = p.input_wait_fraction if paced is not None and p.input_wait_fraction else 0.0
    if paced is not None:  # the step its input paces: the wait, then the step alone
        total = f"step {duration(paced)}, paced by its input (the step alone {alone})"
        step = paced
    parts: list[tuple[str, str, float, float | None]] = []
    if wait:
        parts.append(("input", "waiting for input", wait, wait * step))
    work = step * (1 - wait)
    device = [
        ("tensor", "matmul/conv", p.tensor_s),
        ("kernels", "other kernels", p.kernels_s),
        ("copies", "host↔device copies", p.copies_s),
        ("cpu_ops", "ops on the CPU (measured here)", p.cpu_ops_s),
    ]
    device_s = sum(s for _, _, s in device if s > 0)
    scale = work / device_s if device_s > work > 0 else 1.0
    for part, label, seconds in device:
        if seconds > 0:
            parts.append((part, label, seconds * scale / step, seconds * scale))
    beyond = work - device_s * scale
    if beyond > 0.005 * step:
        # the step is the larger of the GPU's work and the host's (step_band): what it has
        # beyond the GPU's parts is the host's, where the host's was measured
        label = "the host's own work, beyond the GPU's" if p.host_s or p.eager_s else "the rest"
        parts.append(("host" if label != "the rest" else "rest", label, beyond / step, beyond))
    return Bar(f"{p.gpu} (projected)", total, segments(parts), projected=True, draws="projection")


def recording_bars(facts: Facts) -> list[Bar]:
    """A recording without steps: each GPU the program used, busy and idle by the one
    busy figure; none where the figure cannot resolve the program."""
    bars = []
    several = facts.gpu_samples is not None and len(facts.gpu_samples.gpus) > 1
    for series, block in derived(facts).program_busy:
        if not block.reliable or block.share is None:
            continue
        name = f"GPU {series.index}" if several else "the GPU"
        span = (
            f" over {duration(block.end_s - block.start_s)}"
            if block.start_s is not None and block.end_s is not None
            else ""
        )
        bars.append(
            Bar(
                f"{name} (measured)",
                f"its time{span}, by {block.measure}",
                segments(
                    [
                        ("busy", f"busy ({block.measure})", block.share, None),
                        ("idle", "idle", 1 - block.share, None),
                    ]
                ),
            )
        )
    return bars


def worker_bars(workers: WorkersFacts) -> list[Bar]:
    """One bar per worker that measured its steps, on one time axis (the longest step
    fills the width): the input wait where measured, the rest of the step unsplit. Each
    bar splits the worker's mean step by its mean wait, the figures of the workers'
    table beside it ("34% (51.0 ms)"), its median said in the caption; a worker whose
    record has no mean step splits its median step by its median wait."""
    timed = [w for w in workers.workers if w.step_mean_s or w.step_median_s]
    bars = []
    drawn: list[tuple[WorkerRun, str, float, float | None]] = []
    for w in timed:
        if w.step_mean_s:
            caption = f"mean step {duration(w.step_mean_s)}" + (
                f" (median {duration(w.step_median_s)})" if w.step_median_s else ""
            )
            drawn.append((w, caption, w.step_mean_s, w.input_wait_s))
        else:
            step = w.step_median_s or 0.0
            drawn.append((w, f"median step {duration(step)}", step, w.input_wait_median_s))
    longest = max((step for _, _, step, _ in drawn), default=0.0)
    for w, caption, step, wait in drawn:
        parts: list[tuple[str, str, float, float | None]] = []
        if wait is not None:
            wait = min(max(wait, 0.0), step)
            parts.append(("input", "waiting for input", wait / step, wait))
        rest = step - (wait or 0.0)
        parts.append(("rest", "the rest of the step (not split)", rest / step, rest))
        bars.append(
            Bar(
                f"{w.name} (measured)",
                caption,
                segments(parts),
                length=step / longest if longest else 1.0,
            )
        )
    return bars


def busy_caption(facts: Facts) -> str | None:
    """The GPU-busy figure under a run's picture, in the verdict's own words
    (verdict.busy_text), which the page's verdict then leaves to it; None for a capture
    (its bar holds its kernels' busy share) and a recording (its bar is the figure)."""
    if facts.steps is None or facts.program is None or not facts.program.tensorflow_imported:
        return None
    text = busy_text(facts)
    return None if text is None else text[0].upper() + text[1:] + "."
