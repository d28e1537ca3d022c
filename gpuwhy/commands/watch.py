"""``gpuwhy watch -- CMD ...``: its options, the files it must not overwrite, and its
outputs; the watching itself is :func:`gpuwhy.modes.watch.watch`."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

from gpuwhy.collect.sampler import DCGM_EXPORTER, SAMPLES_PER_S
from gpuwhy.commands.options import (
    checked,
    metrics_options,
    metrics_settings,
    out_dir_option,
    out_dir_settings,
    output_options,
    report_settings,
    sampling_options,
)
from gpuwhy.commands.reporting import UsageError, check_format, emit, plan_outputs
from gpuwhy.commands.script_command import save_for_merge
from gpuwhy.commands.settings import OutDir, ReportSettings
from gpuwhy.export.metrics_options import MetricsOptions
from gpuwhy.modes.watch import WatchError, watch

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


@dataclass(frozen=True)
class WatchSettings:
    command: tuple[str, ...]
    hz: float
    dcgm_exporter: str | None
    record: str | None  # --record PATH
    metrics: MetricsOptions
    out_dir: OutDir | None
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> WatchSettings:
    """The command line read once, each option checked (a usage error)."""
    hz = checked(SAMPLES_PER_S, args.hz)
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "nothing to watch: give the command after --, e.g. gpuwhy watch -- python train.py"
        )
    return WatchSettings(
        command=tuple(command),
        hz=hz,
        dcgm_exporter=checked(DCGM_EXPORTER, args.dcgm_exporter),
        record=args.record,
        metrics=metrics_settings(args),
        out_dir=out_dir_settings(args),
        report=report_settings(args),
    )


def execute(settings: WatchSettings) -> int:
    files, project_dir = _command_files(settings.command)
    outputs = plan_outputs(
        settings.report,
        inputs=files,
        project_dir=project_dir,
        extra=[("--record", settings.record)],
    )
    record_path = outputs["--record"].path if "--record" in outputs else None
    check_format(settings.report.format, to_terminal="-o" not in outputs and sys.stderr.isatty())
    try:
        record, exit_code = watch(
            list(settings.command),
            hz=settings.hz,
            dcgm_exporter=settings.dcgm_exporter,
            record_path=record_path,
            metrics=settings.metrics,
        )
    except WatchError as e:
        raise UsageError(str(e)) from None
    save_for_merge(record, settings.out_dir)
    emit(record, settings.report, outputs, to_stderr=True)
    return exit_code


def _command_files(command: Sequence[str]) -> tuple[list[str], str | None]:
    """The files a watched command names (never to be overwritten by a report), and the
    directory of its script (the first ``.py``/``.sh`` file it names, or the program)."""
    files = [arg for arg in command if os.path.isfile(arg)]
    scripts = [f for f in files if f.endswith((".py", ".sh"))] or [
        f for f in files[:1] if not os.path.isabs(f)
    ]
    return files, os.path.dirname(os.path.abspath(scripts[0])) if scripts else None
