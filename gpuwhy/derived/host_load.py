"""Other processes' load on the host's CPUs over a run: where the input pipeline had to
share the cores, its wait is not (only) its own. Measured once by the derivation stage
(stage.py); input.bound and the verdict apply input.bound's thresholds to it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.facts import Facts


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

    def judged(self, at: float, saturated_at: float) -> HostLoad | None:
        """This load where it counts for a reader: other processes' share at least
        ``at``, and the host's cores at least ``saturated_at`` busy (no idle core left
        to the input); else None."""
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
