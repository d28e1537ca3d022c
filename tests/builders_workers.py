"""Worker records as ``gpuwhy run --out-dir`` writes them, made from small facts: a
task, how its run ended, its steps (with the input wait timed by next()) and its
strategy, saved through the real Record so that merge reads the real format."""

from __future__ import annotations

from pathlib import Path

from gpuwhy.facts import (
    DistributedInput,
    DistributeFacts,
    Facts,
    ProgramFacts,
    StepFacts,
    StepSpan,
    StepTimeline,
    TaskFacts,
    WorkerRun,
)
from gpuwhy.finding import Finding
from gpuwhy.record import Record

# the finding a worker waiting for its input carries (gpuwhy merge's tests, the screenshots)
INPUT_BOUND = Finding(
    id="input.bound",
    severity="high",
    title="Steps wait for input 34% of the time",
    evidence={"wait": "51 ms"},
    fix="ds = ds.prefetch(tf.data.AUTOTUNE)",
    location="train.py:31",
)


def worker_record(
    name: str,
    step_s: float = 0.1,
    wait_s: float = 0.002,
    steps: int = 60,
    strategy: str = "MultiWorkerMirroredStrategy",
    ended: str = "completed",
    cluster: tuple[str, ...] = ("worker-0", "worker-1"),
    findings: tuple[Finding, ...] = (),
    collective_s: float | None = None,
    inputs: tuple[DistributedInput, ...] = (),
    timeline: bool = False,
) -> Record:
    """``timeline``: its steps in 1 s windows too, as a watched run keeps them (a merge
    draws each worker's; its tests that compare figures leave them out)."""
    kind, _, index = name.rpartition("-")
    counted = steps - 1
    facts = Facts(
        program=ProgramFacts(
            command=("train.py",),
            ended=ended,
            exit_code={"completed": 0, "terminated": 143, "exception": 1}.get(ended, 0),
            error="ValueError: boom" if ended == "exception" else None,
            seconds=steps * step_s + 5,
            tensorflow_imported=True,
        ),
        steps=StepFacts(
            source="tf-data",
            marker="next() on a tf.data iterator at train.py:40",
            count=steps,
            warmup=1,
            median_s=step_s,
            p90_s=step_s * 1.05,
            total_s=step_s * counted,
            input_wait_fraction=wait_s / step_s,
            input_wait_median_s=wait_s,
            input_wait_source="next() timing",
            timeline=_windows(steps, step_s, wait_s) if timeline else None,
        ),
        distribute=DistributeFacts(
            strategy=strategy,
            replicas=len(cluster),
            collective_step_s=collective_s,
            collective_share=None if collective_s is None else collective_s / step_s,
            workers=len(cluster),
            inputs=inputs,
        ),
        task=TaskFacts(
            name=name,
            source="TF_CONFIG",
            task_type=kind,
            task_index=int(index),
            hostname=f"host-{index}",
            pid=100 + int(index),
            cluster=cluster,
        ),
    )
    return Record(command="run", facts=facts, findings=list(findings))


def _windows(steps: int, step_s: float, wait_s: float) -> StepTimeline:
    """``steps`` steps of ``step_s`` from 5 s into the run, in 1 s windows, the odd ones
    a tenth slower (a timeline is not a flat line)."""
    starts = [5.0 + i * step_s for i in range(steps)]
    spans = []
    for w in range(int(starts[0]), int(starts[-1]) + 1):
        n = sum(1 for t in starts if w <= t < w + 1)
        step = step_s * (1.1 if w % 2 else 1.0)
        if n:
            spans.append(StepSpan(float(w), n, step, step, step, n * step, n * wait_s))
    return StepTimeline(width_s=1.0, windows=tuple(spans))


def save(directory: Path, record: Record) -> Path:
    assert record.facts.task is not None
    return record.save(directory / f"{record.facts.task.name}.json")


def worker_run(name: str, step_s: float, wait_s: float | None, steps: int = 60, **kw) -> WorkerRun:
    """One row of a merged ``workers`` section, for the rule's tests."""
    return WorkerRun(
        name=name,
        state=kw.pop("state", "ok"),
        file=f"{name}.json",
        strategy=kw.pop("strategy", "MultiWorkerMirroredStrategy"),
        step_source="tf-data",
        steps=steps,
        counted_steps=steps - 1,
        step_median_s=kw.pop("median_s", step_s),
        step_p90_s=step_s,
        step_mean_s=step_s,
        input_wait_s=wait_s,
        input_wait_by=None if wait_s is None else "next() timing",
        **kw,
    )
