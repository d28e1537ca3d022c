"""``gpuwhy fix --input SCRIPT``'s mode: the script run as ``python SCRIPT`` would
(gpuwhy.modes.run.script), every tf.data dataset it iterates optimised by
:func:`gpuwhy.optimize.optimize`, and the record (command ``fix``, section
``input_fixes``) handed to the caller to write. The command only parses and writes.

Two hooks record where each dataset was created and which datasets the script iterated
(``for x in ds``, ``iter(ds)``, Keras' epoch iterators); wrappers a library put around
the user's dataset (Keras, tf.distribute) are looked through. Each distinct dataset is
optimised the first time the script iterates it, inside that call: its files, temporary
directories and Python objects are alive then, and may not be once the script ends
(``with tempfile.TemporaryDirectory()`` around training).
"""

from __future__ import annotations

import dataclasses
import os
import sys
import time
import types
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import gpuwhy.report_stream as report_stream
from gpuwhy.collect.inprocess import imports
from gpuwhy.facts import Facts, InputFix, InputFixFacts, ProgramFacts
from gpuwhy.modes.run.script import ScriptEnding, exception_line, run_and_report
from gpuwhy.optimize.input_pipeline import optimize
from gpuwhy.record import Record
from gpuwhy.tfapi.own_frames_hidden import hide_gpuwhy_frames
from gpuwhy.tfapi.tfdata import stages


class StopScript(SystemExit):
    """Ends the script at its first iterator (``--stop-early``): a SystemExit(0), so the
    runner reports a clean exit and prints no traceback."""

    def __init__(self) -> None:
        super().__init__(0)


@dataclass
class Captured:
    dataset: Any
    created_at: str | None
    iterated_at: list[str] = field(default_factory=list)
    called_at: str | None = None  # the call of the helper that created it, if one did
    iterators: int = 0
    result: Any = None  # the OptimizeResult, measured at the first iteration
    error: BaseException | None = None


class Capture:
    """The user's datasets the script iterated, in the order it first iterated them, each
    passed to ``optimise`` when first iterated (``optimise`` None: captured only)."""

    def __init__(self, stop_early: bool, optimise: Callable[[Any], Any] | None = None) -> None:
        self.stop_early = stop_early
        self.optimise = optimise
        self.found: dict[int, Captured] = {}
        self.library_only: list[str] = []
        self.patches: list[Any] = []
        self.failed: str | None = None
        self._optimising = False

    def install(self, _module: Any = None) -> None:
        try:
            self.patches = stages.install_creation_sites() + stages.install_iterator_capture(
                self.seen
            )
        except Exception as e:  # noqa: BLE001 - a TF without these internals
            self.failed = f"cannot hook tf.data in this TensorFlow: {type(e).__name__}: {e}"

        self.patches.append(hide_gpuwhy_frames())  # undone by uninstall() with the others

    def seen(self, dataset: Any, where: str | None) -> None:
        if self._optimising:
            return  # the measuring's own iterators
        users = stages.user_dataset(dataset)
        if users is None:
            self.library_only.append(where or "?")
            return
        entry = self.found.get(id(users))
        if entry is None:
            entry = self.found[id(users)] = Captured(
                users, stages.creation_site(users), called_at=stages.creation_caller(users)
            )
            new = True
        else:
            new = False
        entry.iterators += 1
        if where and where not in entry.iterated_at:
            entry.iterated_at.append(where)
        if new and self.optimise is not None:
            self._optimise_now(entry, where)
        if self.stop_early:
            raise StopScript()

    def _optimise_now(self, entry: Captured, where: str | None) -> None:
        """Measure while the pipeline's inputs exist; never raise into the script."""
        assert self.optimise is not None
        report_stream.say(
            f"gpuwhy fix: measuring the dataset created at {entry.created_at or '?'}"
            + (f" (in the function called at {entry.called_at})" if entry.called_at else "")
            + " (original, rewritten, ideal) before the script reads it at "
            f"{where or '?'} ..."
        )
        self._optimising = True
        began = time.perf_counter()
        try:
            entry.result = self.optimise(entry.dataset)
        except Exception as e:  # noqa: BLE001 - reported after the script, as it was
            entry.error = e
        finally:
            self._optimising = False
        # the script's own clocks run on through the measuring: what it prints of a span
        # across this point (an epoch's time) holds gpuwhy's seconds, said where they went
        report_stream.say(
            f"gpuwhy fix: measured in {time.perf_counter() - began:.1f} s, inside the "
            "script's run (a time the script prints across this point includes them; TF's "
            "'Optimization loop failed: CANCELLED' warnings are the timed passes' "
            "iterators ending); the script goes on"
        )

    def uninstall(self) -> None:
        for patch in reversed(self.patches):
            patch.undo()
        self.patches = []

    def datasets(self) -> tuple[list[Captured], list[Captured]]:
        """(datasets to optimise, views of them: ``ds.take(1)`` over a captured ``ds``)."""

        entries = list(self.found.values())
        ids = {id(e.dataset) for e in entries}
        main: list[Captured] = []
        views: list[Captured] = []
        for entry in entries:
            below = [s.dataset for s in stages.read_chain(entry.dataset)[:-1]]
            (views if any(id(d) in ids for d in below) else main).append(entry)
        return main, views


