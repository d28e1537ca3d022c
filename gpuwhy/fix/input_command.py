"""``gpuwhy fix --input SCRIPT [ARGS]``: optimise every tf.data pipeline a script reads.

The script runs as ``python SCRIPT ARGS`` would (gpuwhy.runner: same argv, ``__main__``,
working directory, output). While it runs, two hooks record where each dataset was
created and which datasets it iterated (``for x in ds``, ``iter(ds)``, Keras' epoch
iterators); wrappers a library put around the user's dataset (Keras, tf.distribute) are
looked through. Each distinct dataset goes through
:func:`gpuwhy.fix.input_pipeline.optimize` the first time the script iterates it, inside
that call: its files, temporary directories and Python objects are alive then, and may
not be once the script ends (``with tempfile.TemporaryDirectory()`` around training). The
report (stderr, after the script's own output) gives before/after/ideal throughput and
the lines to change, with the file:line of each stage.

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
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from gpuwhy import own_stderr
from gpuwhy.facts import InputFix, InputFixFacts
from gpuwhy.report.terminal_fix import input_fix_lines

EXIT_OK, EXIT_ERROR = 0, 2


class FixUsageError(Exception):
    """Bad input (a missing script, a bad option): one line, exit 2."""


class _StopScript(SystemExit):
    """Ends the script at its first iterator (``--stop-early``): a SystemExit(0), so the
    runner reports a clean exit and prints no traceback."""

    def __init__(self) -> None:
        super().__init__(0)


def add_parser(subparsers) -> argparse.ArgumentParser:
    """The ``fix`` subcommand, for gpuwhy.cli's ``build_parser``."""
    fix = subparsers.add_parser(
        "fix",
        help="Make my input pipeline faster: rewrite it safely, check and measure it.",
        description="Runs SCRIPT as `python SCRIPT ARGS...` would, captures every tf.data "
        "dataset it iterates, then rewrites each with the fixes that cannot change its "
        "elements (parallel stateless maps, cache before the shuffle, prefetch ...), checks "
        "the elements are the same, and times original, rewritten and ideal (the output "
        "cached in memory). The report and the code to paste go to stderr.",
    )
    configure_parser(fix)
    return fix


def configure_parser(parser: argparse.ArgumentParser) -> None:
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
    parser.add_argument(
        "--json",
        metavar="PATH",
        help="also write the run record (with section input_fixes) to PATH; "
        "`gpuwhy report PATH [--html OUT]` renders it again",
    )
    parser.add_argument(
        "--html",
        metavar="PATH",
        help="also write the HTML report (before/after chart per pipeline)",
    )
    parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (everything after SCRIPT)",
    )


@dataclass
class _Captured:
    dataset: Any
    created_at: str | None
    iterated_at: list[str] = field(default_factory=list)
    iterators: int = 0
    result: Any = None  # the OptimizeResult, measured at the first iteration
    error: BaseException | None = None


