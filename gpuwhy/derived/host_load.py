"""Other processes' load on the host's CPUs over a run: where the input pipeline had to
share the cores, its wait is not (only) its own. Measured once by the derivation stage
(stage.py); input.bound and the verdict apply input.bound's thresholds to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.derived.pipeline import slowest_stage
from gpuwhy.facts import Facts, PipelineFacts


@dataclass(frozen=True)
class HostLoad:
    """Other processes' use of the host's CPUs over the run: busy (all processes, from
    /proc/stat) minus the program's own CPU time (process and children), as shares of
    the cores, and the load average at the end."""

    others: float
    busy: float
    own: float
    cores: int | None
    load_average: float | None
    large_wait: bool = False  # a wait of high_at or more: more than the load explains

    @property
    def text(self) -> str:
        cores = f"{self.cores} cores" if self.cores else "cores"
        load = f", load average {self.load_average:.1f}" if self.load_average is not None else ""
        return (
            f"other processes kept {self.others:.0%} of the host's {cores} busy during the "
            f"run (the program itself {self.own:.0%}{load})"
        )

    def judged(
        self, at: float, saturated_at: float, keeping_up_at: float | None = None
    ) -> HostLoad | None:
        """This load where it counts for a reader: other processes' share at least
        ``at``, and the host's cores at least ``saturated_at`` busy (no idle core left
        to the input); else None.

        ``keeping_up_at``: the share that counts, saturated or not, where the pipeline's
        own work keeps up with the steps many times over (``pipeline_keeps_up``): its
        waits cannot be its throughput, and a process that takes a core for a moment
        (a run's average hides the moment) is what made its threads wait."""
        if keeping_up_at is not None and self.others >= keeping_up_at:
            return self
        return self if self.busy >= saturated_at and self.others >= at else None

    def evidence(self) -> dict[str, Any]:
        return {
            "other_processes_cpu_fraction": round(self.others, 3),
            "host_cpu_busy_fraction": round(self.busy, 3),
            "program_cpu_fraction": round(self.own, 3),
            "host_cores": self.cores,
            "host_load_average": self.load_average,
        }


def host_load(facts: Facts) -> HostLoad | None:
    """Other processes' share of the host's cores over the run, where both the host's
    and the program's CPU use were measured (before any reader's threshold)."""
    tfdata = facts.tfdata
    if tfdata is None or tfdata.host_cpu_busy_fraction is None:
        return None
    if tfdata.process_cpu_fraction is None:
        return None
    others = tfdata.host_cpu_busy_fraction - tfdata.process_cpu_fraction
    return HostLoad(
        others,
        tfdata.host_cpu_busy_fraction,
        tfdata.process_cpu_fraction,
        tfdata.host_cores,
        tfdata.host_load_average,
    )


def pipeline_keeps_up(pipeline: PipelineFacts | None, step_s: float | None, below: float) -> bool:
    """The pipeline's slowest stage could feed the model a batch in under ``below`` of a
    step (TF's stage timers: how fast it alone could feed the model): the pipeline
    makes batches many times faster than the steps take them, so a wait for one is the
    host's scheduling (a thread waiting for a core) or a new iterator filling, never
    the pipeline's speed."""
    if pipeline is None or not step_s:
        return False
    slowest = slowest_stage(pipeline, range(len(pipeline.stages)))
    rate = pipeline.stages[slowest].root_elements_per_s if slowest is not None else None
    return rate is not None and rate > 0 and 1 / rate < below * step_s


def judged_for_input(
    load: HostLoad | None,
    options: dict[str, Any],
    pipeline: PipelineFacts | None,
    step_s: float | None,
) -> HostLoad | None:
    """``load`` where input.bound's ``options`` say it counts for steps of ``step_s``
    reading ``pipeline`` (the rule and the verdict ask alike)."""
    if load is None:
        return None
    keeping_up = pipeline_keeps_up(pipeline, step_s, options["keeps_up_below"])
    return load.judged(
        options["others_busy_at"],
        options["saturated_at"],
        options["others_busy_keeping_up_at"] if keeping_up else None,
    )
