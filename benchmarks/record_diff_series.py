"""Records the step series `bench_diff.py` resamples: real `gpuwhy run` records of the
same unchanged programs, several times each, kept as their step series only.

    .venv/bin/python benchmarks/record_diff_series.py --runs 10

Writes benchmarks/data/diff_series.json.gz (``--out``): for each run, the workload, its
steps kept one by one (µs), its step timeline windows and its timeline rows' CPU shares
and tf.function seconds. Run on the
machine whose noise the figures should describe (this project's 2-core CI machine).
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
OUT = HERE / "data" / "diff_series.json.gz"
ROW_FIELDS = (
    "start_s",
    "steps",
    "cpu_others_share",
    "cpu_process_share",
    "main_thread_queued_share",
    "threads_queued_s",
    "trace_s",
    "function_call_s",
)
WORKLOADS = {  # name: (script, environment)
    "custom_loop": ("workloads/custom_loop.py", {"WORKLOAD_EPOCHS": "60"}),
    "keras_fit": ("workloads/keras_fit.py", {"WORKLOAD_EPOCHS": "40"}),
    "input_bound": ("workloads/input_bound.py", {}),
}


def record(script: str, env: dict[str, str]) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "run.json"
        subprocess.run(
            [sys.executable, "-m", "gpuwhy", "run", "--json", str(out), str(HERE / script)],
            env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **env},
            check=True,
            capture_output=True,
        )
        data = json.loads(out.read_text())
    steps = data["steps"]
    spc = max(1, steps.get("steps_per_call") or 1)
    timeline = data.get("timeline") or {}
    return {
        # the run's timeline rows with what the comparison reads from them: the host's
        # CPU shares (a pair whose hosts differ is said to, rather than called), the
        # tf.function call and trace seconds (the step's parts)
        "rows": {
            "width_s": timeline.get("width_s"),
            "windows": [{k: w.get(k) for k in ROW_FIELDS} for w in timeline.get("windows", [])],
        },
        "steps_per_call": spc,
        "warmup": steps["warmup"],
        "all_kept": steps["all_kept"],
        "durations_us": [round(d * 1e6) for d in steps["durations"]],
        "timeline": steps["timeline"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--only", nargs="*", default=list(WORKLOADS))
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    runs = []
    for i in range(args.runs):
        for name in args.only:  # interleaved: the machine's moods fall on every workload
            script, env = WORKLOADS[name]
            runs.append({"workload": name, **record(script, env)})
            print(f"run {i + 1}/{args.runs} {name}", flush=True)
    args.out.parent.mkdir(exist_ok=True)
    with gzip.open(args.out, "wt") as f:
        json.dump({"runs": runs}, f)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
