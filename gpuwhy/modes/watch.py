"""``gpuwhy watch -- CMD ...`` (and the function it calls): any program, whatever its framework, watched from outside.

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

import os
import shlex
import shutil
import signal
import subprocess
import sys
import threading
import time

from gpuwhy.collect import driver
from gpuwhy.collect.inprocess.task import task_facts
from gpuwhy.collect.process_tree import ProcessTree
from gpuwhy.collect.sampler import GpuSampler
from gpuwhy.collect.step_histogram import LoopHistograms
from gpuwhy.export.live import LiveMetrics, MetricsOptions
from gpuwhy.facts import Facts, ProgramFacts, to_dict
from gpuwhy.modes.recording import end_recording
from gpuwhy.record import Record
from gpuwhy.redact import mask_argv


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
    argv: list[str],
    hz: float = 10.0,
    record_path=None,
    metrics: MetricsOptions | None = None,
    dcgm_exporter: str | None = None,
) -> tuple[Record, int]:
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

    shown = list(mask_argv(argv))  # what the recording and the metrics keep of argv
    sampler = GpuSampler(
        hz=hz,
        pids=watched_pids,
        record_path=record_path,
        dcgm_exporter=dcgm_exporter,
        record_header={"command": shown, "devices_before": to_dict(devices)},
    )
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

        def snapshot() -> tuple[Facts, LoopHistograms]:
            return Facts(devices=devices, gpu_samples=sampler.facts()), ()

        live = LiveMetrics(metrics, "watch", shlex.join(shown), t0, snapshot).start()

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
    if record_path is not None:
        end_recording(record_path, program)
    facts = Facts(
        environment=None,
        devices=devices,
        program=program,
        gpu_samples=sampler.facts(),
        task=_task(),
    )
    record = Record.diagnose("watch", facts)
    if live is not None:
        live.finish(record)
    return record, code
