"""Cost of watching a multi-worker run: two MultiWorkerMirroredStrategy workers on
localhost (benchmarks/workloads/multi_worker.py), run alternately as plain `python`
and under `gpuwhy run --out-dir` (every worker watched, records written as for
`gpuwhy merge`), side by side. Each run prints worker 0's median step; the figure is
the median of the paired ratios, against the budget of 3% (#16).

    .venv/bin/python benchmarks/bench_distribute.py [--runs 5] [--epochs 4]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "multi_worker.py")
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
BUDGET = 1.03


def free_ports(count: int) -> list[int]:
    sockets = [socket.socket() for _ in range(count)]
    try:
        for s in sockets:
            s.bind(("127.0.0.1", 0))
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


def cluster_step(watched: bool, epochs: int, out_dir: str) -> float:
    """Worker 0's median step over one run of the two-worker cluster."""
    ports = free_ports(2)
    processes = []
    for index in range(2):
        config = {
            "cluster": {"worker": [f"localhost:{p}" for p in ports]},
            "task": {"type": "worker", "index": index},
        }
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "WORKLOAD_EPOCHS": str(epochs),
            "TF_CONFIG": json.dumps(config),
        }
        command = [sys.executable, WORKLOAD]
        if watched:
            command = [GPUWHY, "run", "-o", os.devnull, "--out-dir", out_dir, WORKLOAD]
        processes.append(
            subprocess.Popen(
                command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
            )
        )
    outputs = [p.communicate(timeout=900)[0] for p in processes]
    (line,) = [ln for ln in outputs[0].splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    return float(line.split()[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--epochs", type=int, default=4)
    args = parser.parse_args()
    plain, watched, ratios = [], [], []
    with tempfile.TemporaryDirectory() as out_dir:
        for _ in range(args.runs):  # alternate, so drift hits both alike
            base = cluster_step(False, args.epochs, out_dir)
            seen = cluster_step(True, args.epochs, out_dir)
            plain.append(base)
            watched.append(seen)
            ratios.append(seen / base)
            print(
                f"  pair: python {base * 1e3:.3f} ms, gpuwhy run {seen * 1e3:.3f} ms, x{seen / base:.3f}"
            )
    print(
        f"2-worker MultiWorkerMirrored, median step: python {statistics.median(plain) * 1e3:.3f} ms, "
        f"gpuwhy run {statistics.median(watched) * 1e3:.3f} ms; median paired ratio "
        f"{statistics.median(ratios):.3f} (budget {BUDGET:.2f}, {args.runs} pairs)"
    )


if __name__ == "__main__":
    main()
