"""``gpuwhy run SCRIPT``: run a training script as ``python SCRIPT`` would, watched from
inside (gpuwhy.modes.run.watched), and report why its GPU sat idle: its options, the
outputs planned before the script runs, and the report after it."""

from __future__ import annotations

import argparse
from typing import Any

import gpuwhy.own_stderr as own_stderr
from gpuwhy.collect.registry import options_from, run_options
from gpuwhy.commands.options import (
    gate_conditions,
    gate_options,
    html_option,
    metrics_from,
    metrics_options,
    out_dir_option,
    output_options,
    report_file_option,
    resolve_out_dir,
)
from gpuwhy.commands.reporting import EXIT_OK, EXIT_PROBLEM, UsageError
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
    for option in run_options():  # each collector's, declared where it is read
        option.add_to(parser)
    report_file_option(parser)
    metrics_options(parser)
    output_options(parser)
    html_option(parser)
    out_dir_option(parser)
    gate_options(parser, findings_only=True)


def collector_options(args: argparse.Namespace) -> dict[str, Any]:
    """The collectors' options as given, each checked by the collector that takes it:
    a refused value is a usage error, before anything runs."""
    given = vars(args)
    try:
        return dict(options_from({o.name: given[o.name] for o in run_options()}, ()).values)
    except ValueError as e:
        raise UsageError(str(e)) from None


def main(args: argparse.Namespace) -> int:
    own_stderr.keep()
    options = collector_options(args)
    args.gate = gate_conditions(args, findings_only=True)
    resolve_out_dir(args)
    metrics = metrics_from(args)
    code, outputs = prepare(args)
    outcome = run_watched(
        args.script,
        args.args,
        code,
        options=options,
        metrics=metrics,
        report=lambda make_record: report_after_script(make_record, args, outputs),
    )
    status = end_like_the_script(outcome)
    if status == EXIT_OK and getattr(args, "gate_crossed", None):
        return EXIT_PROBLEM  # the script succeeded; the gate did not
    return status
