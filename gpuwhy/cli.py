"""Command line: ``gpuwhy check | audit | rules | explain | report``.

Exit status: 0 when the answer is good (``check``: TF can use a GPU), 1 when gpuwhy
diagnosed a problem (``check``: it cannot), 2 when gpuwhy itself failed or was misused
(one line on stderr, never a traceback), 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Optional, Sequence

from gpuwhy import __version__

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A one-line error for the user; exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuwhy", description="Why is my TensorFlow GPU idle? Diagnosis with evidence and fixes.")
    parser.add_argument("--version", action="version", version=f"gpuwhy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser("check", help="Is TensorFlow using my GPU? The environment doctor.",
                           description="Imports TensorFlow in a child process, reads the driver "
                           "through NVML, loads the CUDA libraries the build needs, and runs a "
                           "real op on each GPU. Exit 0: TF can use a GPU; 1: it cannot; 2: error.")
    check.add_argument("--python", metavar="PATH", default=sys.executable,
                       help="the interpreter whose TensorFlow to check (default: this one)")
    check.add_argument("--timeout", type=float, default=120.0, metavar="S",
                       help="seconds allowed for importing TensorFlow and touching the GPU (120)")
    _output_options(check)

    audit = sub.add_parser("audit", help="Why are my ops on the CPU? Placement audit of a saved model.",
                           description="Predicts where TensorFlow places each op of a SavedModel's "
                           "functions or a Keras model's forward pass on a machine with a GPU, using "
                           "TF's own GPU kernel registry (works without a GPU), and lists the "
                           "host<->device copies. Exit 1 when a high/medium finding is reported.")
    audit.add_argument("path", metavar="PATH", help="a SavedModel directory or a .keras/.h5 file")
    audit.add_argument("--verify", action="store_true",
                       help="on a GPU machine, also run each signature once with TF's real placer "
                       "and report where it disagrees (needs example inputs: signatures with fully "
                       "known input shapes)")
    _output_options(audit)

    rules = sub.add_parser("rules", help="list every finding id with its state")
    rules.add_argument("--format", choices=("terminal", "json"), default="terminal")

    explain = sub.add_parser("explain", help="print a finding's documentation")
    explain.add_argument("id", metavar="ID")
    explain.add_argument("--format", choices=("terminal", "json"), default="terminal")

    report = sub.add_parser("report", help="re-render a saved JSON report")
    report.add_argument("record", metavar="RUN.json")
    report.add_argument("--recheck", action="store_true",
                        help="run the current rules on the saved facts again")
    _output_options(report)
    return parser


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="also write the JSON report (schema 1) to PATH")
    p.add_argument("-f", "--format", default="terminal",
                   help="stdout format: terminal (default), json, or module:Class")
    p.add_argument("-v", "--verbose", action="store_true", help="add tables and TF's log lines")


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as e:
        _error(str(e))
        return EXIT_ERROR
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gpuwhy check | head`
        return EXIT_OK
    except Exception as e:  # noqa: BLE001 - gpuwhy's own failure: one line, exit 2
        if os.environ.get("GPUWHY_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e} (GPUWHY_DEBUG=1 shows the traceback)")
        return EXIT_ERROR


def _error(message: str) -> None:
    print(f"gpuwhy: error: {message}", file=sys.stderr)


def _emit(record, args) -> None:
    """Write --json, then print the chosen format on stdout."""
    from gpuwhy.report import MisconfigurationError, renderer_class
    if args.json:
        try:
            record.save(args.json)
        except OSError as e:
            raise UsageError(f"cannot write {args.json}: {e.strerror or e}") from None
    try:
        renderer = renderer_class(args.format)(
            verbose=args.verbose, color=sys.stdout.isatty())
    except MisconfigurationError as e:
        raise UsageError(str(e)) from None
    if renderer.is_binary and sys.stdout.isatty():
        raise UsageError(f"{renderer.name} output is binary; redirect stdout to a file")
    sys.stdout.write(renderer.render(record))
    sys.stdout.flush()


def cmd_check(args) -> int:
    from gpuwhy.collect.environment import EnvironmentCollector
    from gpuwhy.record import RunRecord
    if not Path(args.python).exists():
        raise UsageError(f"no Python interpreter at {args.python}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError("--timeout must be a positive number of seconds")
    facts = EnvironmentCollector(args.python, args.timeout).collect()
    record = RunRecord.diagnose("check", facts)
    _emit(record, args)
    return _exit_status(record)


def cmd_audit(args) -> int:
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")  # our own process: keep TF's C++ banner quiet
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file or directory")
    try:
        import tensorflow  # noqa: F401
    except ImportError as e:
        raise UsageError(f"TensorFlow is not importable here ({e}); `gpuwhy check` says why") from None
    from gpuwhy.auditor import AuditError, audit_path
    try:
        record = audit_path(args.path, verify=args.verify)
    except AuditError as e:
        raise UsageError(str(e)) from None
    _emit(record, args)
    return _exit_status(record)


def _exit_status(record) -> int:
    """check: 0 when TF can use a GPU. Other records: 1 when a high/medium finding exists."""
    from gpuwhy.verdict import gpu_usable
    if record.command == "check":
        return EXIT_OK if gpu_usable(record.facts) else EXIT_PROBLEM
    return EXIT_PROBLEM if any(f.severity in ("high", "medium") for f in record.findings) else EXIT_OK


def cmd_report(args) -> int:
    from gpuwhy.record import RecordError, RunRecord
    try:
        record = RunRecord.load(args.record)
    except RecordError as e:
        raise UsageError(str(e)) from None
    if args.recheck:
        record = record.recheck()
    _emit(record, args)
    return _exit_status(record)


def cmd_rules(args) -> int:
    from gpuwhy.rules import ALL_RULES
    rows = [{"id": r.id, "status": r.status, "severity": r.severity, "question": r.question,
             "summary": r.summary(), "needs": list(r.needs)} for r in ALL_RULES]
    if args.format == "json":
        print(json.dumps(rows, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.table import Table
    table = Table(show_edge=False, box=None, pad_edge=False)
    for column in ("id", "state", "severity", "question it answers"):
        table.add_column(column, no_wrap=column == "id")
    for row in rows:
        table.add_row(row["id"], row["status"], row["severity"], row["question"])
    Console(width=None if sys.stdout.isatty() else 160).print(table)
    return EXIT_OK


def cmd_explain(args) -> int:
    from gpuwhy.rules import UnknownRuleError, get_rule
    try:
        rule = get_rule(args.id)
    except UnknownRuleError as e:
        raise UsageError(str(e)) from None
    if args.format == "json":
        print(json.dumps({"id": rule.id, "status": rule.status, "severity": rule.severity,
                          "since": rule.since, "needs": list(rule.needs),
                          "options": rule.options, "doc": rule.doc()}, indent=2))
        return EXIT_OK
    from rich.console import Console
    from rich.markdown import Markdown
    console = Console(soft_wrap=not sys.stdout.isatty())
    console.print(f"{rule.id}  (status: {rule.status}, default severity: {rule.severity}, "
                  f"since {rule.since})", style="bold", highlight=False)
    if sys.stdout.isatty():
        console.print(Markdown(rule.doc()))
    else:
        print(rule.doc())
    return EXIT_OK


COMMANDS = {"check": cmd_check, "audit": cmd_audit, "report": cmd_report, "rules": cmd_rules, "explain": cmd_explain}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