@dataclass(frozen=True)
class FixOptions:
    """How each dataset is optimised (the options of :func:`gpuwhy.optimize.optimize`)
    and whether the script ends at its first iterator."""

    keep_order: bool = True
    cache: bool = True  # False: never insert cache()
    assume_pure: bool = False
    measure: bool = True
    elements: int | None = None
    repeats: int = 5
    stop_early: bool = False


# Called once when the script has ended, with what makes the fix record.
ReportRecord = Callable[[Callable[[], Record]], None]

_CUT_SHORT = ("interrupted", "terminated")


def fix_input(
    script: str,
    script_args: Sequence[str],
    code: types.CodeType,
    options: FixOptions,
    report: ReportRecord,
) -> tuple[ScriptEnding, bool]:
    """Run the compiled ``code`` of ``script``, optimising each dataset it iterates, then
    ``report`` the record once; (how the script ended, whether gpuwhy itself failed: on
    a dataset, said on stderr as it happened, or to hook tf.data, when nothing is
    reported)."""
    capture = Capture(stop_early=options.stop_early, optimise=lambda ds: _optimise(ds, options))
    failed: list[bool] = []
    started = time.perf_counter()

    def report_ending(ended: str, exit_code: int, error: str | None) -> None:
        capture.uninstall()
        imports.cancel(capture.install)
        program = ProgramFacts(
            command=(script, *script_args),
            ended=ended,
            exit_code=exit_code or 0,
            error=error,
            seconds=round(time.perf_counter() - started, 3),
            tensorflow_imported="tensorflow" in sys.modules,
            tensorflow_version=getattr(sys.modules.get("tensorflow"), "__version__", None),
        )
        if capture.failed:
            report_stream.say(f"gpuwhy: error: {capture.failed}")
            failed.append(True)
            return
        # After Ctrl-C or SIGTERM, report what was measured; measuring more would keep
        # the user (or the job scheduler's grace period) waiting.
        fixes, gpuwhy_failed = _fix_facts(capture, options, ended if ended in _CUT_SHORT else None)
        failed.append(gpuwhy_failed)
        record = Record.diagnose("fix", Facts(program=program, input_fixes=fixes))
        report(lambda: record)

    imports.when_imported("tensorflow", capture.install)
    try:
        outcome = run_and_report(script, script_args, code, report_ending)
    finally:
        capture.uninstall()
        imports.cancel(capture.install)
    return outcome, any(failed)


def _fix_facts(
    capture: Capture, options: FixOptions, cut_short: str | None
) -> tuple[InputFixFacts, bool]:
    """The section ``input_fixes`` for every dataset the script iterated, and whether
    gpuwhy itself failed on one (said on stderr as it happens). ``cut_short``: how the
    script ended when it was stopped (then a dataset not measured yet is not measured)."""
    main, views = capture.datasets()
    fixes = []
    failed = False
    for n, entry in enumerate(main, 1):
        name = f"dataset created at {entry.created_at}" if entry.created_at else f"dataset [{n}]"
        if entry.created_at and entry.called_at:  # one helper's line for every split
            name += f" (in the function called at {entry.called_at})"
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
            result = entry.result if entry.result is not None else _optimise(entry.dataset, options)
            fix = result.to_facts(name, entry.created_at, tuple(entry.iterated_at))
            fixes.append(dataclasses.replace(fix, iterators=entry.iterators))
        except Exception as e:
            if not _is_tf_error(e):
                if os.environ.get("GPUWHY_DEBUG"):
                    raise
                report_stream.say(
                    f"gpuwhy: error: internal error: {type(e).__name__}: {e} "
                    "(GPUWHY_DEBUG=1 shows the traceback)"
                )
                failed = True
            error = exception_line(e) if _is_tf_error(e) else f"{type(e).__name__}: {e}"
            fixes.append(dataclasses.replace(seen, error=error))
    facts = InputFixFacts(
        fixes=tuple(fixes),
        keep_order=options.keep_order,
        library_only=tuple(sorted(set(capture.library_only))),
        views=tuple(_view_text(view) for view in views),
        stopped_early=bool(options.stop_early and main),
    )
    return facts, failed


def _view_text(view: Captured) -> str:
    return f"created at {view.created_at or '?'}, iterated at {', '.join(view.iterated_at) or '?'}"


def _optimise(dataset: Any, options: FixOptions) -> Any:
    return optimize(
        dataset,
        keep_order=options.keep_order,
        cache="auto" if options.cache else False,
        measure=options.measure,
        elements=options.elements,
        repeats=options.repeats,
        assume_pure=options.assume_pure,
    )


def _is_tf_error(e: BaseException) -> bool:
    tf = sys.modules.get("tensorflow")
    return tf is not None and isinstance(e, tf.errors.OpError)
