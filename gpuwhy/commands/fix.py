"""``gpuwhy fix SCRIPT [ARGS]``: every fix gpuwhy can apply, tried on a copy of the
program and proven (it ran, computed the same, made the step faster) or refused; the
work is :func:`gpuwhy.modes.trial.try_fixes`'s. ``--patch PATH`` writes the fixes that
held as a unified diff.

``gpuwhy fix --input SCRIPT [ARGS]``: optimise every tf.data pipeline a script reads.

The work is :func:`gpuwhy.modes.fix.fix_input`'s; this is the command around it (its
options, the outputs planned before the script runs, the report after it). The script
runs as ``python SCRIPT ARGS`` would (same argv, ``__main__``, working directory,
output); each dataset it iterates is passed to :func:`gpuwhy.optimize.optimize` while
its inputs exist. The result is a run record (command ``fix``, section ``input_fixes``) that goes through the
same renderers and options as every command (``-f``, ``-o``, ``--json``, ``--html``): the
report on stderr after the script's own output gives before/after/ideal throughput and
the lines to change, with the file:line of each stage, and ``gpuwhy report fix.json``
prints the same.

The whole script runs by default: a user expects ``gpuwhy fix --input train.py --epochs 1``
to run what ``python train.py --epochs 1`` runs (and it must get as far as building its
pipelines). ``--stop-early`` ends it instead at its first iterator over a dataset of its
own: the training loop does not run, and that one dataset is optimised.

Exit status: 0 when gpuwhy did its work (whatever the script's own status: the report is
the product), 2 for a gpuwhy error or bad input (one line), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

import gpuwhy.report_stream as report_stream
from gpuwhy.collect.inprocess.projection import TARGET
from gpuwhy.commands.options import (
    checked,
    html_option,
    output_options,
    report_file_option,
    report_settings,
)
from gpuwhy.commands.reporting import EXIT_ERROR, EXIT_INTERRUPTED, EXIT_OK, UsageError
from gpuwhy.commands.script_command import (
    prepare,
    report_after_script,
    script_arguments,
    script_settings,
)
from gpuwhy.commands.settings import ReportSettings, ScriptSettings
from gpuwhy.fixes.trial_text import no_patch_reason
from gpuwhy.modes.fix import FixOptions, fix_input
from gpuwhy.modes.run.script import end_like_the_script
from gpuwhy.modes.trial import TrialOptions, try_fixes
from gpuwhy.record import Record
from gpuwhy.trial.kinds import fixable_ids

HELP = "Try every fix on a copy of my program: keep what runs, computes the same and is faster."
PIPELINE_REPEATS = 5  # --input: timed passes per pipeline


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Runs SCRIPT as `python SCRIPT ARGS...` would, for a bounded time, finds what slows "
        "it, then runs a copy of it with each fix gpuwhy can apply (the step in tf.function, "
        "Python values passed as tensors, float32, the tf.device block removed, parallel "
        "maps and prefetch, steps_per_execution and XLA in compile, predict_on_batch for a "
        "predict() each step), several times beside "
        "the original: a fix that crashes, changes the losses or does not make the step "
        "faster is said so and left out of the patch. Your files are never written. "
        "With --input: rewrite every tf.data pipeline the script iterates with the fixes "
        "that cannot change its elements, check and time it alone."
    )
    parser.add_argument(
        "--input",
        action="store_true",
        help="only the tf.data input pipelines, each rewritten and timed alone",
    )
    parser.add_argument(
        "--bound",
        type=float,
        default=30.0,
        metavar="S",
        help="stop each run of the program S seconds after it starts (30)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="runs of each fix, interleaved with as many of the original (3); a gain "
        "they leave unclear gets more, within (fixes + 2) x N runs in all",
    )
    parser.add_argument(
        "--patch",
        metavar="PATH",
        help="write the fixes that held as a unified diff to PATH (git apply PATH); "
        "nothing is written when no fix held",
    )
    parser.add_argument(
        "--finding",
        action="append",
        default=[],
        metavar="ID",
        help="only try fixes for this finding id (repeatable)",
    )
    TARGET.add_to(parser)
    parser.add_argument(
        "--keep",
        metavar="DIR",
        help="keep each run's copy of the program's output (stdout, stderr, record) in DIR",
    )
    parser.add_argument(
        "--any-order",
        action="store_true",
        help="allow the order of elements to change (non-deterministic parallel "
        "stages, parallel file reads); elements are then checked as a multiset",
    )
    parser.add_argument("--no-cache", action="store_true", help="never insert cache()")
    parser.add_argument(
        "--assume-pure",
        action="store_true",
        help="the pipelines' Python functions (py_function, numpy_function, "
        "from_generator) keep no state: they may run in parallel and be cached",
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=PIPELINE_REPEATS,
        metavar="N",
        help=f"timed passes per pipeline ({PIPELINE_REPEATS})",
    )
    parser.add_argument(
        "--elements",
        type=int,
        default=None,
        metavar="N",
        help="elements per pass (default: an epoch; ~2 s for an infinite dataset)",
    )
    parser.add_argument(
        "--no-measure",
        dest="measure",
        action="store_false",
        help="only rewrite and check the elements, do not time",
    )
    parser.add_argument(
        "--stop-early",
        action="store_true",
        help="end the script when it starts iterating its first dataset (the "
        "training does not run; only that dataset is optimised)",
    )
    output_options(parser)
    html_option(parser)
    report_file_option(parser)
    script_arguments(parser)


@dataclass(frozen=True)
class FixSettings:
    script: ScriptSettings
    options: FixOptions
    report: ReportSettings
    trial: TrialOptions | None = None  # without --input: every fix, tried
    patch: str | None = None


def settings_from(args: argparse.Namespace) -> FixSettings:
    """The command line read once, each option checked (a usage error)."""
    if not args.input:
        pipeline_only = _pipeline_options_given(args)
        if pipeline_only:
            raise UsageError(
                f"{', '.join(pipeline_only)}: options of gpuwhy fix --input (the pipelines "
                "alone); gpuwhy fix SCRIPT tries each fix on the whole program"
            )
        return FixSettings(
            script=script_settings(args),
            options=FixOptions(),
            report=report_settings(args),
            trial=trial_options(args),
            patch=args.patch,
        )
    if args.patch:
        raise UsageError(
            "--patch does not work with --input, which prints the lines to change; "
            "gpuwhy fix SCRIPT (without --input) writes the patch"
        )
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.elements is not None and args.elements < 1:
        raise UsageError("--elements must be a positive number of elements")
    return FixSettings(
        script=script_settings(args),
        options=FixOptions(
            keep_order=not args.any_order,
            cache=not args.no_cache,
            assume_pure=args.assume_pure,
            measure=args.measure,
            elements=args.elements,
            repeats=args.repeats,
            stop_early=args.stop_early,
        ),
        report=report_settings(args),
    )


def _pipeline_options_given(args: argparse.Namespace) -> list[str]:
    """The options of ``--input`` given without it (they would be ignored)."""
    given = {
        "--any-order": args.any_order,
        "--no-cache": args.no_cache,
        "--assume-pure": args.assume_pure,
        "--repeats": args.repeats != PIPELINE_REPEATS,
        "--elements": args.elements is not None,
        "--no-measure": not args.measure,
        "--stop-early": args.stop_early,
    }
    return [name for name, on in given.items() if on]


def trial_options(args: argparse.Namespace) -> TrialOptions:
    if not args.bound > 0:
        raise UsageError(f"--bound must be a positive number of seconds, not {args.bound}")
    if not 2 <= args.runs <= 20:
        raise UsageError(
            f"--runs {args.runs}: between 2 and 20 (one run a side cannot show how far runs spread)"
        )
    unknown = [f for f in args.finding if f not in fixable_ids()]
    if unknown:
        raise UsageError(
            f"--finding {unknown[0]}: gpuwhy fix tries fixes for {', '.join(sorted(fixable_ids()))}"
        )
    return TrialOptions(
        bound_s=args.bound,
        runs=args.runs,
        keep=args.keep,
        only=tuple(args.finding),
        target=checked(TARGET, TARGET.given_in(args)),
    )


def execute(settings: FixSettings) -> int:
    """Exits 0 whatever the script's own status (the report is the product), 2 when
    gpuwhy itself failed or was misused."""
    if settings.trial is not None:
        return execute_trial(settings, settings.trial)
    code, outputs = prepare(settings.script, settings.report)
    report_stream.keep()

    def report(make_record: Callable[[], Record]) -> None:
        report_after_script(make_record, settings.report, outputs)  # no gate: exit 0 or 2

    outcome, failed = fix_input(
        settings.script.path,
        settings.script.args,
        code,
        settings.options,
        report=report,
    )
    end_like_the_script(outcome)
    return EXIT_ERROR if failed else EXIT_OK


def execute_trial(settings: FixSettings, options: TrialOptions) -> int:
    """The fixes tried, the report on stderr, the patch where asked; 0 when the trial
    was made (whatever the fixes did), 2 when the original itself could not run."""
    _, outputs = prepare(settings.script, settings.report)
    report_stream.keep()
    if settings.patch:
        check_patch_path(settings.patch, settings.script.path)
    if options.keep is not None:
        check_keep(options.keep, settings.script.path)
    record = try_fixes(
        settings.script.path,
        settings.script.args,
        options,
        progress=lambda line: report_stream.say(f"gpuwhy fix: {line}"),
    )
    report_after_script(lambda: record, settings.report, outputs)
    trial = record.facts.fix_trial
    if settings.patch:
        patch = trial.patch if trial is not None else None
        if patch:
            with open(settings.patch, "w", encoding="utf-8") as f:
                f.write(patch)
            report_stream.say(f"gpuwhy fix: patch written to {settings.patch} (git apply it)")
        else:  # an empty file would `git apply` as if something held
            why = no_patch_reason(record.facts.fixes_tried or ())
            report_stream.say(f"gpuwhy fix: no patch written to {settings.patch}: {why}")
    elif any(a.split("=", 1)[0] == "--patch" for a in settings.script.args):
        # said at the start too, and scrolled away by minutes of runs: said where the
        # patch would have been
        report_stream.say(
            "gpuwhy fix: no patch written: --patch came after SCRIPT, so the script got it; "
            "gpuwhy's options go before SCRIPT (gpuwhy fix --patch fix.diff train.py)"
        )
    if trial is not None and trial.original_error is not None:
        return EXIT_ERROR
    if trial is not None and trial.interrupted:
        return EXIT_INTERRUPTED  # the table so far was printed, as Ctrl-C asked
    return EXIT_OK


def check_keep(keep: str, script: str) -> None:
    """``--keep`` must not hold the script's folder or the working directory: each copy
    would copy the copies (a folder below them is fine: the copies leave it out)."""
    kept = os.path.realpath(keep)
    for folder in (os.path.dirname(os.path.abspath(script)), os.getcwd()):
        real = os.path.realpath(folder)
        if real == kept or real.startswith(kept + os.sep):
            raise UsageError(
                f"--keep {keep} holds the program's folder {real}: keep the runs in a "
                "folder beside it or below it"
            )


def check_patch_path(path: str, script: str) -> None:
    """Never over the script or a directory."""
    if os.path.isdir(path):
        raise UsageError(f"--patch {path} is a directory")
    if os.path.exists(path) and os.path.samefile(path, script):
        raise UsageError(f"--patch {path} is the script itself")
