"""``gpuwhy diff BEFORE.json AFTER.json`` (or several records a side: ``gpuwhy diff
[options] base/*.json -- head/*.json``): did the change make it faster? The comparison is
gpuwhy/comparison/'s; this is the command around it: its options, its sides (files,
directories, globs), its outputs (never over a record), the CI gate (``--fail-on``),
which decides the exit status, and ``--calibrate``."""

from __future__ import annotations

import argparse
import functools
import glob
import os
import sys
from dataclasses import dataclass

import gpuwhy.report_stream as report_stream
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
from gpuwhy.comparison import Comparison, compare_runs
from gpuwhy.comparison.calibration import calibrate, read_noise
from gpuwhy.comparison.gate import (
    blind,
    crossed_by_comparison,
    crossed_by_findings,
    near_threshold,
    not_judged,
)
from gpuwhy.comparison.sides import majority_findings
from gpuwhy.finding import Finding
from gpuwhy.modes.diff import read
from gpuwhy.record import RecordError
from gpuwhy.report.diff.calibration import calibration_json, render_calibration
from gpuwhy.report.diff.html import write_comparison_html
from gpuwhy.report.diff.json_ import comparison_json
from gpuwhy.report.diff.terminal import render_comparison

HELP = (
    "did it get faster? compare records (run, watch, merge), one or several a side, with a CI gate"
)
FORMATS = ("terminal", "json", "html")


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Compares two records written with --json: the step time with its 95%% interval "
        "from both runs' spread (no measurable difference is a verdict too), where the "
        "time went part by part, the findings that appeared, disappeared or changed "
        "severity, and what else differed (versions, GPU, batch, precision, XLA). Exit "
        "status 1 when a --fail-on condition is crossed, 0 otherwise."
    )
    parser.usage = (
        "gpuwhy diff [options] BEFORE.json AFTER.json\n"
        "       gpuwhy diff [options] BEFORE... -- AFTER...\n"
        "       gpuwhy diff --calibrate [options] RUNS..."
    )
    parser.add_argument(
        "records",
        nargs="+",
        metavar="RECORD",
        help="a record (--json of run, watch or merge), a directory of them or a quoted "
        "glob; several a side: options first, then BEFORE's records, --, AFTER's",
    )
    parser.add_argument(
        "--calibrate",
        action="store_true",
        help="from unchanged runs alone (3 or more records of one program): how large a "
        "change the gate can call on this machine with N runs a side, and the --fail-on "
        "step:+N%% to use",
    )
    parser.add_argument(
        "--noise",
        metavar="CALIBRATION.json",
        help="judge the step time against how runs of this program differ, as a "
        "calibration (--calibrate -f json) measured it: pooled with the runs' own spread, "
        "and an interval that sees between runs for one run a side too",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=3,
        metavar="N",
        help="--calibrate: the runs a side the gate will compare (default 3)",
    )
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
    before: tuple[str, ...]  # BEFORE's records (all of them with --calibrate)
    after: tuple[str, ...]
    gate: Gate
    report: ReportSettings
    calibrate: bool = False
    runs: int = 3
    noise: str | None = None


def settings_from(args: argparse.Namespace) -> DiffSettings:
    """The command line read once: the sides split at ``--`` and expanded, the gate's
    conditions checked (each a usage error)."""
    gate = gate_settings(args, findings_only=False)
    given = args.argv
    records = list(args.records)
    split = "--" in given if given is not None else False
    if args.calibrate:
        if split:
            raise UsageError("--calibrate takes unchanged runs of one program: no -- between sides")
        if args.runs < 2:
            raise UsageError(f"--runs {args.runs}: at least 2 runs a side")
        if gate.conditions:
            raise UsageError("--calibrate says which --fail-on to use: it takes none itself")
        if args.format == "html" or args.html:
            raise UsageError("--calibrate writes terminal text or JSON, not HTML")
        if args.noise:
            raise UsageError("--calibrate measures the noise: it takes no --noise")
        return DiffSettings(
            before=expand(records),
            after=(),
            gate=gate,
            report=report_settings(args),
            calibrate=True,
            runs=args.runs,
        )
    if split:
        assert given is not None
        after_count = len(given) - given.index("--") - 1
        before, after = records[: len(records) - after_count], records[len(records) - after_count :]
        if not before or not after:
            raise UsageError(
                "several records a side: gpuwhy diff [options] BEFORE... -- AFTER... "
                f"(got {'no BEFORE' if not before else 'no AFTER'} records)"
            )
    elif len(records) == 2:
        before, after = records[:1], records[1:]
    else:
        raise UsageError(
            f"{len(records)} records given: compare two (BEFORE.json AFTER.json), or "
            "several a side with -- between them: gpuwhy diff [options] base/*.json -- "
            "head/*.json"
        )
    return DiffSettings(
        before=expand(before),
        after=expand(after),
        gate=gate,
        report=report_settings(args),
        noise=args.noise,
    )


