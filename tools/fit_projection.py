"""Fit the projection's per-architecture constants, and derive its bands, from the figures
in benchmarks/projection_figures.py.

For each architecture named, the efficiencies given (``--keys fp16.matmul,tf32.conv``)
are searched on a multiplicative grid, one after the other for a few passes, to minimise
the worst error of that architecture's "fit" rows (the projected throughput, or ratio of
throughputs, over the published one; the median breaks ties). Then every row is
projected with the constants as they stand in gpuwhy/projection/architectures.py (or as
fitted here, with ``--fit``) and, per architecture, precision and XLA, the held-out rows'
errors give the band ``architectures.ERROR_BAND`` should hold: the range of the errors
with a tenth more either side, never narrower than 0.87-1.15. It prints both; it
changes no file.

Each row's traced step is read from the folder that ``bench_projection.py --cache``
fills (rows not in it are traced first, minutes each on a 2-core CPU).

    .venv/bin/python tools/fit_projection.py --cache /tmp/projection-cache \\
        [--fit Hopper:fp16.matmul,tf32.matmul,tf32.conv] [--fit Ada:...]
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

GRID = [0.7, 0.8, 0.88, 0.94, 1.0, 1.06, 1.13, 1.25, 1.4]
MARGIN = 1.1  # the band's ends beyond the held-out errors
NARROWEST = (0.87, 1.15)  # no band narrower than this, however few the errors
MIN_HELD_OUT = 3  # fewer held-out errors than this: the default band
COMPARABLE = 1.33  # a ratio's reference GPU within this of its projection


@dataclass
class Row:
    kind: str  # fit | held out
    arch: str
    precision: str  # fp32 | fp16
    xla: bool
    label: str
    measured: float
    figure: Any


class Projector:
    """Projects the figures' traced steps, each audited once (kept in ``cache``)."""

    def __init__(self, cache: str) -> None:
        self.cache = cache
        self.traced: dict[tuple, Any] = {}
        self.placements: dict[tuple, Any] = {}

    def placement(self, model: str, precision: str, xla: bool, batch: int) -> Any:
        key = (model, precision, xla, batch)
        if key not in self.placements:
            import bench_projection as bench
            from projection_figures import Published

            from gpuwhy.collect.placement import AuditTarget, audit_functions

            case = Published(model, "A100", precision, batch, xla, 1.0, "fit")
            kept = bench.cached(self.cache, case)
            if kept is None:
                if (model, precision, xla) not in self.traced:
                    self.traced[(model, precision, xla)] = bench.traced_train_step(
                        model, precision, xla
                    )
                target = [AuditTarget("train_step", self.traced[(model, precision, xla)], "fit")]
                kept, _ = audit_functions(target, batch=batch)
                bench.keep(self.cache, case, kept)
            self.placements[key] = kept
        return self.placements[key]

    def throughput(self, model: str, gpu: str, precision: str, xla: bool, batch: int) -> float:
        from gpuwhy.gpu_specs import find_gpu
        from gpuwhy.projection.cost import project_step

        found = project_step(self.placement(model, precision, xla, batch), find_gpu(gpu))
        assert found is not None
        return batch / found.step.mid

    def comparable(self, row: Row) -> bool:
        """A ratio's reference GPU runs in its harness about as fast as projected (within
        COMPARABLE): else the ratio measures the harness as much as the generations."""
        f = row.figure
        if not hasattr(f, "over") or not f.over_value:
            return True
        own = self.throughput(f.model, f.over, f.precision, f.xla, f.over_batch) / f.over_value
        return 1 / COMPARABLE <= own <= COMPARABLE

    def error(self, row: Row) -> float:
        """Projected over measured: > 1 where the projection is too fast."""
        f = row.figure
        if row.kind.startswith("sweep"):
            mine = self.throughput(f.model, f.gpu, f.precision, f.xla, f.batch) / self.throughput(
                f.model, f.gpu, f.precision, f.xla, f.over_batch
            )
        elif hasattr(f, "over"):
            mine = self.throughput(f.model, f.gpu, f.precision, f.xla, f.batch) / self.throughput(
                f.model, f.over, f.precision, f.xla, f.over_batch
            )
        else:
            mine = self.throughput(f.model, f.gpu, f.precision, f.xla, f.batch)
        return mine / row.measured