class _Capture:
    """The user's datasets the script iterated, in the order it first iterated them, each
    optimised when first iterated (``args`` None: captured only)."""

    def __init__(self, stop_early: bool, args: argparse.Namespace | None = None) -> None:
        self.stop_early = stop_early
        self.args = args
        self.found: dict[int, _Captured] = {}
        self.library_only: list[str] = []
        self.patches: list = []
        self.failed: str | None = None
        self._optimising = False

    def install(self, _module: Any = None) -> None:
        from gpuwhy.tfapi import data_rewrite as dr

        try:
            self.patches = dr.install_creation_sites() + dr.install_iterator_capture(self.seen)
        except Exception as e:  # noqa: BLE001 - a TF without these internals
            self.failed = f"cannot hook tf.data in this TensorFlow: {type(e).__name__}: {e}"
        from gpuwhy.tfapi.frames_hidden import hide_gpuwhy_frames

        self.patches.append(hide_gpuwhy_frames())  # undone by uninstall() with the others

    def seen(self, dataset: Any, where: str | None) -> None:
        from gpuwhy.tfapi import data_rewrite as dr

        if self._optimising:
            return  # the measuring's own iterators
        users = dr.user_dataset(dataset)
        if users is None:
            self.library_only.append(where or "?")
            return
        entry = self.found.get(id(users))
        new = entry is None
        if new:
            entry = self.found[id(users)] = _Captured(users, dr.creation_site(users))
        entry.iterators += 1
        if where and where not in entry.iterated_at:
            entry.iterated_at.append(where)
        if new and self.args is not None:
            self._optimise_now(entry, where)
        if self.stop_early:
            raise _StopScript()

    def _optimise_now(self, entry: _Captured, where: str | None) -> None:
        """Measure while the pipeline's inputs exist; never raise into the script."""
        own_stderr.say(
            f"gpuwhy fix: measuring the dataset created at {entry.created_at or '?'}"
            f" (original, rewritten, ideal) before the script reads it at "
            f"{where or '?'} ..."
        )
        self._optimising = True
        try:
            entry.result = _optimise(entry.dataset, self.args)
        except Exception as e:  # noqa: BLE001 - reported after the script, as it was
            entry.error = e
        finally:
            self._optimising = False

    def uninstall(self) -> None:
        for patch in reversed(self.patches):
            patch.undo()
        self.patches = []

    def datasets(self) -> tuple[list[_Captured], list[_Captured]]:
        """(datasets to optimise, views of them: ``ds.take(1)`` over a captured ``ds``)."""
        from gpuwhy.tfapi import data_rewrite as dr

        entries = list(self.found.values())
        ids = {id(e.dataset) for e in entries}
        main, views = [], []
        for entry in entries:
            below = [s.dataset for s in dr.read_chain(entry.dataset)[:-1]]
            (views if any(id(d) in ids for d in below) else main).append(entry)
        return main, views


def run(args: argparse.Namespace) -> int:
    """``gpuwhy fix`` with parsed arguments. Raises :class:`FixUsageError` for bad input."""
    from gpuwhy.collect.run import imports
    from gpuwhy.runner import ScriptError, end_like_the_script, load_script, run_and_report

    if not args.input:
        raise FixUsageError("say what to fix: gpuwhy fix --input SCRIPT [ARGS]")
    if args.repeats < 1:
        raise FixUsageError("--repeats must be at least 1")
    if args.elements is not None and args.elements < 1:
        raise FixUsageError("--elements must be a positive number of elements")
    try:
        code = load_script(args.script)
    except ScriptError as e:
        raise FixUsageError(str(e)) from None
    from gpuwhy.outputs import OutputPathError, plan_outputs

    try:
        outputs = plan_outputs(
            [("--json", args.json), ("--html", getattr(args, "html", None))],
            inputs=[args.script],
            project_dir=os.path.dirname(os.path.abspath(args.script)),
        )
    except OutputPathError as e:
        raise FixUsageError(str(e)) from None
    own_stderr.keep()

    capture = _Capture(stop_early=args.stop_early, args=args)
    status: list[int] = []
    started = time.perf_counter()

    def report(ended: str, exit_code: int, error: str | None) -> None:
        capture.uninstall()
        imports.cancel(capture.install)
        ran = dict(
            ended=ended, exit_code=exit_code, error=error, seconds=time.perf_counter() - started
        )
        # After Ctrl-C or SIGTERM, report what was measured; measuring more would keep
        # the user (or the job scheduler's grace period) waiting.
        status.append(
            _optimise_all(
                capture, args, ran, outputs, measure_rest=ended not in ("interrupted", "terminated")
            )
        )

    imports.when_imported("tensorflow", capture.install)
    try:
        outcome = run_and_report(args.script, args.args, code, report)
    finally:
        capture.uninstall()
        imports.cancel(capture.install)
    end_like_the_script(outcome)
    return status[0] if status else EXIT_OK


