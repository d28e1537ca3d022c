"""``%gpuwhy`` and ``%%gpuwhy``: one IPython magic, a line and a cell form.

A notebook's process outlives the cell: TensorFlow was imported and the model compiled in
earlier cells, the same cell runs again, a cell is interrupted. So the cell is watched by
a Session started when the cell starts and stopped when it ends, however it ends (every
hook it installed undone: the next cell runs as it would without gpuwhy); the report is
shown before an exception of the cell propagates, and the cell's own output and value
are the cell's, as without the magic.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from IPython.core.error import UsageError
from IPython.core.magic import Magics, line_cell_magic, magics_class

import gpuwhy.notebook.options as options
from gpuwhy.commands.output_paths import Output
from gpuwhy.commands.report import load_record
from gpuwhy.commands.reporting import UsageError as CommandUsageError
from gpuwhy.commands.reporting import plan_outputs
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.modes.check import check
from gpuwhy.modes.run.session import Session
from gpuwhy.notebook.cell import cell_number, run_cell_code
from gpuwhy.notebook.display import say, show, write_outputs
from gpuwhy.notebook.interrupts import interrupts_held
from gpuwhy.record import Record
from gpuwhy.tfapi.memory import tf_gpus


@magics_class
class GpuwhyMagics(Magics):
    @property
    def _shell(self) -> Any:
        assert self.shell is not None, "registered on a shell"
        return self.shell

    @line_cell_magic
    def gpuwhy(self, line: str, cell: str | None = None) -> Any:
        """%%gpuwhy [options]: watch this cell as `gpuwhy run` watches a script, and show
        why the GPU sat idle (-r NAME keeps the record; %%gpuwhy -h lists the options).
        %gpuwhy check: is TensorFlow using my GPU?
        %gpuwhy report PATH|NAME: a saved record, NVML recording, XProf capture, or the
        Record in variable NAME, inline."""
        __tracebackhide__ = True  # the user's traceback starts in their cell
        if cell is not None:
            return self._watch(line, cell)
        words = options.split(line)
        if words[:1] == ["check"]:
            self._check(words[1:])
        elif words[:1] == ["report"]:
            self._report(words[1:])
        else:
            raise UsageError(_line_usage(words))
        return None

    def _watch(self, line: str, cell: str) -> Any:
        __tracebackhide__ = True
        settings = options.parse_cell(line)
        if settings is None:
            return None
        outputs = _planned(settings.report)
        session = Session(
            command=[f"In[{cell_number(self._shell, cell)}]"], **dict(settings.collector_options)
        )
        started, ended_by = False, None
        try:
            with interrupts_held():  # a Ctrl-C now comes once every hook is in
                session.start()
                started = True
            return run_cell_code(self._shell, cell)
        except BaseException as e:
            ended_by = e  # recorded as the program's end, and re-raised
            raise
        finally:
            if started:
                with interrupts_held():  # ... or out
                    session.__exit__(type(ended_by) if ended_by else None, ended_by, None)
                self._finish(session.record, settings, outputs)

    def _finish(
        self, record: Record | None, settings: options.CellSettings, outputs: dict[str, Output]
    ) -> None:
        """Keep, write and show the record. Never raises: the cell's own exception, if
        any, is the one the user sees."""
        if record is None:
            return
        if settings.record_name is not None:
            self._shell.user_ns[settings.record_name] = record
        try:
            write_outputs(record, settings.report, outputs)
            show(record, self._shell, settings.report.verbose, page=settings.html)
        except Exception as e:  # noqa: BLE001 - a report that fails must not hide the cell's result
            say(f"gpuwhy: the report could not be shown: {type(e).__name__}: {e}")

    def _check(self, words: list[str]) -> None:
        words, page = _without_text(words)
        settings = options.parse_check(words)
        if settings is None:
            return
        outputs = _planned(settings.report, inputs=[settings.python])
        held = tf_gpus()  # no import, no side effect: () unless this kernel's TF started
        if held:
            say(
                f"gpuwhy: TensorFlow in this kernel already uses {', '.join(held)}; the check runs its "
                "own TensorFlow in a child, which may find little of their memory free"
            )
        record = check(settings.python, settings.timeout)
        write_outputs(record, settings.report, outputs)
        show(record, self._shell, settings.report.verbose, page)

    def _report(self, words: list[str]) -> None:
        words, page = _without_text(words)
        settings = options.parse_report(words)
        if settings is None:
            return
        record = self._held_record(settings.record)
        try:
            if record is None:
                record = load_record(settings)
            elif settings.recheck:
                record = record.recheck()
        except CommandUsageError as e:
            raise UsageError(str(e)) from None
        outputs = _planned(settings.report, inputs=[settings.record])
        write_outputs(record, settings.report, outputs)
        show(record, self._shell, settings.report.verbose, page)

    def _held_record(self, name: str) -> Record | None:
        """``%gpuwhy report rec``: the Record a variable holds (``%%gpuwhy -r rec``, or
        ``gpuwhy.load``), where no file has that name."""
        if not name.isidentifier() or os.path.exists(name):
            return None
        held = self._shell.user_ns.get(name)
        return held if isinstance(held, Record) else None


def _line_usage(words: list[str]) -> str:
    said = f"unknown subcommand {words[0]!r}; " if words else ""
    return f"{said}usage: {options.LINE_USAGE}"


def _planned(report: ReportSettings, inputs: Sequence[str] = ()) -> dict[str, Output]:
    """The files asked for, checked before anything runs (a usage error)."""
    try:
        return plan_outputs(report, inputs=inputs)
    except CommandUsageError as e:
        raise UsageError(str(e)) from None


def _without_text(words: list[str]) -> tuple[list[str], bool]:
    """``--text`` taken out of a line magic's words (the terminal report only, as
    ``%%gpuwhy --text``: no HTML page saved in the notebook); whether the page is shown."""
    return [w for w in words if w != "--text"], "--text" not in words