def rows() -> list[Row]:
    from projection_figures import FP32, PUBLISHED, RELATIVE, SWEEPS

    from gpuwhy.gpu_specs import find_gpu
    from gpuwhy.projection.architectures import family

    found = []
    for p in PUBLISHED:
        label = f"{p.model} {p.gpu} {p.precision} b{p.batch} xla={int(p.xla)}"
        found.append(
            Row(
                p.kind,
                family(find_gpu(p.gpu)),
                "fp32" if p.precision == FP32 else "fp16",
                p.xla,
                label,
                p.throughput,
                p,
            )  # fmt: skip
        )
    for r in RELATIVE:
        label = f"{r.model} {r.gpu} b{r.batch} / {r.over} b{r.over_batch} {r.precision}"
        found.append(
            Row(
                r.kind,
                family(find_gpu(r.gpu)),
                "fp32" if r.precision == FP32 else "fp16",
                r.xla,
                label,
                r.ratio,
                r,
            )  # fmt: skip
        )
    for s in SWEEPS:
        label = f"{s.model} {s.gpu} b{s.batch} / b{s.over_batch} {s.precision}"
        found.append(
            Row(
                "sweep",
                family(find_gpu(s.gpu)),
                "fp32" if s.precision == FP32 else "fp16",
                s.xla,
                label,
                s.ratio,
                s,
            )  # fmt: skip
        )
    return found


def worst(errors: Iterable[float]) -> tuple[float, float]:
    logs = [abs(math.log(e)) for e in errors]
    return (max(logs), statistics.median(logs)) if logs else (0.0, 0.0)


def fit(
    projector: Projector, arch: str, groups: list[list[tuple[str, str]]], chosen: list[Row]
) -> None:
    """Each group of keys (``tf32.conv=tf32.matmul``: one value for both) searched in
    turn on GRID around its value, three passes."""
    from gpuwhy.projection import architectures

    base = architectures.EFFICIENCY.get(arch) or architectures.EFFICIENCY[arch.split()[0]]
    table = dict(base)
    architectures.EFFICIENCY[arch] = table
    for _ in range(3):
        for keys in groups:
            start = table[keys[0]]
            scored = []
            for factor in GRID:
                for key in keys:
                    table[key] = start * factor
                scored.append((worst(projector.error(r) for r in chosen), start * factor))
            for key in keys:
                table[key] = min(scored)[1]
    print(f"{arch}: " + ", ".join(f"{k[0]}.{k[1]} = {v:.3f}" for k, v in sorted(table.items())))


def band(errors: list[float]) -> tuple[float, float]:
    low = min(min(errors) / MARGIN, NARROWEST[0])
    high = max(max(errors) * MARGIN, NARROWEST[1])
    return round(low, 2), round(high, 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cache", required=True)
    parser.add_argument("--fit", action="append", default=[], metavar="ARCH:KEYS")
    args = parser.parse_args()
    projector = Projector(args.cache)
    every = rows()
    for row in every:
        if row.kind != "sweep" and not projector.comparable(row):
            row.kind = "not comparable"
    for spec in args.fit:
        arch, _, keys = spec.partition(":")
        parsed = [[tuple(k.split(".")) for k in group.split("=")] for group in keys.split(",")]
        chosen = [r for r in every if r.arch == arch and r.kind == "fit"]
        fit(projector, arch, parsed, chosen)  # type: ignore[arg-type]
    groups: dict[tuple[str, str, bool], list[float]] = {}
    for row in every:
        error = projector.error(row)
        print(f"{row.kind:<9} {row.arch:<9} {row.label:<58} {error:5.2f}")
        if row.kind == "held out":
            # a step time's error: the published step over the projected one
            groups.setdefault((row.arch, row.precision, row.xla), []).append(error)
    for name in ("fit", "held out", "sweep", "not comparable"):
        for arch in sorted({r.arch for r in every}):
            errors = [projector.error(r) for r in every if r.kind == name and r.arch == arch]
            if errors:
                within = sum(1 for e in errors if 0.67 <= e <= 1.5)
                big, typical = worst(errors)
                print(f"{name} {arch}: {within}/{len(errors)} within 0.67-1.5x, median error "
                      f"x{math.exp(typical):.2f}, worst x{math.exp(big):.2f}")  # fmt: skip
    print("ERROR_BAND = {")
    for key, errors in sorted(groups.items()):
        if len(errors) >= MIN_HELD_OUT:
            print(f"    {key!r}: {band(errors)},  # {len(errors)} held-out figures")
    print("}")


if __name__ == "__main__":
    main()
