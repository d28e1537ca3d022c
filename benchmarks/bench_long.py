"""Runs of any length: gpuwhy's memory, overhead, end-of-run time and record over a long
run of small steps, against the same script under plain python.

The workload (benchmarks/workloads/long_loop.py) is ``for x in ds: step(x)`` over tf.data
with a ``tf.function`` step of about 1 ms on this project's machine, or Keras ``fit`` of the
same model; it prints its loop time (to its last step's end: the final ``next()`` may wait
seconds on tf.data, under python too, near the start of a run) and ``time.time()`` at its
last line. Each length runs alternately as ``python SCRIPT`` and ``python -m gpuwhy run
--json X --html Y SCRIPT`` (``--metrics-port``: a third side, ``run`` with live metrics
served and scraped every second), the first side of each pair alternating too, and every
figure is a median over ``--runs`` pairs:

- peak RSS: ``ru_maxrss`` of the process from ``os.wait4`` (the kernel's high-water
  mark, the same figure as ``/usr/bin/time -v``), and gpuwhy's minus python's, paired;
- growth: VmRSS read from ``/proc/PID/status`` every 0.2 s; the rise from 10 % of the
  loop to its end, per step (flat: about 0 B/step);
- loop ratio: gpuwhy's loop time over python's, paired;
- end: seconds from the program's last line to the JSON written, to the HTML written
  and to the process's exit;
- record: the JSON's size; the steps the HTML timeline draws (one by one, or in the step
  timeline's windows) over the steps run, and the time its step row spans (first point
  to last, read from the HTML) over the workload's loop time.

``--nvml`` (``--nvml-hours H``, 24 by default) feeds the GPU sampler an NVML recording
(tests/data/nvml/constructed_h100_busy.jsonl: the fixtures hold no real recording yet,
tools/record_nvml.py makes one on a GPU machine), its ticks again and again with times
advancing at 10 Hz, as fast as the sampler reads: H hours of samples. It prints the
sampler's memory (tracemalloc), the time to make its section and that section's JSON size
(the sampler alone: no program, rules or HTML).

Targets (issue #25): gpuwhy's RSS minus python's at most 64 MB at every length and flat,
loop ratio at most 1.02, at most 2 s from the program's end to the report, the JSON at
most 1 MB, the HTML timeline covering 100 % of the run.

    .venv/bin/python benchmarks/bench_long.py [--steps 10000 100000] [--runs 3]
        [--long (adds 1,000,000 steps and a Keras fit of 100,000)] [--fit N]
        [--metrics-port] [--nvml] [--nvml-hours 24] [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import tracemalloc
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from gpuwhy.collect.sampler import GpuSampler  # noqa: E402 - this checkout's gpuwhy
from gpuwhy.facts import codec  # noqa: E402

SCRIPT = str(HERE / "workloads" / "long_loop.py")
NVML_RECORDING = ROOT / "tests" / "data" / "nvml" / "constructed_h100_busy.jsonl"
SAMPLE_S = 0.2  # VmRSS sampling period
MB = 1e6
TARGETS = "targets: RSS +<=64 MB and flat, ratio <=1.02, end <=2 s, JSON <=1 MB, covered 100%"


@dataclass
class Run:
    """One process: what it printed, what the kernel and /proc said, what it wrote."""

    side: str
    loop_s: float
    steps: int
    end_wall: float
    exit_wall: float
    peak_rss: int  # bytes
    rss: list[tuple[float, int]] = field(default_factory=list)  # (time.time(), bytes)
    json_at: float | None = None
    html_at: float | None = None
    json_bytes: int | None = None
    html_bytes: int | None = None
    series_steps: int | None = None
    record_steps: int | None = None
    series_span_s: float | None = None
    scrapes: int = 0
    end_of_input_s: float = 0.0  # the loop's last next(): tf.data's, not the steps'

    @property
    def loop_start(self) -> float:
        return self.end_wall - self.end_of_input_s - self.loop_s

    def loop_rss(self) -> tuple[tuple[float, int], tuple[float, int]] | None:
        """The VmRSS samples at 10 % of the loop and at its end (time, bytes)."""
        begin = self.loop_start + 0.1 * self.loop_s
        inside = [(t, rss) for t, rss in self.rss if begin <= t <= self.end_wall]
        return (inside[0], inside[-1]) if len(inside) >= 2 else None

    def growth_per_step(self) -> float | None:
        """Bytes per step from 10 % of the loop to its end (VmRSS samples)."""
        ends = self.loop_rss()
        if ends is None:
            return None
        (t0, r0), (t1, r1) = ends
        steps = self.steps * (t1 - t0) / self.loop_s
        return (r1 - r0) / steps if steps > 0 else None

    def rss_after_end(self) -> int | None:
        """The highest VmRSS seen after the program's last line (gpuwhy's stop, rules,
        renderers)."""
        after = [rss for t, rss in self.rss if t > self.end_wall]
        return max(after) if after else None


def vm_rss(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError):
        return None
    return None


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_once(side: str, steps: int, mode: str, out: Path) -> Run:
    """``side``: python | gpuwhy | metrics (gpuwhy with --metrics-port, scraped)."""
    env = {
        **os.environ,
        "TF_CPP_MIN_LOG_LEVEL": "3",
        "LONG_STEPS": str(steps),
        "LONG_MODE": mode,
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
    }
    json_path, html_path = out / f"{side}.json", out / f"{side}.html"
    for path in (json_path, html_path):
        path.unlink(missing_ok=True)
    port = free_port() if side == "metrics" else None
    if side == "python":
        command = [sys.executable, SCRIPT]
    else:
        command = [sys.executable, "-m", "gpuwhy", "run", "-o", os.devnull,
                   "--json", str(json_path), "--html", str(html_path)]  # fmt: skip
        if port is not None:
            command += ["--metrics-port", str(port), "--metrics-interval", "1"]
        command.append(SCRIPT)
    stdout = out / f"{side}.out"
    with open(stdout, "w") as sink:
        process = subprocess.Popen(command, stdout=sink, stderr=subprocess.DEVNULL, env=env)
    rss: list[tuple[float, int]] = []
    scrapes = [0]
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            value = vm_rss(process.pid)
            if value is not None:
                rss.append((time.time(), value))
            if port is not None and len(rss) % 5 == 0:  # about once a second
                try:
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=1):
                        scrapes[0] += 1
                except OSError:
                    pass
            done.wait(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    _, status, usage = os.wait4(process.pid, 0)  # rusage of this child alone
    exit_wall = time.time()
    process.returncode = os.waitstatus_to_exitcode(status)
    done.set()
    sampler.join()
    printed = dict(
        line.split(maxsplit=1) for line in stdout.read_text().splitlines() if " " in line
    )
    if process.returncode != 0 or "END_WALL" not in printed:
        raise SystemExit(f"{side} run failed ({process.returncode}): {' '.join(command)}")
    run = Run(
        side=side,
        loop_s=float(printed["LOOP_S"]),
        steps=int(printed["STEPS"]),
        end_wall=float(printed["END_WALL"]),
        exit_wall=exit_wall,
        peak_rss=usage.ru_maxrss * 1024,
        rss=rss,
        scrapes=scrapes[0],
        end_of_input_s=float(printed.get("END_OF_INPUT_S", 0.0)),
    )
    if side != "python":
        read_record(run, json_path, html_path)
    return run


def read_record(run: Run, json_path: Path, html_path: Path) -> None:
    if html_path.exists():
        run.html_at, run.html_bytes = html_path.stat().st_mtime, html_path.stat().st_size
    if not json_path.exists():
        return
    run.json_at, run.json_bytes = json_path.stat().st_mtime, json_path.stat().st_size
    record = json.loads(json_path.read_text())
    steps = record.get("steps") or {}
    run.record_steps = steps.get("count")
    run.series_steps = drawn_steps(steps)
    if html_path.exists():
        run.series_span_s = step_row_span(html_path.read_text(encoding="utf-8"))


def drawn_steps(steps: dict) -> int:
    """The steps the HTML timeline draws: those kept one by one where the record keeps
    every step, else the step timeline's, whose windows hold every step counted (the
    first and last ones are drawn one by one over them)."""
    windows = (steps.get("timeline") or {}).get("windows") or []
    if steps.get("all_kept", True) or not windows:
        return len(steps.get("durations") or []) * max(1, steps.get("steps_per_call") or 1)
    return sum(w.get("steps") or 0 for w in windows)


TIMELINE_PLOT = re.compile(r'<section id="timeline">.*?<div class="plot" id="([^"]+)"', re.S)


def step_row_span(html: str) -> float | None:
    """Seconds from the first to the last point the HTML timeline draws in its step row
    (the figure's data as the page hands it to Plotly)."""
    plot = TIMELINE_PLOT.search(html)
    if plot is None:
        return None
    figure = re.search(
        r'<script type="application/json" data-figure="' + re.escape(plot.group(1)) + r'">'
        r"(.*?)</script>",
        html,
        re.S,
    )
    if figure is None:
        return None
    traces = json.loads(figure.group(1)).get("data") or []
    xs = [
        x
        for trace in traces
        if trace.get("yaxis", "y") == "y"
        for x in trace.get("x") or ()
        if isinstance(x, (int, float))
    ]
    return max(xs) - min(xs) if xs else None


def median(values) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def fmt(value: float | None, spec: str, scale: float = 1.0) -> str:
    return "n/a" if value is None else format(value / scale, spec)


def bench_length(label: str, steps: int, mode: str, runs: int, sides: list[str], keep: Path):
    """Alternating runs of every side; one table row per side (medians over runs)."""
    out = keep / f"{mode}_{steps}"
    out.mkdir(parents=True, exist_ok=True)
    results: dict[str, list[Run]] = {side: [] for side in sides}
    for number in range(runs):
        order = sides if number % 2 == 0 else sides[::-1]  # who goes first alternates
        for side in order:
            run = run_once(side, steps, mode, out)
            results[side].append(run)
            print(f"  {label} run {number + 1} {side:<8} {describe(run)}", flush=True)
    base = results["python"]
    rows = []
    for side in sides:
        mine = results[side]
        extra = [w.peak_rss - p.peak_rss for w, p in zip(mine, base)]
        ratios = [w.loop_s / p.loop_s for w, p in zip(mine, base)]
        end_json = [r.json_at - r.end_wall if r.json_at else None for r in mine]
        end_html = [r.html_at - r.end_wall if r.html_at else None for r in mine]
        end_exit = [r.exit_wall - r.end_wall for r in mine]
        covered_steps = [r.series_steps / r.record_steps if r.record_steps else None for r in mine]
        covered_time = [r.series_span_s / r.loop_s if r.series_span_s else None for r in mine]
        rows.append(
            f"{label:<10} {side:<8} {fmt(median(r.loop_s for r in mine), '8.1f')}s "
            f"{fmt(median(r.loop_s / r.steps for r in mine), '6.3f', 1e-3)}ms "
            f"{fmt(median(ratios), '6.3f')} "
            f"{fmt(median(r.peak_rss for r in mine), '7.0f', MB)} "
            f"{fmt(median(extra), '+7.0f', MB)} "
            f"{fmt(median(r.growth_per_step() for r in mine), '8.0f')} "
            f"{fmt(median(r.rss_after_end() for r in mine), '7.0f', MB)} "
            f"{fmt(median(end_json), '6.2f')} {fmt(median(end_html), '6.2f')} "
            f"{fmt(median(end_exit), '6.2f')} "
            f"{fmt(median(r.json_bytes for r in mine), '7.2f', MB)} "
            f"{fmt(median(covered_steps), '6.1%')} {fmt(median(covered_time), '6.1%')}"
        )
    return rows


def describe(run: Run) -> str:
    ends = run.loop_rss()
    text = (
        f"loop {run.loop_s:.1f}s peak {run.peak_rss / MB:.0f} MB "
        + (f"RSS {ends[0][1] / MB:.0f}->{ends[1][1] / MB:.0f} MB in the loop " if ends else "")
        + f"({fmt(run.growth_per_step(), '.0f')} B/step) exit +{run.exit_wall - run.end_wall:.2f}s"
        + f" last next() {run.end_of_input_s:.2f}s"
    )
    if run.json_bytes is not None:
        text += f" json {run.json_bytes / MB:.2f} MB series {run.series_steps}/{run.record_steps}"
    if run.side == "metrics":
        text += f" scrapes {run.scrapes}"
    return text


HEADER = (
    f"{'length':<10} {'side':<8} {'loop':>9} {'step':>8} {'ratio':>6} {'peakMB':>7} "
    f"{'+MB':>7} {'B/step':>8} {'endMB':>7} {'json':>6} {'html':>6} {'exit':>6} "
    f"{'jsonMB':>7} {'steps%':>6} {'time%':>6}"
)
LEGEND = (
    "loop: the workload's loop time; step: loop/steps; ratio: loop time over python's, "
    "paired; peakMB: ru_maxrss; +MB: peak minus python's, paired; B/step: VmRSS growth "
    "from 10% of the loop to its end; endMB: highest VmRSS after the program's last line; "
    "json/html/exit: seconds from the program's last line to the JSON written, the HTML "
    "written, the process gone; steps%/time%: the steps the HTML timeline draws (one by one "
    "or in windows) over the steps run, and its step row's span over the loop's time."
)


# -- the GPU sampler on a long NVML series ---------------------------------------------


class LoopedRecording:
    """A recording's ticks again and again, times advancing at the recording's rate, up
    to ``ticks`` ticks; read as fast as the sampler asks (not paced). Each tick is a
    fresh dict, as NVML's would be."""

    paced = False

    def __init__(self, path: Path, ticks: int) -> None:
        lines = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        self.header = lines[0]
        self.ticks = [line for line in lines[1:] if line.get("kind") == "tick"]
        self.period = 1.0 / float(self.header.get("hz", 10.0))
        self.total = ticks
        self.position = 0

    def open(self, t0: float) -> dict:
        self.position = 0
        return dict(self.header)

    def read(self, processes: bool) -> dict | None:
        if self.position >= self.total:
            return None
        tick = json.loads(json.dumps(self.ticks[self.position % len(self.ticks)]))
        tick["t"] = self.position * self.period
        for gpu in tick.get("gpus", ()):
            for key in ("pcie_tx", "pcie_rx"):  # counters keep rising across the loops
                if gpu.get(key):
                    value, vtype, stamp = gpu[key][:3]
                    lap = self.position // len(self.ticks)
                    gpu[key] = [value + lap * (1 << 30), vtype, stamp + int(tick["t"] * 1e6)]
        self.position += 1
        return tick

    def close(self) -> None:
        pass


def bench_nvml(hours: float) -> None:
    ticks = int(hours * 3600 * 10)
    source = LoopedRecording(NVML_RECORDING, ticks)
    tracemalloc.start()
    base = tracemalloc.get_traced_memory()[0]
    sampler = GpuSampler(hz=10.0, source=source, pids=lambda: (4100,))
    started = time.perf_counter()
    sampler.start(started)
    sampler.wait()
    fed_s = time.perf_counter() - started
    held = tracemalloc.get_traced_memory()[0] - base
    tracemalloc.stop()
    sampler.stop()
    started = time.perf_counter()
    facts = sampler.facts()
    facts_s = time.perf_counter() - started
    started = time.perf_counter()
    text = json.dumps(codec.to_dict(facts), indent=2)
    json_s = time.perf_counter() - started
    gpu = facts.gpus[0]
    span = gpu.t[-1] - gpu.t[0] if gpu.t else 0.0
    print(
        f"\nGPU sampler, {NVML_RECORDING.name} looped: {ticks:,} ticks at 10 Hz "
        f"({hours:g} h of samples), fed in {fed_s:.1f} s"
    )
    print(
        f"  held by the sampler (tracemalloc) {held / MB:.1f} MB = {held / ticks:.0f} B/sample; "
        f"facts() {facts_s:.2f} s; section JSON {len(text) / MB:.1f} MB in {json_s:.2f} s; "
        f"samples kept {len(gpu.t):,}, span {span / 3600:.2f} h of {hours:g} h; "
        f"ticks counted {sampler.ticks:,}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--steps",
        type=int,
        nargs="*",
        default=[10_000, 100_000],
        help="loop lengths (none: only --fit)",
    )
    parser.add_argument("--runs", type=int, default=3, help="pairs per length")
    parser.add_argument(
        "--long", action="store_true", help="add 1,000,000 steps and a Keras fit of 100,000"
    )
    parser.add_argument("--fit", type=int, nargs="*", default=[], help="Keras fit lengths")
    parser.add_argument("--metrics-port", action="store_true", help="also run with live metrics")
    parser.add_argument("--nvml", action="store_true", help="also the 24 h NVML series")
    parser.add_argument("--nvml-only", action="store_true", help="only the NVML series")
    parser.add_argument("--nvml-hours", type=float, default=24.0)
    parser.add_argument("--keep", type=Path, help="keep records and outputs here")
    args = parser.parse_args()
    if not args.nvml_only:
        lengths = [("loop", n) for n in args.steps] + [("fit", n) for n in args.fit]
        if args.long:
            lengths += [("loop", 1_000_000), ("fit", 100_000)]
        sides = ["python", "gpuwhy"] + (["metrics"] if args.metrics_port else [])
        keep = args.keep or Path(tempfile.mkdtemp(prefix="bench_long_"))
        rows = []
        for mode, steps in dict.fromkeys(lengths):
            label = f"{mode} {steps // 1000}k" if steps < 1_000_000 else f"{mode} {steps // 10**6}M"
            rows += bench_length(label, steps, mode, args.runs, sides, keep)
        print(f"\n{HEADER}")
        print("\n".join(rows))
        print(f"\nmedians of {args.runs} alternating runs per side; {TARGETS}")
        print(LEGEND)
        print(f"records and outputs: {keep}")
    if args.nvml or args.nvml_only:
        bench_nvml(args.nvml_hours)


if __name__ == "__main__":
    main()
