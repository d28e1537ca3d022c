"""``gpuwhy audit PATH``: where TensorFlow will place each op of a saved model on a GPU
machine, and why (the work is gpuwhy.modes.audit's; this is the command around it)."""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path

from gpuwhy.collect.inprocess.projection import TARGET
from gpuwhy.commands.options import (
    checked,
    output_options,
    report_settings,
    stdout_file_option,
    target_option,
)
from gpuwhy.commands.reporting import UsageError, emit, exit_status, plan_outputs
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.modes.audit import AuditError, audit_path

HELP = "Why are my ops on the CPU? Placement audit of a saved model."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Predicts where TensorFlow places each op of a SavedModel's functions or a Keras "
        "model's forward pass on a machine with a GPU, using TF's own GPU kernel registry "
        "(works without a GPU), and lists the host<->device copies. Exit 1 when a "
        "high/medium finding is reported."
    )
    parser.add_argument("path", metavar="PATH", help="a SavedModel directory or a .keras/.h5 file")
    parser.add_argument(
        "--verify",
        action="store_true",
        help="on a GPU machine, also run each signature once with TF's real placer "
        "and report where it disagrees (needs example inputs: signatures with fully "
        "known input shapes)",
    )
    target_option(parser)
    parser.add_argument(
        "--batch",
        type=int,
        metavar="N",
        help="with --target: the batch size that stands for an unknown batch dimension "
        "(a SavedModel's signatures usually leave it unknown)",
    )
    output_options(parser)
    stdout_file_option(parser)


@dataclass(frozen=True)
class AuditSettings:
    path: str
    verify: bool
    target: str | None
    batch: int | None
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> AuditSettings:
    """The command line read once, each option checked (a usage error)."""
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file or directory")
    target = checked(TARGET, args.target)
    if args.batch is not None and args.batch < 1:
        raise UsageError("--batch must be a positive number of examples")
    return AuditSettings(
        path=args.path,
        verify=args.verify,
        target=target,
        batch=args.batch,
        report=report_settings(args),
    )


def execute(settings: AuditSettings) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # our own process: keep TF's banner quiet
    path = settings.path
    outputs = plan_outputs(
        settings.report, inputs=[path], project_dir=path if os.path.isdir(path) else None
    )
    try:
        import tensorflow  # noqa: F401 - only to say early that it is missing
    except ImportError as e:
        raise UsageError(
            f"TensorFlow is not importable here ({e}); `gpuwhy check` says why"
        ) from None

    try:
        record = audit_path(
            path, verify=settings.verify, target=settings.target, batch=settings.batch
        )
    except AuditError as e:
        raise UsageError(str(e)) from None
    emit(record, settings.report, outputs)
    return exit_status(record)
