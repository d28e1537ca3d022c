"""Many workers, one report: which task of a training cluster a record is (section
``task``, in every watched run) and what ``gpuwhy merge`` read from a directory of
them (section ``workers``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwhy.facts.steps import StepSpan


@dataclass(frozen=True)
class TaskFacts:
    """Section ``task``: which task of a training cluster this process was, from the
    launcher's environment (TF_CONFIG, else Slurm), so that ``gpuwhy run --out-dir DIR``
    names its record after it and ``gpuwhy merge DIR`` knows who is missing.

    ``name`` is TF_CONFIG's ``<type>-<index>`` (``chief-0``, ``worker-1``), else Slurm's
    ``worker-<SLURM_PROCID>``, else ``<hostname>-<pid>`` (``source`` says which).
    ``cluster`` lists every task the cluster spec names, the same way."""

    name: str
    source: str  # TF_CONFIG | Slurm | process
    task_type: str | None = None
    task_index: int | None = None
    hostname: str | None = None
    pid: int | None = None
    slurm_job_id: str | None = None
    cluster: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerInput:
    """One dataset a worker distributed, as ``gpuwhy merge`` compares it with the other
    workers' (DistributedInput, reduced to what the comparison needs)."""

    how: str  # experimental_distribute_dataset | distribute_datasets_from_function
    source: str | None = None  # the pipeline's source as written, and where
    source_location: str | None = None
    shard_applied: str | None = None  # what TF's auto-shard does to it (OFF: nothing)
    sharded_by: str | None = None  # shard() | input_pipeline_id | None
    shuffled: bool = False
    reads_digest: str | None = None  # what its pipeline reads (None: unknowable)
    read_files: tuple[str, ...] = ()


@dataclass(frozen=True)
class WorkerRun:
    """One task's record as ``gpuwhy merge`` read it: how the task ended and its per-step
    figures (means over the steps after warm-up unless named median or p90)."""

    name: str  # the task (worker-1), or the file's name where the record does not say
    state: str  # ok | interrupted | failed | unreadable | missing
    file: str | None = None  # the record's file name in the directory (None: missing)
    note: str | None = None  # what is wrong with it: the read error, how the run ended
    hostname: str | None = None
    ended: str | None = None  # as the record's program section says (completed ...)
    exit_code: int | None = None
    strategy: str | None = None  # the tf.distribute strategy it ran
    step_source: str | None = None  # what marked its steps (keras-fit, tf-data ...)
    steps: int = 0  # steps it ran (the record's count: all of them, not only those kept)
    counted_steps: int = 0  # of those, after warm-up
    step_median_s: float | None = None
    step_p90_s: float | None = None
    step_mean_s: float | None = None
    input_wait_s: float | None = None  # per step, waiting for its input (mean)
    input_wait_median_s: float | None = None  # its median (where timed step by step)
    input_wait_by: str | None = None  # how: "next() timing", "tf.data gap timer", or
    # "outside <fn>": the time per step outside the step function (its Python loop:
    # next() on a distributed iterator, logging), where the wait itself was not timed
    gpu_busy: float | None = None  # NVML utilisation over the run, mean of its GPUs
    collective_step_s: float | None = None  # inside collective ops per step (measured)
    collective_share: float | None = None
    inputs: tuple[WorkerInput, ...] = ()  # the datasets it distributed (multi-worker)
    # its host's CPU use over the run (all processes, all cores) and its cores: a host
    # whose cores were all busy slows every worker on it alike
    host_cores: int | None = None
    host_cpu_busy: float | None = None
    # its main loop's step windows after warm-up (its record's step timeline): what
    # `gpuwhy diff` of two merged records resamples
    windows: tuple[StepSpan, ...] = ()


@dataclass(frozen=True)
class MergedFinding:
    """A finding of the workers' own records, once: the same id, title and place on
    several workers, listing the workers it holds on (evidence and fix are the first
    worker's, in task order)."""

    id: str
    severity: str
    title: str
    workers: tuple[str, ...]
    evidence: dict[str, Any] = field(default_factory=dict)
    fix: str | None = None
    estimated_gain: str | None = None
    location: str | None = None
    gain_value: float | None = None


@dataclass(frozen=True)
class WorkersFacts:
    """Section ``workers``: the records of a cluster's tasks that ``gpuwhy merge``
    read from one directory, in task order, with those the cluster spec names that
    left none (state ``missing``), and their findings deduplicated."""

    directory: str
    workers: tuple[WorkerRun, ...] = ()
    findings: tuple[MergedFinding, ...] = ()
