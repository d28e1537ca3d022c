"""How long `gpuwhy check` takes next to a bare `import tensorflow` (issue: at most 1.5x).

Both commands run alternately in fresh processes, so that both see the same machine load
and the same file cache; the figure is the ratio of the medians. Run:

    .venv/bin/python benchmarks/bench_check.py [--runs 7]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    out = Path(tempfile.mkdtemp()) / "check.json"
    commands = {
        "python -c 'import tensorflow'": [sys.executable, "-c", "import tensorflow"],
        "gpuwhy check --json": [GPUWHY, "check", "--json", str(out)],
    }
    for cmd in commands.values():  # warm the file cache once, not measured
        timed(cmd)
    samples: dict[str, list[float]] = {name: [] for name in commands}
    for _ in range(args.runs):
        for name, cmd in commands.items():
            samples[name].append(timed(cmd))
    medians = {name: statistics.median(values) for name, values in samples.items()}
    for name, values in samples.items():
        print(
            f"{name:34s} median {medians[name]:.2f} s  (min {min(values):.2f}, "
            f"max {max(values):.2f}, {len(values)} runs)"
        )
    names = list(commands)
    ratio = medians[names[1]] / medians[names[0]]
    print(f"ratio check / import: {ratio:.2f}x (budget 1.5x)")


if __name__ == "__main__":
    main()
