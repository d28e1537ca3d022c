"""The instructions the program's thread runs a step, under ``python`` and ``gpuwhy run``,
counted by valgrind (callgrind): a figure this shared host's noise does not move.

Timing a few percent here needs many alternating pairs and still moves by a tenth from
one hour to the next (docs/speed.md); an instruction count does not: two runs of the
same side agree within 0.2 %. The workload (workloads/counted_loop.py, the loop of
tiny_steps.py) switches callgrind's instrumentation on for windows of its steps and
dumps the program's thread's counts at each window's end; this prints each side's
instructions a step in each window and their ratio to python's, and the functions
whose own instructions grew most.

Windows (steps are counted from the loop's start):
- ``head``: steps 300-1,300, every step timed (a loop's first 5,000 are kept one by one).
- ``paused``: steps 2,000-3,500, the hooks paused for most of them. Under callgrind a step
  takes about 50 times as long, so the pauses would never begin (they wait for 400 reads
  and calls a second); this side asks them from 5 a second and keeps a head of 300
  steps. What gpuwhy does once a second or once a pause (its count reads, the eager op
  counter's windows opening) then weighs about 50 times more per step than it does at
  full speed: the paused window's excess is an upper bound; what is per step (the
  stack TensorFlow reads at each eager op, the hooks' frames) is exact.

Needs valgrind (Debian's package: callgrind and its ``valgrind/callgrind.h``) and a C
compiler. Two runs at a time, about three minutes in all.

    .venv/bin/python benchmarks/bench_instructions.py [--tree /other/checkout] [--top 12]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
WORKLOAD = str(HERE / "workloads" / "counted_loop.py")
WINDOWS = {"head": "300:1300", "paused": "2000:3500"}
REQUESTS_C = """
#include <valgrind/callgrind.h>
void window_start(void) { CALLGRIND_START_INSTRUMENTATION; CALLGRIND_ZERO_STATS; }
void window_end(const char *label) {
    CALLGRIND_DUMP_STATS_AT(label); CALLGRIND_STOP_INSTRUMENTATION;
}
"""
# what the console script does (another tree's gpuwhy is not on its path)
CONSOLE = "import sys\nfrom gpuwhy.cli import main\nsys.exit(main(sys.argv[1:]))\n"
# the paused side: gpuwhy's pauses asked from 5 reads and calls a second, a head of 300
SCALED_RUN = """
import sys
import gpuwhy.collect.inprocess.hook_pauses as pauses
import gpuwhy.collect.inprocess.step_record as record
defaults = list(pauses.HookPauses.__init__.__defaults__)
defaults[2] = 5.0
pauses.HookPauses.__init__.__defaults__ = tuple(defaults)
record.HEAD_STEPS = 300
from gpuwhy.cli import main
sys.exit(main(sys.argv[1:]))
"""


def build_requests(folder: Path) -> Path:
    source, library = folder / "requests.c", folder / "requests.so"
    source.write_text(REQUESTS_C)
    subprocess.run(["cc", "-O2", "-shared", "-fPIC", "-o", library, source], check=True)
    return library


def counted(name: str, command: list[str], windows: str, env: dict, folder: Path) -> dict:
    """Runs ``command`` under callgrind: {window label: (instructions, steps)} of the
    program's thread (callgrind's thread 1), and its functions' own counts by window."""
    out = folder / name
    out.mkdir()
    subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            "--separate-threads=yes",
            f"--callgrind-out-file={out}/cg.%p",
            "-q",
            *command,
        ],
        env={**env, "WORKLOAD_WINDOWS": windows},
        cwd=folder,  # not a checkout: `-c`'s first path entry is the working directory
        check=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    found = {}
    for dump in out.glob("cg.*.*-01"):
        text = dump.read_text(errors="replace")
        label = re.search(r"^desc: Trigger: Client Request: (\S+)", text, re.M)
        total = re.search(r"^summary: (\d+)", text, re.M)
        if label and total:
            first, last = (int(n) for n in label.group(1).split(":"))
            found[label.group(1)] = (int(total.group(1)), last - first, dump)
    return found


def own_counts(dump: Path) -> dict[str, int]:
    """Each function's own instructions in a dump (callgrind_annotate's table)."""
    table = subprocess.run(
        ["callgrind_annotate", "--inclusive=no", "--threshold=100", str(dump)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    counts: dict[str, int] = {}
    for line in table.splitlines():
        match = re.match(r"\s*([\d,]+)\s+(?:\([^)]*\)\s+)?(\S.*)$", line)
        if match and ":" in match.group(2):
            name = re.sub(r"\s*\[[^\]]*\]$", "", match.group(2)).strip()
            name = re.sub(r"^.*/Python-[\d.]+/", "", name)
            counts[name] = counts.get(name, 0) + int(match.group(1).replace(",", ""))
    return counts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", type=Path, help="another checkout's gpuwhy, counted too")
    parser.add_argument("--top", type=int, default=12, help="functions listed per window")
    args = parser.parse_args()
    for tool in ("valgrind", "callgrind_annotate", "cc"):
        if shutil.which(tool) is None:
            sys.exit(f"bench_instructions: needs {tool} (valgrind and a C compiler)")
    gpuwhy = str(Path(sys.executable).with_name("gpuwhy"))
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        env = {
            **os.environ,
            "TF_CPP_MIN_LOG_LEVEL": "3",
            "WORKLOAD_REQUESTS": str(build_requests(folder)),
        }
        trees = {"gpuwhy run": None}
        if args.tree is not None:
            trees["gpuwhy run (--tree)"] = args.tree.resolve()
        jobs = {"python": ([sys.executable, WORKLOAD], ",".join(WINDOWS.values()), env)}
        for side, tree in trees.items():
            side_env = env if tree is None else {**env, "PYTHONPATH": str(tree)}
            head = [gpuwhy, "run", "-o", os.devnull, WORKLOAD]
            if tree is not None:  # the console script's frames, another tree's gpuwhy
                head = [sys.executable, "-c", CONSOLE, *head[1:]]
            jobs[f"{side}, head"] = (head, WINDOWS["head"], side_env)
            scaled = [sys.executable, "-c", SCALED_RUN, "run", "-o", os.devnull, WORKLOAD]
            jobs[f"{side}, paused"] = (scaled, WINDOWS["paused"], side_env)
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = {
                job: pool.submit(counted, f"run{i}", command, windows, job_env, folder)
                for i, (job, (command, windows, job_env)) in enumerate(jobs.items())
            }
            results = {job: future.result() for job, future in futures.items()}
        plain = results["python"]
        print("side                          window   instructions a step   of python's")
        for window, steps in WINDOWS.items():
            base, count, base_dump = plain[steps]
            print(f"{'python':29s} {window:7s} {base / count:12,.0f}")
            for job, found in results.items():
                if not job.endswith(f", {window}") or steps not in found:
                    continue
                total, count, dump = found[steps]
                side = job.rsplit(",", 1)[0]
                print(f"{side:29s} {window:7s} {total / count:12,.0f} {total / base:14.4f}")
                ours, theirs = own_counts(dump), own_counts(base_dump)
                grown = sorted(ours, key=lambda f: theirs.get(f, 0) - ours[f])[: args.top]
                for function in grown:
                    more = (ours[function] - theirs.get(function, 0)) / count
                    print(f"    {more:+10,.0f} a step  {function[:90]}")


if __name__ == "__main__":
    main()
