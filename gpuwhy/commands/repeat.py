"""``gpuwhy run --repeat N SCRIPT``: N runs of one program in one command, each a fresh
``gpuwhy run`` process (a second run in the same process would find TensorFlow's graphs
traced and its caches warm), each record numbered (``--json runs/base.json`` writes
runs/base-1.json ... runs/base-N.json), then how far the runs' step times spread.

Several runs a side is what lets ``gpuwhy diff`` see how much runs of unchanged code
differ on this machine. Interleaving the two revisions' runs (base, head, base, ...) is
the user's job: runs made minutes apart on a shared machine differ by more than runs
made side by side, and a drift of the machine's would otherwise read as the change's.
"""

from __future__ import annotations

import math
import os
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass

import gpuwhy.report_stream as report_stream
from gpuwhy.commands.reporting import EXIT_OK, UsageError
from gpuwhy.comparison.comparable_units import run_units
from gpuwhy.formatting import duration
from gpuwhy.modes.run.script import ScriptInterrupted, die_of
from gpuwhy.record import Record, RecordError

MAX_REPEAT = 100
# gpuwhy run's options that name a file: each run writes its own, numbered
NUMBERED = ("--json", "--output", "-o", "--html")


@dataclass(frozen=True)
class RepeatedRun:
    number: int
    status: int
    record: str | None  # the JSON record it wrote (None: none could be read)
    step_s: float | None  # its mean time per training step after warm-up


def check_repeat(repeat: int | None, out_dir: str | None) -> int:
    """``--repeat``'s value, checked before anything runs."""
    if repeat is None:
        return 1
    if not 1 <= repeat <= MAX_REPEAT:
        raise UsageError(f"--repeat {repeat}: between 1 and {MAX_REPEAT}")
    if repeat > 1 and out_dir is not None:
        raise UsageError(
            "--repeat and --out-dir: --out-dir names a record after its task, which every "
            "run would overwrite; use --json PATH (each run writes PATH-1.json, ...)"
        )
    return repeat


def check_stale(json_path: str | None, repeat: int) -> None:
    """Refuse, before anything runs, records an earlier ``--repeat`` of more runs left
    beyond this one's last: ``PATH-*.json`` would mix them into the comparison."""
    if json_path is None or repeat <= 1:
        return
    stem, suffix = os.path.splitext(json_path)
    stale = []
    number = repeat + 1
    while os.path.exists(f"{stem}-{number}{suffix}"):
        stale.append(f"{stem}-{number}{suffix}")
        number += 1
    if stale:
        raise UsageError(
            f"{stale[0]}{' ...' if len(stale) > 1 else ''} is left from an earlier run: "
            f"{stem}-*{suffix} would mix it with these {repeat} runs; remove it or give "
            "another --json PATH"
        )


def numbered(path: str, number: int) -> str:
    """runs/base.json -> runs/base-3.json (a path without a suffix: base -> base-3)."""
    stem, suffix = os.path.splitext(path)
    return f"{stem}-{number}{suffix}"


def run_argv(options: Sequence[str], number: int, json_path: str | None) -> list[str]:
    """gpuwhy's options for run ``number``: without --repeat, every file it names
    numbered, and its record at ``json_path`` where the user gave no --json."""
    out: list[str] = []
    tokens = list(options)
    i = 0
    while i < len(tokens):
        token = tokens[i]
        name, eq, value = token.partition("=") if token.startswith("--") else (token, "", "")
        if name == "--repeat":
            i += 1 if eq else 2
            continue
        if name in NUMBERED and token.startswith("--"):
            if eq:
                out.append(f"{name}={numbered(value, number)}")
                i += 1
            else:
                out += [name, numbered(tokens[i + 1], number)]
                i += 2
            continue
        if token.startswith("-o") and not token.startswith("--"):
            if len(token) > 2:
                out.append("-o" + numbered(token[2:], number))
                i += 1
            else:
                out += ["-o", numbered(tokens[i + 1], number)]
                i += 2
            continue
        out.append(token)
        i += 1
    if json_path is not None:
        out += ["--json", json_path]
    return out


def repeat_runs(
    repeat: int, options: Sequence[str], script: Sequence[str], json_path: str | None
) -> int:
    """Run the program ``repeat`` times, one fresh ``gpuwhy run`` each, in order; stop at
    the first run that fails (its status is returned) or is interrupted or terminated
    (gpuwhy then ends as it did). Then the runs' spread on gpuwhy's stderr."""
    runs: list[RepeatedRun] = []
    with tempfile.TemporaryDirectory(prefix="gpuwhy-repeat-") as scratch:
        for number in range(1, repeat + 1):
            record = (
                numbered(json_path, number)
                if json_path is not None
                else os.path.join(scratch, f"run-{number}.json")
            )
            argv = run_argv(options, number, None if json_path is not None else record)
            report_stream.say(f"gpuwhy: run {number} of {repeat}")
            child = _Child([sys.executable, "-m", "gpuwhy", "run", *argv, *script])
            status = child.wait()
            runs.append(
                RepeatedRun(number, status, record if os.path.exists(record) else None, None)
            )
            if status != EXIT_OK or child.signalled is not None:
                break
        runs = [_with_step(r) for r in runs]
        for line in summary(runs, repeat, json_path):
            report_stream.say(line)
    return _end_as(runs[-1].status, child.signalled)


