"""``gpuwhy fix --input SCRIPT [ARGS]``: optimise every tf.data pipeline a script reads.

The script runs as ``python SCRIPT ARGS`` would (gpuwhy.modes.run.script: same argv, ``__main__``,
working directory, output). gpuwhy.modes.fix catches each dataset the script iterates
and passes it to :func:`gpuwhy.optimize.input_pipeline.optimize` while its inputs exist. The
result is a run record (command ``fix``, section ``input_fixes``) that goes through the
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
import dataclasses
import os
import sys
import time
from typing import Any

from gpuwhy import own_stderr
from gpuwhy.commands.options import html_option, output_options, report_file_option
from gpuwhy.commands.reporting import EXIT_ERROR, EXIT_OK, UsageError
from gpuwhy.commands.script_command import prepare, report_after_script, script_arguments
from gpuwhy.facts import Facts, InputFix, InputFixFacts, ProgramFacts
from gpuwhy.modes.fix import Capture, Captured
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


def main(args: argparse.Namespace) -> int:
    """Exits 0 whatever the script's own status (the report is the product), 2 when
    gpuwhy itself failed or was misused."""
    from gpuwhy.collect.inprocess import imports
    from gpuwhy.modes.run.script import end_like_the_script, run_and_report

    if not args.input:
        raise UsageError("say what to fix: gpuwhy fix --input SCRIPT [ARGS]")
    if args.repeats < 1:
        raise UsageError("--repeats must be at least 1")
    if args.elements is not None and args.elements < 1:
        raise UsageError("--elements must be a positive number of elements")
    code, outputs = prepare(args)
    own_stderr.keep()

    capture = Capture(stop_early=args.stop_early, optimise=lambda ds: _optimise(ds, args))
    status: list[int] = []
    started = time.perf_counter()

    def report(ended: str, exit_code: int, error: str | None) -> None:
        capture.uninstall()
        imports.cancel(capture.install)
        program = ProgramFacts(
            command=(args.script, *args.args),
            ended=ended,
            exit_code=exit_code or 0,
            error=error,
            seconds=round(time.perf_counter() - started, 3),
            tensorflow_imported="tensorflow" in sys.modules,
            tensorflow_version=getattr(sys.modules.get("tensorflow"), "__version__", None),
        )
        if capture.failed:
            own_stderr.say(f"gpuwhy: error: {capture.failed}")
            status.append(EXIT_ERROR)
            return
        # After Ctrl-C or SIGTERM, report what was measured; measuring more would keep
        # the user (or the job scheduler's grace period) waiting.
        fixes, failed = _fix_facts(capture, args, ended if ended in _CUT_SHORT else None)
        status.append(EXIT_ERROR if failed else EXIT_OK)
        record = Record.diagnose("fix", Facts(program=program, input_fixes=fixes))
        report_after_script(lambda: record, args, outputs)

    imports.when_imported("tensorflow", capture.install)
    try:
        outcome = run_and_report(args.script, args.args, code, report)
    finally:
        capture.uninstall()
        imports.cancel(capture.install)
    end_like_the_script(outcome)
    return status[0] if status else EXIT_OK


_CUT_SHORT = ("interrupted", "terminated")


def _fix_facts(
    capture: Capture, args: argparse.Namespace, cut_short: str | None
) -> tuple[InputFixFacts, bool]:
    """The section ``input_fixes`` for every dataset the script iterated, and whether
    gpuwhy itself failed on one (said on stderr as it happens). ``cut_short``: how the
    script ended when it was stopped (then a dataset not measured yet is not measured)."""
    main, views = capture.datasets()
    fixes = []
    failed = False
    for n, entry in enumerate(main, 1):
        name = f"dataset created at {entry.created_at}" if entry.created_at else f"dataset [{n}]"
        seen = InputFix(
            dataset=name,
            location=entry.created_at,
            iterated_at=tuple(entry.iterated_at),
            iterators=entry.iterators,
        )
        try:
            if entry.error is not None:
                raise entry.error
            if entry.result is None and cut_short:
                fixes.append(
                    dataclasses.replace(
                        seen, error=f"not measured: the script was {cut_short} first"
                    )
                )
                continue
            result = entry.result if entry.result is not None else _optimise(entry.dataset, args)
            fix = result.to_facts(name, entry.created_at, tuple(entry.iterated_at))
            fixes.append(dataclasses.replace(fix, iterators=entry.iterators))
        except Exception as e:
            if not _is_tf_error(e):
                if os.environ.get("GPUWHY_DEBUG"):
                    raise
                own_stderr.say(
                    f"gpuwhy: error: internal error: {type(e).__name__}: {e} "
                    "(GPUWHY_DEBUG=1 shows the traceback)"
                )
                failed = True
            error = _one_line(e) if _is_tf_error(e) else f"{type(e).__name__}: {e}"
            fixes.append(dataclasses.replace(seen, error=error))
    facts = InputFixFacts(
        fixes=tuple(fixes),
        keep_order=not args.any_order,
        library_only=tuple(sorted(set(capture.library_only))),
        views=tuple(_view_text(view) for view in views),
        stopped_early=bool(args.stop_early and main),
    )
    return facts, failed


def _view_text(view: Captured) -> str:
    return f"created at {view.created_at or '?'}, iterated at {', '.join(view.iterated_at) or '?'}"


def _optimise(dataset: Any, args: argparse.Namespace) -> Any:
    from gpuwhy.optimize.input_pipeline import optimize

    return optimize(
        dataset,
        keep_order=not args.any_order,
        cache=False if args.no_cache else "auto",
        measure=args.measure,
        elements=args.elements,
        repeats=args.repeats,
        assume_pure=args.assume_pure,
    )


def _is_tf_error(e: BaseException) -> bool:
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(e, tf.errors.OpError)


def _one_line(e: BaseException) -> str:
    from gpuwhy.modes.run.script import exception_line

    return exception_line(e)
