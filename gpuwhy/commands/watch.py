"""``gpuwhy watch -- CMD ...``: any program, whatever its framework, watched from outside.

The command runs as a child with this terminal's stdin, stdout and stderr; the GPU
sampler follows the child's whole process tree (launchers, workers) while it runs. The
result is a run record with the GPU activity timeline and the findings that need no
framework hooks (gpu., memory., env., distribute.), and the child's exit code, which
``gpuwhy watch`` exits with, so it can wrap a command in a script unchanged.

Signals: SIGTERM is passed on to the child. SIGINT too, except when this process is in
the terminal's foreground process group: then Ctrl-C already reached the child (same
group) and sending it again would interrupt the child's own clean-up.
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Sequence

from gpuwhy.collect import driver
from gpuwhy.collect.process_tree import ProcessTree
from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.commands.options import (
    metrics_from,
    metrics_options,
    out_dir_option,
    output_options,
    resolve_out_dir,
    sampling_options,
)
from gpuwhy.commands.outcome import UsageError, check_format, check_hz, emit, plan_outputs
from gpuwhy.commands.script_command import save_for_merge
from gpuwhy.export.live import LiveMetrics, MetricsOptions
from gpuwhy.facts import Facts, ProgramFacts
from gpuwhy.record import RunRecord

HELP = "Is the GPU busy? Sample the GPU while any command runs."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Runs CMD (any program: PyTorch, JAX, a shell script) as a child, samples the GPUs "
        "through NVML while it runs, follows its processes' GPU memory, and reports the "
        "activity and the gpu./memory./env. findings. Exit status: CMD's."
    )
    parser.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run, after --"
    )
    sampling_options(parser)
    parser.add_argument(
        "--record", metavar="PATH", help="also write the raw NVML readings (JSON lines) to PATH"
    )
    metrics_options(parser)
    output_options(parser)
    out_dir_option(parser)


def main(args: argparse.Namespace) -> int:
    check_hz(args.hz)
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "nothing to watch: give the command after --, e.g. gpuwhy watch -- python train.py"
        )
    files, project_dir = _command_files(command)
    outputs = plan_outputs(
        args, inputs=files, project_dir=project_dir, extra=[("--record", args.record)]
    )
    record_path = outputs["--record"].path if "--record" in outputs else None
    check_format(args.format, to_terminal="-o" not in outputs and sys.stderr.isatty())
    resolve_out_dir(args)
    try:
        record, exit_code = watch(
            command, hz=args.hz, record_path=record_path, metrics=metrics_from(args)
        )
    except WatchError as e:
        raise UsageError(str(e)) from None
    save_for_merge(record, args)
    emit(record, args, outputs, to_stderr=True)
    return exit_code


def _command_files(command: Sequence[str]) -> tuple[list[str], str | None]:
    """The files a watched command names (never to be overwritten by a report), and the
    directory of its script (the first ``.py``/``.sh`` file it names, or the program)."""
    files = [arg for arg in command if os.path.isfile(arg)]
    scripts = [f for f in files if f.endswith((".py", ".sh"))] or [
        f for f in files[:1] if not os.path.isabs(f)
    ]
    return files, os.path.dirname(os.path.abspath(scripts[0])) if scripts else None


class WatchError(RuntimeError):
    """The command could not be started; the message is one line for the user."""


def resolve(argv: list[str]) -> str:
    """The executable ``argv[0]`` names, as the shell would find it."""
    if not argv:
        raise WatchError("no command given: gpuwhy watch -- CMD [ARGS...]")
    command = argv[0]
    path = shutil.which(command) if os.sep not in command else command
    if path is None or not os.path.exists(path):
        raise WatchError(f"command not found: {command}")
    if os.path.isdir(path) or not os.access(path, os.X_OK):
        raise WatchError(f"not an executable file: {command}")
    return path


def _task():
    """Which cluster task the watched command is (its environment is this one's)."""
    from gpuwhy.collect.run.task import task_facts

    try:
        return task_facts()
    except Exception:  # noqa: BLE001 - the record is named after the host and pid then
        return None


def _in_terminal_foreground() -> bool:
    try:
        return os.tcgetpgrp(sys.stdin.fileno()) == os.getpgrp()
    except (OSError, ValueError, AttributeError):
        return False


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def exit_status(returncode: int) -> int:
    """Popen's -N (killed by signal N) as a shell reports it: 128 + N."""
    return 128 - returncode if returncode < 0 else returncode


def watch(
    argv: list[str], hz: float = 10.0, record_path=None, metrics: MetricsOptions | None = None
) -> tuple[RunRecord, int]:
    """Run ``argv`` as a child, sample the GPUs while it runs; (record, exit code).
    ``metrics``: publish live metrics while it runs (GPU busy, the gpu./memory. findings).

    Raises :class:`WatchError` when the command cannot be started.
    """
    executable = resolve(list(argv))
    _, devices = driver.collect(exclude_pids=frozenset({os.getpid()}))
    root: dict[str, ProcessTree | None] = {"tree": None}

    def watched_pids() -> frozenset[int]:
        tree = root["tree"]
        return tree() if tree is not None else frozenset()

    sampler = GpuSampler(hz=hz, pids=watched_pids, record_path=record_path)
    t0 = time.perf_counter()
    sampler.start(t0)
    try:
        child = subprocess.Popen([executable, *argv[1:]])
    except OSError as e:
        sampler.stop()
        raise WatchError(f"cannot run {argv[0]}: {e.strerror or e}") from None
    root["tree"] = ProcessTree(child.pid)
    live = None
    if metrics is not None and metrics.wanted:

        def snapshot() -> tuple[Facts, tuple[tuple[float, float], ...]]:
            return Facts(devices=devices, gpu_samples=sampler.facts()), ()

        live = LiveMetrics(metrics, "watch", shlex.join(argv), t0, snapshot).start()

    received: list[int] = []

    def forward(signum, _frame) -> None:
        received.append(signum)
        if signum == signal.SIGINT and _in_terminal_foreground():
            return  # the terminal sent it to the child as well
        try:
            child.send_signal(signum)
        except OSError:
            pass

    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, forward)
    try:
        returncode = child.wait()
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
        seconds = time.perf_counter() - t0
        sampler.stop()

    code = exit_status(returncode)
    killed_by = -returncode if returncode < 0 else None
    if killed_by == signal.SIGTERM or (received and received[-1] == signal.SIGTERM):
        ended = "terminated"
    elif received or killed_by == signal.SIGINT:
        ended = "interrupted"
    else:
        ended = "completed" if code == 0 else "exit"
    error = f"killed by {_signal_name(killed_by)}" if killed_by is not None else None
    program = ProgramFacts(
        command=tuple(argv), ended=ended, exit_code=code, error=error, seconds=round(seconds, 3)
    )
    facts = Facts(
        environment=None,
        devices=devices,
        program=program,
        gpu_samples=sampler.facts(),
        task=_task(),
    )
    record = RunRecord.diagnose("watch", facts)
    if live is not None:
        live.finish(record)
    return record, code
