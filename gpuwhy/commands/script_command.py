"""What the commands that run the user's script (``run``, ``fix``) share: the SCRIPT ARGS
arguments, loading the script and planning the outputs beside it before anything runs, and
reporting after it without changing its exit status."""

from __future__ import annotations

import argparse
import os
import types
from collections.abc import Callable

import gpuwhy.own_stderr as own_stderr
from gpuwhy.collect.inprocess.task import task_facts
from gpuwhy.commands.output_paths import Output, write_task_record
from gpuwhy.commands.reporting import (
    UsageError,
    check_format,
    emit,
    plan_outputs,
    say_error,
)
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


def prepare(args: argparse.Namespace) -> tuple[types.CodeType, dict[str, Output]]:
    """The script compiled and its outputs planned (never over the script or a file of
    the user's beside it), with a bad ``-f`` refused: all before the script runs."""

    try:
        code = load_script(args.script)
    except ScriptError as e:
        raise UsageError(str(e)) from None
    outputs = plan_outputs(
        args, inputs=[args.script], project_dir=os.path.dirname(os.path.abspath(args.script))
    )

    check_format(args.format, to_terminal="-o" not in outputs and own_stderr.isatty())
    return code, outputs


def report_after_script(
    make_record: Callable[[], Record], args: argparse.Namespace, outputs: dict[str, Output]
) -> None:
    """The report, after the script: gpuwhy failing here is one line, and the exit status
    stays the script's (``gpuwhy run train.py && deploy`` must mean what it says)."""
    try:
        record = make_record()
        save_for_merge(record, args)
        emit(record, args, outputs, to_stderr=True)
        gate = getattr(args, "gate", None)
        if gate:
            args.gate_crossed = crossed_by_findings(gate, record.findings)
            for line in args.gate_crossed:
                own_stderr.say(f"gpuwhy: gate: {line}")
    except UsageError as e:
        say_error(str(e))
    except Exception as e:
        if os.environ.get("GPUWHY_DEBUG"):
            raise
        say_error(
            f"internal error while reporting: {type(e).__name__}: {e} "
            "(GPUWHY_DEBUG=1 shows the traceback)"
        )


def save_for_merge(record: Record, args: argparse.Namespace) -> None:
    """``--out-dir DIR``: the record as DIR/<task>.json, before any other report (it is
    what the cluster's merge waits for). Never raises, never changes the exit status."""
    directory = getattr(args, "out_dir", None)
    if not directory:
        return

    task = record.facts.task
    if task is not None:
        name = task.name
    else:
        name = task_facts().name
    write_task_record(
        record.to_json() + "\n",
        directory,
        getattr(args, "out_dir_given", None) or directory,
        name,
        own_stderr.say,
    )
