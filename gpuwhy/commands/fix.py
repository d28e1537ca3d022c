"""``gpuwhy fix --input SCRIPT [ARGS]``: optimise every tf.data pipeline a script reads.

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
from collections.abc import Callable
from dataclasses import dataclass

import gpuwhy.own_stderr as own_stderr
from gpuwhy.commands.options import (
    html_option,
    output_options,
    report_file_option,
    report_settings,
)
from gpuwhy.commands.reporting import EXIT_ERROR, EXIT_OK, UsageError
from gpuwhy.commands.script_command import (
    prepare,
    report_after_script,
    script_arguments,
    script_settings,
)
from gpuwhy.commands.settings import ReportSettings, ScriptSettings
from gpuwhy.modes.fix import FixOptions, fix_input
from gpuwhy.modes.run.script import end_like_the_script
from gpuwhy.record import Record

HELP = "Make my input pipeline faster: rewrite it safely, check and measure it."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Runs SCRIPT as `python SCRIPT ARGS...` would, captures every tf.data dataset it "
        "iterates, then rewrites each with the fixes that cannot change its elements "
        "(parallel stateless maps, cache before the shuffle, prefetch ...), checks the "
        "elements are the same, and times original, rewritten and ideal (the output cached "
        "in memory). The report and the code to paste go to stderr."
    )
    parser.add_argument(
        "--input",
        action="store_true",
        help="fix the tf.data input pipelines (the only kind of fix so far)",
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
        "--repeats", type=int, default=5, metavar="N", help="timed passes per pipeline (5)"
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


def settings_from(args: argparse.Namespace) -> FixSettings:
    """The command line read once, each option checked (a usage error)."""
    if not args.input:
        raise UsageError("say what to fix: gpuwhy fix --input SCRIPT [ARGS]")
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


def execute(settings: FixSettings) -> int:
    """Exits 0 whatever the script's own status (the report is the product), 2 when
    gpuwhy itself failed or was misused."""
    code, outputs = prepare(settings.script, settings.report)
    own_stderr.keep()

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
