"""Cost of live metrics: `gpuwhy run` with and without `--metrics-port`, scraped every
second, side by side; and the exporter's memory over many updates.

Overhead: each workload (benchmarks/workloads/, longer runs via WORKLOAD_EPOCHS) prints
its own median step time; this script runs it alternately under `gpuwhy run` and under
`gpuwhy run --metrics-port P --metrics-interval S` while a thread GETs /metrics every
second, and prints the median of the medians and the median of the paired ratios. The
budget: 1% of the median step. --interval 1 (the default here) updates ten times as
often as gpuwhy's default of 10 s: the worst case.

Memory: PrometheusMetrics.update on facts that grow (steps, traces of 50 functions,
findings that come and go) for --updates updates (100,000 = 11 days at the default
interval); tracemalloc's current size after 1,000 updates and at the end, and the size
of the exposition: bounded label sets keep both flat.

    .venv/bin/python benchmarks/bench_metrics.py [--runs 5] [--interval 1] [--updates 100000]
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import threading
import tracemalloc
import urllib.request
from pathlib import Path

HERE = Path(__file__).resolve().parent
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))
WORKLOADS = ("keras_fit", "custom_loop")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def step_time(command: list[str], scrape_port: int | None = None) -> tuple[float, int]:
    """The workload's median step, and how many scrapes answered meanwhile."""
    env = {**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3", "WORKLOAD_EPOCHS": "60"}
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env
    )
    scraped = [0]
    done = threading.Event()

    def scrape() -> None:
        while not done.wait(1.0):
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{scrape_port}/metrics", timeout=1):
                    scraped[0] += 1
            except OSError:
                pass

    thread = threading.Thread(target=scrape, daemon=True)
    if scrape_port is not None:
        thread.start()
    out, _ = process.communicate()
    done.set()
    (line,) = [ln for ln in out.splitlines() if ln.startswith("MEDIAN_STEP_S ")]
    return float(line.split()[1]), scraped[0]


def overhead(runs: int, interval: float) -> None:
    print(f"{'workload':<12} {'run':>10} {'+ metrics':>10} {'ratio':>7} {'budget':>7}  scrapes/run")
    for name in WORKLOADS:
        script = str(HERE / "workloads" / f"{name}.py")
        plain, served, ratios, scrapes = [], [], [], []
        for _ in range(runs):  # alternate, so drift hits both alike
            base, _ = step_time([GPUWHY, "run", "-o", os.devnull, script])
            port = free_port()
            command = [GPUWHY, "run", "-o", os.devnull, "--metrics-port", str(port),
                       "--metrics-interval", str(interval), script]  # fmt: skip
            with_metrics, count = step_time(command, port)
            plain.append(base)
            served.append(with_metrics)
            ratios.append(with_metrics / base)
            scrapes.append(count)
        print(
            f"{name:<12} {statistics.median(plain) * 1e3:>8.3f}ms {statistics.median(served) * 1e3:>8.3f}ms "
            f"{statistics.median(ratios):>7.3f} {1.01:>7.2f}  {statistics.median(scrapes):.0f}"
        )


def memory(updates: int) -> None:
    from gpuwhy.collect.step_histogram import StepHistogram
    from gpuwhy.export.metrics import values
    from gpuwhy.export.prometheus import PrometheusMetrics
    from gpuwhy.facts import Facts, StepFacts, TracedFunction, TracingFacts

    metrics = PrometheusMetrics(
        {"Hostname": "bench", "run_id": "m"}, {"mode": "run", "command": "x", "version": "0"}
    )
    ids = ("input.bound", "launch.eager-ops", "tracing.retracing", "gpu.underutilized")
    tracemalloc.start()
    sizes = {}
    published = StepHistogram()
    for update in range(1, updates + 1):
        steps = StepFacts(
            source="keras-fit", marker="m", count=update * 100, input_wait_fraction=0.3
        )
        functions = tuple(TracedFunction(name=f"f{i}", traces=update + i) for i in range(50))
        facts = Facts(steps=steps, tracing=TracingFacts(functions=functions))
        active = [(ids[(update + k) % len(ids)], "high") for k in range(update % 3)]
        published.add(0.01, 100)  # 100 steps per update
        metrics.update(values(facts, active, update * 10.0, published))
        if update in (1_000, updates):
            sizes[update] = (tracemalloc.get_traced_memory()[0], len(metrics.exposition()))
    tracemalloc.stop()
    for update, (held, exposed) in sizes.items():
        print(
            f"after {update:>7,} updates: {held / 1024:8.1f} KiB held by Python, exposition {exposed:,} bytes"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--interval", type=float, default=1.0)
    parser.add_argument("--updates", type=int, default=100_000)
    parser.add_argument("--only", choices=("overhead", "memory"))
    args = parser.parse_args()
    if args.only != "memory":
        overhead(args.runs, args.interval)
    if args.only != "overhead":
        memory(args.updates)


if __name__ == "__main__":
    main()