def expand(entries: list[str]) -> tuple[str, ...]:
    """Each entry as the records it names: a file as it is, a directory as its *.json,
    a pattern (quoted, so that the shell left it) as the files it matches, in order."""
    out: list[str] = []
    for entry in entries:
        if os.path.isdir(entry):
            found = sorted(glob.glob(os.path.join(glob.escape(entry), "*.json")))
            if not found:
                raise UsageError(f"{entry}: a directory with no *.json records")
            out += found
        elif not os.path.exists(entry) and glob.has_magic(entry):
            found = sorted(p for p in glob.glob(entry) if os.path.isfile(p))
            if not found:
                raise UsageError(f"{entry}: no record matches this pattern")
            out += found
        else:
            out.append(entry)
    return tuple(out)


def execute(settings: DiffSettings) -> int:
    if settings.calibrate:
        return _calibrate(settings)
    report = settings.report
    outputs = plan_outputs(report, inputs=[*settings.before, *settings.after])
    if report.format == "html" and "-o" not in outputs:
        check_format("html", to_terminal=sys.stdout.isatty())
    try:
        before = [read(path) for path in settings.before]
        after = [read(path) for path in settings.after]
        noise = read_noise(settings.noise) if settings.noise else None
    except (RecordError, ValueError) as e:
        raise UsageError(str(e)) from None
    comparison = compare_runs(
        [r for r, _ in before],
        [r for r, _ in after],
        names=([n for _, n in before], [n for _, n in after]),
        noise=noise,
    )
    # the gate's finding conditions read AFTER's findings: those most of its runs have
    after_findings = majority_findings([r for r, _ in after])
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
    return _gate(settings.gate, comparison, after_findings)


def _calibrate(settings: DiffSettings) -> int:
    """``--calibrate``: the noise of unchanged runs, and the gate it allows."""
    report = settings.report
    outputs = plan_outputs(report, inputs=list(settings.before))
    try:
        runs = [read(path) for path in settings.before]
    except RecordError as e:
        raise UsageError(str(e)) from None
    try:
        result = calibrate([r for r, _ in runs], [n for _, n in runs], settings.runs)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if "--json" in outputs:
        _write(outputs["--json"], calibration_json(result))
    text = (
        calibration_json(result)
        if report.format == "json"
        else render_calibration(result, color="-o" not in outputs and sys.stdout.isatty())
    )
    if "-o" in outputs:
        _write(outputs["-o"], text)
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return EXIT_OK


def _gate(gate: Gate, comparison: Comparison, after: list[Finding]) -> int:
    conditions = list(gate.conditions)
    noted = not_judged(conditions, comparison) + blind(conditions, comparison)
    for line in noted + near_threshold(conditions, comparison):
        report_stream.say(f"gpuwhy: gate: {line}")
    crossed = crossed_by_comparison(conditions, comparison) + crossed_by_findings(conditions, after)
    for line in crossed:
        report_stream.say(f"gpuwhy: gate: {line}")
    return EXIT_PROBLEM if crossed else EXIT_OK


def _write(output: Output, text: str) -> None:
    write_or_divert(output, lambda path: _write_text(path, text), report_stream.say)


def _write_html(comparison: Comparison, output: Output | None) -> None:
    """The page into its file, or onto stdout where that is not a terminal (refused
    before the records were read)."""
    if output is None:
        sys.stdout.flush()
        write_comparison_html(comparison, sys.stdout.buffer)
        sys.stdout.buffer.flush()
        return
    page = functools.partial(write_comparison_html, comparison)
    write_or_divert(output, lambda path: write_file(path, page), report_stream.say)


def _write_text(path: str, text: str) -> None:
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
