"""The per-worker table of ``gpuwhy merge`` (section ``workers``), as cells for the
terminal and the HTML report alike: one row per task, with how its record was read."""

from __future__ import annotations

from gpuwhy.facts import WorkerRun, WorkersFacts
from gpuwhy.formatting import duration

HEADER = (
    "task",
    "record",
    "steps",
    "median step",
    "p90",
    "input wait",
    "GPU busy",
    "collective",
    "host",
)


def worker_rows(workers: WorkersFacts) -> list[tuple[str, ...]]:
    return [_cells(w) for w in workers.workers]


def worker_notes(workers: WorkersFacts) -> list[str]:
    """What is wrong with a record, one line per worker that has a note."""
    return [f"{w.name}: {w.note}" for w in workers.workers if w.note]


def input_wait_note(workers: WorkersFacts) -> str | None:
    """How the input wait column was measured, where not every worker timed it."""
    ways = sorted({w.input_wait_by for w in workers.workers if w.input_wait_by})
    return f"input wait by: {'; '.join(ways)}" if ways else None


def _cells(w: WorkerRun) -> tuple[str, ...]:
    if w.state == "missing":
        return (w.name, "missing", *("-" for _ in HEADER[2:]))
    share = (
        f"{w.input_wait_s / w.step_mean_s:.0%} ({duration(w.input_wait_s)})"
        if w.input_wait_s is not None and w.step_mean_s
        else "-"
    )
    collective = (
        f"{w.collective_share:.0%}"
        if w.collective_share is not None
        else (duration(w.collective_step_s) if w.collective_step_s is not None else "-")
    )
    return (
        w.name,
        w.state if w.file is None else f"{w.state} ({w.file})",
        f"{w.steps:,}" if w.steps else "-",
        duration(w.step_median_s) if w.step_median_s is not None else "-",
        duration(w.step_p90_s) if w.step_p90_s is not None else "-",
        share,
        f"{w.gpu_busy:.0%}" if w.gpu_busy is not None else "-",
        collective,
        w.hostname or "-",
    )
