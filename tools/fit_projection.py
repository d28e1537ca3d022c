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
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks")]
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

from bench_projection import Projector, Row, rows, summary, worst  # noqa: E402

GRID = [0.7, 0.8, 0.88, 0.94, 1.0, 1.06, 1.13, 1.25, 1.4]
MARGIN = 1.1  # the band's ends beyond the held-out errors
NARROWEST = (0.87, 1.15)  # no band narrower than this, however few the errors
MIN_HELD_OUT = 3  # fewer held-out errors than this: the default band


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
    every = rows(projector)
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
    summary(projector, every)
    print("ERROR_BAND = {")
    for key, errors in sorted(groups.items()):
        if len(errors) >= MIN_HELD_OUT:
            print(f"    {key!r}: {band(errors)},  # {len(errors)} held-out figures")
    print("}")


if __name__ == "__main__":
    main()