def _optimise_all(
    capture: _Capture, args: argparse.Namespace, ran: dict, outputs: dict, measure_rest: bool = True
) -> int:
    out = own_stderr.stream()
    if capture.failed:
        print(f"gpuwhy: error: {capture.failed}", file=out)
        return EXIT_ERROR
    main, views = capture.datasets()
    print("", file=out)
    fixes = []
    status = EXIT_OK
    for n, entry in enumerate(main, 1):
        name = f"dataset created at {entry.created_at}" if entry.created_at else f"dataset [{n}]"
        try:
            if entry.error is not None:
                raise entry.error
            if entry.result is None and not measure_rest:
                fixes.append(
                    InputFix(
                        dataset=name,
                        location=entry.created_at,
                        iterated_at=tuple(entry.iterated_at),
                        error=f"not measured: the script was {ran['ended']} first",
                    )
                )
                continue
            result = entry.result if entry.result is not None else _optimise(entry.dataset, args)
            fixes.append(result.to_facts(name, entry.created_at, tuple(entry.iterated_at)))
        except Exception as e:
            if not _is_tf_error(e) and os.environ.get("GPUWHY_DEBUG"):
                raise
            if not _is_tf_error(e):
                print(
                    f"gpuwhy: error: internal error: {type(e).__name__}: {e} "
                    "(GPUWHY_DEBUG=1 shows the traceback)",
                    file=out,
                )
                status = EXIT_ERROR
            error = _one_line(e) if _is_tf_error(e) else f"{type(e).__name__}: {e}"
            fixes.append(
                InputFix(
                    dataset=name,
                    location=entry.created_at,
                    iterated_at=tuple(entry.iterated_at),
                    error=error,
                )
            )
    facts = InputFixFacts(
        fixes=tuple(fixes),
        keep_order=not args.any_order,
        library_only=tuple(sorted(set(capture.library_only))),
    )
    if not main:
        print(
            "gpuwhy fix --input: the script iterated no tf.data dataset of its own from Python"
            + (
                f" (a library built the ones read at {', '.join(facts.library_only)})"
                if facts.library_only
                else ""
            )
            + "; nothing to optimise.",
            file=out,
        )
    else:
        print(
            f"gpuwhy fix --input: {len(main)} dataset{'s' if len(main) != 1 else ''} iterated"
            + (" (stopped the script at its first iterator)" if args.stop_early else ""),
            file=out,
        )
        for n, (entry, fix) in enumerate(zip(main, fixes), 1):
            where = [f"created at {entry.created_at}"] if entry.created_at else []
            if entry.iterated_at:
                where.append(f"iterated at {', '.join(entry.iterated_at)}")
            where.append(f"{entry.iterators} iterator{'s' if entry.iterators != 1 else ''}")
            print(f"\n[{n}] dataset {', '.join(where)}", file=out)
            print("\n".join(input_fix_lines(fix)), file=out)
    for view in views:
        print(
            f"\nalso iterated: a view of a dataset above (created at {view.created_at or '?'}, "
            f"iterated at {', '.join(view.iterated_at) or '?'}): not optimised separately",
            file=out,
        )
    out.flush()
    if outputs:
        _write_record(_record(facts, args, ran), outputs)
    return status


def _record(facts: InputFixFacts, args: argparse.Namespace, ran: dict):
    """A run record of command ``fix``: the program and the section ``input_fixes``."""
    from gpuwhy.facts import Facts, ProgramFacts
    from gpuwhy.record import RunRecord

    program = ProgramFacts(
        command=(args.script, *args.args),
        ended=ran.get("ended", "completed"),
        exit_code=ran.get("exit_code") or 0,
        error=ran.get("error"),
        seconds=round(ran.get("seconds", 0.0), 3),
        tensorflow_imported="tensorflow" in sys.modules,
        tensorflow_version=getattr(sys.modules.get("tensorflow"), "__version__", None),
    )
    return RunRecord.diagnose("fix", Facts(program=program, input_fixes=facts))


def _write_record(record: Any, outputs: dict) -> None:
    from gpuwhy.outputs import write_or_divert
    from gpuwhy.report.html import write_html

    if "--json" in outputs:
        write_or_divert(outputs["--json"], record.save, own_stderr.say)
    if "--html" in outputs:
        write_or_divert(outputs["--html"], lambda path: write_html(record, path), own_stderr.say)


def _optimise(dataset: Any, args: argparse.Namespace):
    from gpuwhy.fix.input_pipeline import optimize

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
    from gpuwhy.runner import exception_line

    return exception_line(e)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m gpuwhy.fix.input_command --input SCRIPT [ARGS]``: ``gpuwhy fix``."""
    from gpuwhy.cli import main as cli_main

    return cli_main(["fix", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
