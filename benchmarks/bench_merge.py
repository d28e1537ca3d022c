"""`gpuwhy merge` on many workers: how long it takes, and whether it names the straggler.

Speed: 64 worker records of 10,000 steps each (and 8, 16, 32 for linearity) as
`gpuwhy run --out-dir` writes them: every section a watched run has, the per-step series
kept for the first 5,000 steps (collect/inprocess/steps.py MAX_STEPS), the medians and totals
over all 10,000, 1,000 s of NVML samples at 10 Hz for one GPU, the strategy and a few
findings. Timed: the `gpuwhy merge DIR --json OUT` command line (median of --runs runs,
Python start-up included), and the merge itself in process. Budget: 2 s for 64.

Straggler: --trials random clusters (2-16 workers, 200 steps each, per-step and
per-worker noise) in three ways of training: synchronous with the input wait timed
(MultiWorkerMirroredStrategy and a tf.data loop), synchronous with the collective time
measured, and unsynchronised (ParameterServerStrategy). Each once with one worker 1.5x
slower (its input in the first, its compute in the others) and once evenly loaded; each
record written and merged as above. Budget: the straggler named in 100% of the first,
nobody in any of the second.

    .venv/bin/python benchmarks/bench_merge.py [--runs 5] [--trials 100]
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from gpuwhy.derived.worker_times import compare
from gpuwhy.facts import (
    DistributeFacts,
    Facts,
    GpuSamplesFacts,
    GpuSeries,
    ProgramFacts,
    StepFacts,
    TaskFacts,
)
from gpuwhy.finding import Finding
from gpuwhy.modes.merge import merge_directory
from gpuwhy.record import Record
from gpuwhy.rules.distribute.straggler import Straggler

MAX_STEPS = 5000
BUDGET_S = 2.0


# -- records ------------------------------------------------------------------------------


def worker_record(
    index: int,
    workers: int,
    durations: list[float],
    waits: list[float],
    strategy: str,
    collective: float | None,
    gpu_seconds: float,
) -> Record:
    """One task's record, its step figures computed from the whole series the way the
    step collector computes them."""
    counted = durations[1:]
    ordered = sorted(counted)
    total = sum(counted)
    starts, t = [], 5.0
    for d in durations:
        starts.append(round(t, 6))
        t += d
    samples = int(gpu_seconds * 10)
    rng = random.Random(index)
    gpu = (
        GpuSeries(
            index=0,
            name="NVIDIA H100 80GB HBM3",
            memory_total_bytes=80 * 2**30,
            t=tuple(round(i / 10, 3) for i in range(samples)),
            utilization=tuple(round(rng.uniform(0.6, 0.9), 2) for _ in range(samples)),
            memory_used_bytes=tuple(40 * 2**30 for _ in range(samples)),
            pcie_tx_bytes_per_s=tuple(1.0e9 for _ in range(samples)),
            pcie_rx_bytes_per_s=tuple(2.0e9 for _ in range(samples)),
            sm_clock_mhz=tuple(1980.0 for _ in range(samples)),
            power_w=tuple(500.0 for _ in range(samples)),
        )
        if samples
        else None
    )
    facts = Facts(
        program=ProgramFacts(
            command=("train.py", "--epochs", "10"),
            seconds=t + 1,
            tensorflow_imported=True,
            tensorflow_version="2.21.0",
        ),
        steps=StepFacts(
            source="tf-data",
            marker="next() on a tf.data iterator at train.py:80",
            count=len(durations),
            warmup=1,
            median_s=statistics.median(counted),
            p90_s=ordered[int(0.9 * len(ordered))],
            total_s=total,
            input_wait_fraction=sum(waits[1:]) / total,
            input_wait_median_s=statistics.median(waits[1:]),
            input_wait_source="next() timing",
            run_s=t + 1,
            first_step_s=5.0,
            starts=tuple(starts[:MAX_STEPS]),
            durations=tuple(round(d, 6) for d in durations[:MAX_STEPS]),
            input_waits=tuple(round(w, 6) for w in waits[:MAX_STEPS]),
        ),
        gpu_samples=GpuSamplesFacts(hz=10.0, gpus=(gpu,) if gpu else ()),
        distribute=DistributeFacts(
            strategy=strategy,
            replicas=workers,
            collective_step_s=collective,
            collective_share=None if collective is None else collective / (total / len(counted)),
        ),
        task=TaskFacts(
            name=f"worker-{index}",
            source="TF_CONFIG",
            task_type="worker",
            task_index=index,
            hostname=f"node-{index:03d}",
            cluster=tuple(f"worker-{i}" for i in range(workers)),
        ),
    )
    findings = [
        Finding(
            id="input.sequential-map",
            severity="medium",
            title="Input stage ParallelMapV2(parse at train.py:41) runs on one thread",
            location="train.py:41",
            evidence={"stage": "parse"},
        ),
        Finding(id="tensorcore.unused", severity="low", title="100% of the matmul work is float32"),
    ]
    return Record(command="run", facts=facts, findings=findings)


def cluster(
    workers: int,
    steps: int,
    mode: str,
    straggler: int | None,
    rng: random.Random,
    gpu_seconds: float = 0.0,
) -> list[Record]:
    """A cluster's records. Each worker has its own speed (±3%), each step its noise
    (±5%, and an occasional slow step). mode: sync-input (equal steps, the input wait
    timed; a straggler's input is slow), sync-collective (equal steps, the collective
    time measured; a straggler computes slowly), async (steps not coupled; a straggler
    computes slowly)."""
    base = 0.1
    speed = [rng.gauss(1.0, 0.03) for _ in range(workers)]
    own = [[0.0] * steps for _ in range(workers)]
    waits = [[0.0] * steps for _ in range(workers)]
    for w in range(workers):
        for s in range(steps):
            compute = base * 0.9 * speed[w] * rng.lognormvariate(0, 0.05)
            if rng.random() < 0.01:
                compute *= 3  # a checkpoint, a GC pause
            wait = rng.expovariate(1 / (base * 0.02))
            if w == straggler:
                if mode == "sync-input":
                    wait += base * 0.5
                else:
                    compute *= 1.5
            own[w][s], waits[w][s] = compute + wait, wait
    allreduce = 0.004
    records = []
    for w in range(workers):
        if mode == "async":
            durations, collective = own[w], None
        else:
            durations = [max(o[s] for o in own) + allreduce for s in range(steps)]
            spent = [durations[s] - own[w][s] for s in range(steps)]
            collective = statistics.fmean(spent[1:]) if mode == "sync-collective" else None
        strategy = "ParameterServerStrategy" if mode == "async" else "MultiWorkerMirroredStrategy"
        records.append(
            worker_record(w, workers, durations, waits[w], strategy, collective, gpu_seconds)
        )
    return records


def write(records: list[Record], directory: Path) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    for record in records:
        assert record.facts.task is not None
        (directory / f"{record.facts.task.name}.json").write_text(record.to_json() + "\n")


# -- speed --------------------------------------------------------------------------------


def speed(runs: int) -> None:
    print(
        "gpuwhy merge of worker records of 10,000 steps (5,000 kept per step, 1,000 s of NVML samples)"
    )
    rng = random.Random(1)
    template = cluster(64, 10_000, "sync-input", None, rng, gpu_seconds=1000)
    with tempfile.TemporaryDirectory() as tmp:
        for n in (8, 16, 32, 64):
            directory = Path(tmp) / f"w{n}"
            write(template[:n], directory)
            size = sum(p.stat().st_size for p in directory.iterdir()) / n / 2**20
            cli, inproc = [], []
            for _ in range(runs):
                t = time.perf_counter()
                subprocess.run(
                    [
                        sys.executable,
                        "-m",
                        "gpuwhy",
                        "merge",
                        str(directory),
                        "--json",
                        str(Path(tmp) / "merged.json"),
                    ],
                    check=False,
                    capture_output=True,
                    cwd=Path(__file__).resolve().parents[1],
                )
                cli.append(time.perf_counter() - t)
                t = time.perf_counter()
                Record.diagnose("merge", Facts(workers=merge_directory(str(directory))))
                inproc.append(time.perf_counter() - t)
            c, m = statistics.median(cli), statistics.median(inproc)
            verdict = (
                ""
                if n != 64
                else (" within" if c <= BUDGET_S else " OVER") + f" the {BUDGET_S:.0f} s budget"
            )
            print(
                f"  {n:3d} workers ({size:.1f} MiB each): command {c:.2f} s, merge in process "
                f"{m:.3f} s = {m / n * 1000:.1f} ms per worker{verdict}"
            )


# -- straggler ----------------------------------------------------------------------------


def detection(trials: int) -> None:
    print(
        f"\ndistribute.straggler over {trials} random clusters per case (2-16 workers, 200 steps)"
    )
    rng = random.Random(7)
    rule = Straggler()
    with tempfile.TemporaryDirectory() as tmp:
        for mode in ("sync-input", "sync-collective", "async"):
            for planted in (True, False):
                named, right, scores = 0, 0, []
                for trial in range(trials):
                    workers = rng.randint(2, 16)
                    slow = rng.randrange(workers) if planted else None
                    directory = Path(tmp) / f"{mode}-{planted}-{trial}"
                    write(cluster(workers, 200, mode, slow, rng), directory)
                    facts = Facts(workers=merge_directory(str(directory)))
                    found = rule.check(facts, dict(rule.options))
                    assert facts.workers is not None
                    compared = compare(facts.workers.workers, rule.options["min_steps"])
                    if compared is not None and not planted:
                        scores.append(compared.slowest.score)
                    if found:
                        named += 1
                        right += found[0].evidence["straggler"] == f"worker-{slow}"
                        scores.append(found[0].evidence["score"])
                if planted:
                    ok = right == trials
                    print(
                        f"  {mode:16s} 1.5x straggler: named {right}/{trials} "
                        f"({'100%' if ok else 'MISSED SOME'}), scores "
                        f"{min(scores, default=0):.2f}-{max(scores, default=0):.2f}"
                    )
                else:
                    print(
                        f"  {mode:16s} evenly loaded:  named {named}/{trials} "
                        f"({'none' if named == 0 else 'FALSE ALARMS'}), highest score "
                        f"{max(scores, default=0):.2f} (named from {rule.options['min_ratio']})"
                    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--trials", type=int, default=100)
    args = parser.parse_args()
    speed(args.runs)
    detection(args.trials)


if __name__ == "__main__":
    main()
