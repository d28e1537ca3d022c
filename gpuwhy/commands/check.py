"""``gpuwhy check``: is TensorFlow able to use a GPU here? The environment doctor.

TensorFlow is imported in a child process (gpuwhy.modes.check), so a broken
CUDA setup that crashes the import is a finding, not a crash of gpuwhy."""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass
from pathlib import Path

from gpuwhy.commands.options import output_options, report_settings
from gpuwhy.commands.reporting import UsageError, emit, exit_status, plan_outputs
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.modes.check import check

HELP = "Is TensorFlow using my GPU? The environment doctor."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Imports TensorFlow in a child process, reads the driver through NVML, loads the "
        "CUDA libraries the build needs, and runs a real op on each GPU. Exit 0: TF can "
        "use a GPU; 1: it cannot; 2: error."
    )
    parser.add_argument(
        "--python",
        metavar="PATH",
        default=sys.executable,
        help="the interpreter whose TensorFlow to check (default: this one)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds allowed for importing TensorFlow and touching the GPU (120)",
    )
    output_options(parser)


@dataclass(frozen=True)
class CheckSettings:
    python: str
    timeout: float
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> CheckSettings:
    """The command line read once, each option checked (a usage error)."""
    if not Path(args.python).exists():
        raise UsageError(f"no Python interpreter at {args.python}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError("--timeout must be a positive number of seconds")
    return CheckSettings(
        python=args.python,
        timeout=args.timeout,
        report=report_settings(args),
    )


def execute(settings: CheckSettings) -> int:
    outputs = plan_outputs(settings.report, inputs=[settings.python])
    record = check(settings.python, settings.timeout)
    emit(record, settings.report, outputs)
    return exit_status(record)
