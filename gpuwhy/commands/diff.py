"""``gpuwhy diff BEFORE.json AFTER.json``: did the change make it faster? The comparison
is gpuwhy/comparison/'s; this is the command around it: its options, its outputs (never
over either record), and the CI gate (``--fail-on``), which decides the exit status."""

from __future__ import annotations

import argparse
import functools
import sys
from dataclasses import dataclass

import gpuwhy.own_stderr as own_stderr
from gpuwhy.commands.options import gate_options, gate_settings, report_settings
from gpuwhy.commands.output_paths import Output, write_or_divert
from gpuwhy.commands.reporting import (
    EXIT_OK,
    EXIT_PROBLEM,
    UsageError,
    check_format,
    plan_outputs,
    write_file,
)
from gpuwhy.commands.settings import Gate, ReportSettings
from gpuwhy.comparison import Comparison, compare
from gpuwhy.comparison.gate import crossed_by_comparison, crossed_by_findings, not_judged
from gpuwhy.modes.diff import read
from gpuwhy.record import Record, RecordError
from gpuwhy.report.diff.html import write_comparison_html
from gpuwhy.report.diff.json_ import comparison_json
from gpuwhy.report.diff.terminal import render_comparison

HELP = "did it get faster? compare two records (run, watch, merge), with a CI gate"
FORMATS = ("terminal", "json", "html")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compares two records written with --json: the step time with its 95%% interval "
        "from both runs' spread (no measurable difference is a verdict too), where the "
        "time went part by part, the findings that appeared, disappeared or changed "
        "severity, and what else differed (versions, GPU, batch, precision, XLA). Exit "
        "status 1 when a --fail-on condition is crossed, 0 otherwise."
    )
    parser.add_argument("before", metavar="BEFORE.json")
    parser.add_argument("after", metavar="AFTER.json")
    gate_options(parser, findings_only=False)
    parser.add_argument("--json", metavar="PATH", help="also write the comparison as JSON")
    parser.add_argument(
        "--html",
        metavar="PATH",
        help="also write the comparison as HTML to PATH: one file that opens offline, with "
        "the two runs' timelines on one axis",
    )
    parser.add_argument(
        "-f",
        "--format",
        choices=FORMATS,
        default="terminal",
        help="terminal (default), json or html (html: to -o PATH or a pipe)",
    )
    parser.add_argument("-o", "--output", metavar="PATH", help="write the report to PATH")


@dataclass(frozen=True)
class DiffSettings:
    before: str
    after: str
    gate: Gate
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> DiffSettings:
    """The command line read once, the gate's conditions checked (a usage error)."""
    return DiffSettings(
        before=args.before,
        after=args.after,
        gate=gate_settings(args, findings_only=False),
        report=report_settings(args),
    )


def execute(settings: DiffSettings) -> int:
    report = settings.report
    outputs = plan_outputs(report, inputs=[settings.before, settings.after])
    if report.format == "html" and "-o" not in outputs:
        check_format("html", to_terminal=sys.stdout.isatty())
    try:
        (before, before_name), (after, after_name) = read(settings.before), read(settings.after)
    except RecordError as e:
        raise UsageError(str(e)) from None
    comparison = compare(before, after, names=(before_name, after_name))
    if "--json" in outputs:
        _write(outputs["--json"], comparison_json(comparison))
    color = "-o" not in outputs and sys.stdout.isatty()
    if report.format == "html":
        _write_html(comparison, outputs.get("-o"))
    else:
        text = (
            comparison_json(comparison)
            if report.format == "json"
            else render_comparison(comparison, color=color)
        )
        if "-o" in outputs:
            _write(outputs["-o"], text)
        else:
            sys.stdout.write(text)
            sys.stdout.flush()
    if "--html" in outputs:
        _write_html(comparison, outputs["--html"])
    return _gate(settings.gate, comparison, after)


def _gate(gate: Gate, comparison: Comparison, after: Record) -> int:
    conditions = list(gate.conditions)
    for line in not_judged(conditions, comparison):
        own_stderr.say(f"gpuwhy: gate: {line}")
    crossed = crossed_by_comparison(conditions, comparison) + crossed_by_findings(
        conditions, after.findings
    )
    for line in crossed:
        own_stderr.say(f"gpuwhy: gate: {line}")
    return EXIT_PROBLEM if crossed else EXIT_OK


def _write(output: Output, text: str) -> None:
    write_or_divert(output, lambda path: _write_text(path, text), own_stderr.say)


def _write_html(comparison: Comparison, output: Output | None) -> None:
    """The page into its file, or onto stdout where that is not a terminal (refused
    before the records were read)."""
    if output is None:
        sys.stdout.flush()
        write_comparison_html(comparison, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    page = functools.partial(write_comparison_html, comparison)
    write_or_divert(output, lambda path: write_file(path, page), own_stderr.say)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