class _Child:
    """One run's process, and the signals gpuwhy was sent while it ran.

    Ctrl-C at a terminal reaches every process of the foreground group, the run
    included: gpuwhy then only waits for the run to write its report (a second SIGINT
    would cut the report short). A signal sent to gpuwhy alone (``kill``, a CI runner,
    no terminal) is passed on to the run, once. Either way gpuwhy stops repeating, and
    then ends as the run did."""

    def __init__(self, command: list[str]) -> None:
        self.signalled: int | None = None
        self.process = subprocess.Popen(command)

    def wait(self) -> int:
        # a signal gpuwhy was started ignoring (nohup, a shell's background job) stays
        # ignored, as Python leaves it: the run inherited that too
        previous = {
            s: signal.signal(s, self._on_signal)
            for s in (signal.SIGINT, signal.SIGTERM)
            if signal.getsignal(s) is not signal.SIG_IGN
        }
        try:
            while True:
                try:
                    return self.process.wait()
                except InterruptedError:  # pragma: no cover - PEP 475 retries for us
                    continue
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    def _on_signal(self, signum: int, _frame: object) -> None:
        first = self.signalled is None
        self.signalled = signum
        if first and self.process.poll() is None and not _from_terminal(signum):
            self.process.send_signal(signum)


def _from_terminal(signum: int) -> bool:
    """Whether a SIGINT is most likely the terminal's Ctrl-C, which the run got too:
    gpuwhy's process group is its terminal's foreground group."""
    if signum != signal.SIGINT:
        return False
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):  # no terminal: not from one
        return False


def _end_as(status: int, signalled: int | None) -> int:
    """The exit status for a run that ended with ``status`` (negative: killed by that
    signal), gpuwhy having been sent ``signalled``: an interrupted run ends gpuwhy as
    an uncaught KeyboardInterrupt ends Python, a terminated one dies of SIGTERM."""
    signum = -status if status < 0 else signalled
    if signum == signal.SIGINT:
        raise ScriptInterrupted()
    if signum == signal.SIGTERM:
        die_of(signal.SIGTERM)
    return 128 - status if status < 0 else status


def _ended(status: int) -> str:
    if status < 0:
        return f"ended by {signal.Signals(-status).name}"
    return f"exited with status {status}"


def _with_step(run: RepeatedRun) -> RepeatedRun:
    if run.record is None:
        return run
    try:
        units = run_units(Record.load(run.record).facts)
    except RecordError:
        return RepeatedRun(run.number, run.status, None, None)
    step = units.seconds / units.step_count if units.step_count else None
    return RepeatedRun(run.number, run.status, run.record, step)


def summary(runs: list[RepeatedRun], repeat: int, json_path: str | None) -> list[str]:
    """The runs one per line, their spread, and what to do with them."""
    done = len(runs)
    last = runs[-1]
    stopped = "" if done == repeat else f" (stopped: run {last.number} {_ended(last.status)})"
    lines = [f"gpuwhy: {done} of {repeat} runs{stopped}"]
    for run in runs:
        step = f"mean step {duration(run.step_s)}" if run.step_s else "no training steps"
        where = f"  {run.record}" if run.record and json_path is not None else ""
        lines.append(f"  run {run.number}: {step}, {_ended(run.status)}{where}")
    if json_path is not None and any(r.step_s is None for r in runs):
        lines.append(
            "  a record without training steps is left out by gpuwhy diff (said in its notes)"
        )
    steps = [r.step_s for r in runs if r.step_s]
    if len(steps) >= 2:
        spread = statistics.stdev(math.log(s) for s in steps)
        lines.append(
            f"  the runs' mean steps spread by {math.exp(spread) - 1:.1%} (standard "
            f"deviation): runs of unchanged code differ this much on this machine"
        )
    if json_path is not None:
        stem, suffix = os.path.splitext(json_path)
        lines.append(
            f"  compare: gpuwhy diff {stem}-*{suffix} -- OTHER-*{suffix} (record the other "
            "revision the same way, interleaved with these runs where you can: runs made "
            "minutes apart differ more than runs made side by side); "
            f"gpuwhy diff --calibrate {stem}-*{suffix} says which --fail-on they allow"
        )
    else:
        lines.append("  give --json PATH to keep the records for gpuwhy diff")
    return lines
