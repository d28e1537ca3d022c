"""What the commands that run the user's script (``run``, ``fix``) share: the SCRIPT ARGS
arguments, loading the script and planning the outputs beside it before anything runs, and
reporting after it without changing its exit status."""

from __future__ import annotations

import argparse
import os
import types
from collections.abc import Callable

import gpuwhy.report_stream as report_stream
from gpuwhy.collect.inprocess.task import task_facts
from gpuwhy.commands.output_paths import Output, write_task_record
from gpuwhy.commands.reporting import (
    UsageError,
    check_format,
    emit,
    plan_outputs,
    say_error,
    say_note,
)
from gpuwhy.commands.settings import Gate, OutDir, ReportSettings, ScriptSettings
from gpuwhy.comparison.gate import crossed_by_findings
from gpuwhy.modes.run.script import ScriptError, load_script
from gpuwhy.record import Record


def script_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (everything after SCRIPT)",
    )
    parser.set_defaults(command_parser=parser)


def script_settings(args: argparse.Namespace) -> ScriptSettings:
    """SCRIPT and its ARGS, as :func:`script_arguments` declared them; gpuwhy's own options
    written after SCRIPT (``gpuwhy fix train.py --patch fix.diff``) are the script's, as
    Python's own ``python -m`` has it, and a note says so: the script may take an option
    of that name, so it is never an error."""
    own = _own_options(args.command_parser)
    # long options only: a script's -v or -o is its own far more often than gpuwhy's
    misplaced = [a for a in args.args if a.startswith("--") and a.split("=", 1)[0] in own]
    if misplaced:
        say_note(
            f"{', '.join(misplaced)} after SCRIPT {'is' if len(misplaced) == 1 else 'are'} "
            "passed to the script, not to gpuwhy: gpuwhy's options go before SCRIPT"
        )
    return ScriptSettings(path=args.script, args=tuple(args.args))


def _own_options(parser: argparse.ArgumentParser) -> set[str]:
    """The command's option strings, help left out (``--help`` after SCRIPT is the
    script's). argparse lists them only in its private ``_actions``."""
    actions = parser._actions  # no public listing of a parser's options
    return {s for a in actions if not isinstance(a, argparse._HelpAction) for s in a.option_strings}


def prepare(
    script: ScriptSettings, report: ReportSettings
) -> tuple[types.CodeType, dict[str, Output]]:
    """The script compiled and its outputs planned (never over the script or a file of
    the user's beside it), with a bad ``-f`` refused: all before the script runs."""

    try:
        code = load_script(script.path)
    except ScriptError as e:
        raise UsageError(str(e)) from None
    outputs = plan_outputs(
        report, inputs=[script.path], project_dir=os.path.dirname(os.path.abspath(script.path))
    )

    check_format(report.format, to_terminal="-o" not in outputs and report_stream.isatty())
    return code, outputs


def report_after_script(
    make_record: Callable[[], Record],
    report: ReportSettings,
    outputs: dict[str, Output],
    *,
    out_dir: OutDir | None = None,
    gate: Gate | None = None,
) -> list[str]:
    """The report, after the script: gpuwhy failing here is one line, and the exit status
    stays the script's (``gpuwhy run train.py && deploy`` must mean what it says).
    Returns the lines of the ``gate`` its record crossed (said on stderr too), for the
    caller to decide its exit status: none without a gate, or when reporting failed."""
    try:
        record = make_record()
        save_for_merge(record, out_dir)
        emit(record, report, outputs, to_stderr=True)
        crossed = (
            crossed_by_findings(list(gate.conditions), record.findings)
            if gate is not None and gate.conditions
            else []
        )
        for line in crossed:
            report_stream.say(f"gpuwhy: gate: {line}")
        return crossed
    except UsageError as e:
        say_error(str(e))
    except Exception as e:
        if os.environ.get("GPUWHY_DEBUG"):
            raise
        say_error(
            f"internal error while reporting: {type(e).__name__}: {e} "
            "(GPUWHY_DEBUG=1 shows the traceback)"
        )
    return []


def save_for_merge(record: Record, out_dir: OutDir | None) -> None:
    """``--out-dir DIR``: the record as DIR/<task>.json, before any other report (it is
    what the cluster's merge waits for). Never raises, never changes the exit status."""
    if out_dir is None:
        return

    task = record.facts.task
    if task is not None:
        name = task.name
    else:
        name = task_facts().name
    write_task_record(record.to_json() + "\n", out_dir.path, out_dir.given, name, report_stream.say)
