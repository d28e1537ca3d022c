"""`gpuwhy fix` and the measure that calls small changes.

1. **A 10 % slower step, 3 runs a side** (issue 46, item 6): benchmarks/workloads/
   steady_step.py (steps of about 2.5 ms) run 3 times as it is and 3 times with 10 %
   more work per step (``EXTRA=0.1``), interleaved, each a fresh `gpuwhy run`; then
   `gpuwhy diff` of the two sides, ``--rounds`` times. Printed per round: the step
   time's estimate and interval, the program's CPU time per step's, the fastest
   steps', and what the diff called (target: slower, every round).
2. **The cost of `gpuwhy fix`** on a program with four fixes to try, each run bounded
   at ``--bound`` seconds (default 20), 3 runs a side: its wall time (target: at most
   10 minutes on this project's 2-core machine), and each fix's verdict.

    .venv/bin/python benchmarks/bench_fix.py [--rounds 3] [--bound 20] [--skip-cost]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
STEADY = ROOT / "benchmarks" / "workloads" / "steady_step.py"
FOUR_FIXES = ROOT / "benchmarks" / "workloads" / "four_fixes.py"
# its findings, named so that the low input.no-cache is tried too
FINDINGS = (
    "--finding", "launch.eager-ops", "--finding", "launch.retracing",
    "--finding", "input.no-cache",
)  # fmt: skip


def gpuwhy(*args: str, cwd: Path, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "gpuwhy", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "2", **(env or {})},
    )


def small_change(rounds: int) -> None:
    print("1. a 10% slower step, 3 runs a side (steady_step.py)")
    for r in range(rounds):
        with tempfile.TemporaryDirectory() as tmp:
            work = Path(tmp)
            for i in range(3):
                for side, extra in (("base", "0"), ("head", "0.1")):
                    done = gpuwhy(
                        "run",
                        "--json",
                        f"{side}-{i}.json",
                        str(STEADY),
                        cwd=work,
                        env={"EXTRA": extra},
                    )
                    assert done.returncode == 0, done.stderr[-2000:]
            base = [str(work / f"base-{i}.json") for i in range(3)]
            head = [str(work / f"head-{i}.json") for i in range(3)]
            done = gpuwhy("diff", "-f", "json", *base, "--", *head, cwd=work)
            comparison = json.loads(done.stdout)
            step = comparison["step_time"]
            line = (
                f"   round {r + 1}: step {step['estimate']:.3f}x ({step['low']:.3f}-{step['high']:.3f})"
                f" called {step['called']}"
            )
            for key, what in (("cpu_time", "CPU per step"), ("fast_steps", "fastest steps")):
                m = comparison.get(key)
                if m:
                    line += f"; {what} {m['estimate']:.3f}x ({m['low']:.3f}-{m['high']:.3f})"
            print(line)
            for note in comparison["notes"]:
                if "CPU time" in note or "fastest steps" in note:
                    print(f"     {note}")


def fix_cost(bound: float) -> None:
    print(f"2. gpuwhy fix on four_fixes.py, runs bounded at {bound:g} s, 3 runs a side")
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        (work / FOUR_FIXES.name).write_text(FOUR_FIXES.read_text())
        start = time.monotonic()
        done = gpuwhy(
            "fix",
            "--bound",
            f"{bound:g}",
            "--json",
            "fix.json",
            *FINDINGS,
            FOUR_FIXES.name,
            cwd=work,
        )
        seconds = time.monotonic() - start
        assert done.returncode == 0, done.stderr[-3000:]
        record = json.loads((work / "fix.json").read_text())
        tried = record["fixes_tried"]
        print(f"   {len(tried)} fixes tried in {seconds / 60:.1f} min (target: at most 10 min)")
        for t in tried:
            print(
                f"   {t['fix']}: ran {t['ran']}, same {t['same_results']}, "
                f"speedup {t['speedup']} ({t['speedup_low']}-{t['speedup_high']}), held {t['held']}"
            )
        combined = record["fix_trial"]["combined"]
        if combined:
            print(f"   together: speedup {combined['speedup']}, held {combined['held']}")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--bound", type=float, default=20.0)
    parser.add_argument("--skip-cost", action="store_true")
    parser.add_argument("--skip-noise", action="store_true")
    args = parser.parse_args()
    if not args.skip_noise:
        small_change(args.rounds)
    if not args.skip_cost:
        fix_cost(args.bound)


if __name__ == "__main__":
    main()
