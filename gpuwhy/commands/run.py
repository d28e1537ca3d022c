"""``gpuwhy run SCRIPT``: run a training script as ``python SCRIPT`` would, watched from
inside (gpuwhy.modes.run.watched), and report why its GPU sat idle: its options, the
outputs planned before the script runs, and the report after it."""

from __future__ import annotations

import argparse

import gpuwhy.own_stderr as own_stderr
from gpuwhy.commands.options import (
    check_target,
    gate_conditions,
    gate_options,
    html_option,
    metrics_from,
    metrics_options,
    out_dir_option,
    output_options,
    resolve_out_dir,
    sampling_options,
    target_option,
)
from gpuwhy.commands.reporting import EXIT_OK, EXIT_PROBLEM, UsageError, check_hz
from gpuwhy.commands.script_command import prepare, report_after_script, script_arguments
from gpuwhy.modes.run.script import end_like_the_script
from gpuwhy.modes.run.watched import run_watched

HELP = "Why is my training slow on the GPU? Run a script and diagnose it."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Runs SCRIPT as `python SCRIPT ARGS...` would (same argv, __main__, working "
        "directory, output and exit status) and watches it: training steps and input wait, "
        "eager ops, tf.function traces, GPU activity through NVML, and the placement of the "
        "functions it ran. The report goes to stderr after the script's own output; the exit "
        "status is the script's (1 when it succeeded and a --fail-on severity was found)."
    )
    script_arguments(parser)
    sampling_options(parser)
    parser.add_argument(
        "--no-audit",
        dest="audit",
        action="store_false",
        help="skip the placement audit of the tf.functions the script ran",
    )
    parser.add_argument(
        "--no-eager",
        dest="eager",
        action="store_false",
        help="do not count eager ops (no per-op callback at all)",
    )
    parser.add_argument(
        "--eager-duty",
        type=float,
        default=None,
        metavar="F",
        help="share of the run in which eager ops are counted (default 1/11, "
        "which keeps the cost under 5%%; 1 counts every op, ~20%% slower eager ops)",
    )
    target_option(parser)
    metrics_options(parser)
    output_options(parser)
    html_option(parser)
    out_dir_option(parser)
    gate_options(parser, findings_only=True)


def main(args: argparse.Namespace) -> int:
    own_stderr.keep()
    check_hz(args.hz)
    if args.eager_duty is not None and not (0 < args.eager_duty <= 1):
        raise UsageError("--eager-duty must be a fraction in (0, 1]")
    check_target(args.target)
    args.gate = gate_conditions(args, findings_only=True)
    resolve_out_dir(args)
    metrics = metrics_from(args)
    code, outputs = prepare(args)
    outcome = run_watched(
        args.script,
        args.args,
        code,
        hz=args.hz,
        audit=args.audit,
        eager=args.eager,
        eager_duty=args.eager_duty,
        target=args.target,
        metrics=metrics,
        report=lambda make_record: report_after_script(make_record, args, outputs),
    )
    status = end_like_the_script(outcome)
    if status == EXIT_OK and getattr(args, "gate_crossed", None):
        return EXIT_PROBLEM  # the script succeeded; the gate did not
    return status
