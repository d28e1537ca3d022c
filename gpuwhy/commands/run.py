"""``gpuwhy run SCRIPT``: run a training script as ``python SCRIPT`` would, watched from
inside (gpuwhy.modes.run.watched), and report why its GPU sat idle: its options, the
outputs planned before the script runs, and the report after it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import gpuwhy.report_stream as report_stream
from gpuwhy.collect.registry import run_options
from gpuwhy.commands.options import (
    checked,
    gate_options,
    gate_settings,
    html_option,
    metrics_options,
    metrics_settings,
    out_dir_option,
    out_dir_settings,
    output_options,
    report_file_option,
    report_settings,
)
from gpuwhy.commands.repeat import check_repeat, check_stale, repeat_runs
from gpuwhy.commands.reporting import EXIT_OK, EXIT_PROBLEM, UsageError
from gpuwhy.commands.script_command import (
    prepare,
    report_after_script,
    script_arguments,
    script_settings,
)
from gpuwhy.commands.settings import Gate, OutDir, ReportSettings, ScriptSettings
from gpuwhy.export.metrics_options import MetricsOptions
from gpuwhy.modes.run.script import RunSteps, ScriptEnding, drive, end_like_the_script
from gpuwhy.modes.run.watched import watched_steps
from gpuwhy.record import Record
from gpuwhy.trial.child import install as install_trial

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
    parser.add_argument(
        "--stop-after",
        type=float,
        metavar="S",
        help="stop the program S seconds after it starts and report that part of it (a "
        "long training's first minutes; the run counts as completed)",
    )
    # a fix trial's run of one variant (gpuwhy.trial): seeds set alike, Keras' logs kept
    parser.add_argument("--trial-results", help=argparse.SUPPRESS)
    parser.add_argument("--trial-seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument(
        "--repeat",
        type=int,
        metavar="N",
        help="run the program N times, each in a fresh process (--json PATH writes "
        "PATH-1.json ... PATH-N.json), and say how far the runs' step times spread: "
        "several runs a side for gpuwhy diff",
    )


@dataclass(frozen=True)
class RunSettings:
    script: ScriptSettings
    # the Session's options, (name, value) in the collectors' order (collect/registry.py)
    collector_options: tuple[tuple[str, Any], ...]
    gate: Gate
    out_dir: OutDir | None
    metrics: MetricsOptions
    report: ReportSettings
    repeat: int = 1
    stop_after: float | None = None
    trial_results: str | None = None
    trial_seed: int = 0
    # --repeat: gpuwhy's own options as given (each run gets them again) and SCRIPT ARGS
    options: tuple[str, ...] = ()


def settings_from(args: argparse.Namespace) -> RunSettings:
    """The command line read once, each option checked (a usage error): the collectors'
    options, then the gate, then the live metrics."""
    collectors = collector_options(args)
    gate = gate_settings(args, findings_only=True)
    out_dir = out_dir_settings(args)
    metrics = metrics_settings(args)
    repeat = check_repeat(args.repeat, args.out_dir)
    if args.stop_after is not None and not args.stop_after > 0:
        raise UsageError(
            f"--stop-after must be a positive number of seconds, not {args.stop_after}"
        )
    given = list(args.argv or ())
    tail = 1 + len(args.args)  # SCRIPT ARGS, at the end of the command line
    return RunSettings(
        script=script_settings(args),
        collector_options=collectors,
        gate=gate,
        out_dir=out_dir,
        metrics=metrics,
        report=report_settings(args),
        repeat=repeat,
        stop_after=args.stop_after,
        trial_results=args.trial_results,
        trial_seed=args.trial_seed,
        options=tuple(given[1 : len(given) - tail]) if repeat > 1 else (),
    )


def collector_options(args: argparse.Namespace) -> tuple[tuple[str, Any], ...]:
    """The collectors' options (collect/registry.py: --hz, --no-audit, --no-eager,
    --eager-duty, --target ...), each checked by the collector that takes it."""
    return tuple((o.name, checked(o, o.given_in(args))) for o in run_options())


def execute(settings: RunSettings) -> int:
    """The run, its setup and ending in helpers: this frame stays below the script while
    it runs, and TensorFlow reads its line at every eager op (a scan of its code's line
    table up to the call it waits in: short here; see gpuwhy.modes.run.script.drive)."""
    if settings.repeat > 1:
        return _repeated(settings)
    steps, crossed = _watched(settings)
    return _status(drive(steps), crossed)


def _repeated(settings: RunSettings) -> int:
    report_stream.keep()
    prepare(settings.script, settings.report)  # the script and outputs, checked once
    check_stale(settings.report.json, settings.repeat)
    script = (settings.script.path, *settings.script.args)
    return repeat_runs(settings.repeat, settings.options, script, settings.report.json)


def _watched(settings: RunSettings) -> tuple[RunSteps[ScriptEnding], list[str]]:
    """The watched run's steps, and what the gate found (filled by the report after the
    script, inside the steps)."""
    report_stream.keep()
    code, outputs = prepare(settings.script, settings.report)
    if settings.trial_results is not None:
        install_trial(settings.trial_results, settings.trial_seed)
    crossed: list[str] = []

    def report(make_record: Callable[[], Record]) -> None:
        crossed[:] = report_after_script(
            make_record,
            settings.report,
            outputs,
            out_dir=settings.out_dir,
            gate=settings.gate,
        )

    steps = watched_steps(
        settings.script.path,
        settings.script.args,
        code,
        options=dict(settings.collector_options),
        metrics=settings.metrics,
        report=report,
        stop_after=settings.stop_after,
    )
    return steps, crossed


def _status(outcome: ScriptEnding, crossed: list[str]) -> int:
    status = end_like_the_script(outcome)
    if status == EXIT_OK and crossed:
        return EXIT_PROBLEM  # the script succeeded; the gate did not
    return status
