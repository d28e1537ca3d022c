"""Command line: ``gpuwhy check | audit | run | watch | fix | rules | explain | report``.

Exit status: 0 when the answer is good (``check``: TF can use a GPU), 1 when gpuwhy
diagnosed a problem (``check``: it cannot), 2 when gpuwhy itself failed or was misused
(one line on stderr, never a traceback), 130 on Ctrl-C. ``run`` and ``watch`` exit with the
status of the program they watched.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from gpuwhy import __version__

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A one-line error for the user; exit status 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="gpuwhy",
        description="Why is my TensorFlow GPU idle? Diagnosis with evidence and fixes.",
    )
    parser.add_argument("--version", action="version", version=f"gpuwhy {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    check = sub.add_parser(
        "check",
        help="Is TensorFlow using my GPU? The environment doctor.",
        description="Imports TensorFlow in a child process, reads the driver "
        "through NVML, loads the CUDA libraries the build needs, and runs a "
        "real op on each GPU. Exit 0: TF can use a GPU; 1: it cannot; 2: error.",
    )
    check.add_argument(
        "--python",
        metavar="PATH",
        default=sys.executable,
        help="the interpreter whose TensorFlow to check (default: this one)",
    )
    check.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        metavar="S",
        help="seconds allowed for importing TensorFlow and touching the GPU (120)",
    )
    _output_options(check)

    audit = sub.add_parser(
        "audit",
        help="Why are my ops on the CPU? Placement audit of a saved model.",
        description="Predicts where TensorFlow places each op of a SavedModel's "
        "functions or a Keras model's forward pass on a machine with a GPU, using "
        "TF's own GPU kernel registry (works without a GPU), and lists the "
        "host<->device copies. Exit 1 when a high/medium finding is reported.",
    )
    audit.add_argument("path", metavar="PATH", help="a SavedModel directory or a .keras/.h5 file")
    audit.add_argument(
        "--verify",
        action="store_true",
        help="on a GPU machine, also run each signature once with TF's real placer "
        "and report where it disagrees (needs example inputs: signatures with fully "
        "known input shapes)",
    )
    _output_options(audit)

    run = sub.add_parser(
        "run",
        help="Why is my training slow on the GPU? Run a script and diagnose it.",
        description="Runs SCRIPT as `python SCRIPT ARGS...` would (same argv, __main__, working "
        "directory, output and exit status) and watches it: training steps and input wait, "
        "eager ops, tf.function traces, GPU activity through NVML, and the placement of the "
        "functions it ran. The report goes to stderr after the script's own output; the exit "
        "status is the script's.",
    )
    run.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    run.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (everything after SCRIPT)",
    )
    _watch_options(run)
    run.add_argument(
        "--no-audit",
        dest="audit",
        action="store_false",
        help="skip the placement audit of the tf.functions the script ran",
    )
    run.add_argument(
        "--no-eager",
        dest="eager",
        action="store_false",
        help="do not count eager ops (no per-op callback at all)",
    )
    run.add_argument(
        "--eager-duty",
        type=float,
        default=None,
        metavar="F",
        help="share of the run in which eager ops are counted (default 1/11, "
        "which keeps the cost under 5%%; 1 counts every op, ~20%% slower eager ops)",
    )
    _output_options(run)
    _html_option(run)

    watch = sub.add_parser(
        "watch",
        help="Is the GPU busy? Sample the GPU while any command runs.",
        description="Runs CMD (any program: PyTorch, JAX, a shell script) as a child, samples "
        "the GPUs through NVML while it runs, follows its processes' GPU memory, and reports "
        "the activity and the gpu./memory./env. findings. Exit status: CMD's.",
    )
    watch.add_argument(
        "cmd", nargs=argparse.REMAINDER, metavar="-- CMD ...", help="the command to run, after --"
    )
    _watch_options(watch)
    watch.add_argument(
        "--record", metavar="PATH", help="also write the raw NVML readings (JSON lines) to PATH"
    )
    _output_options(watch)

    rules = sub.add_parser("rules", help="list every finding id with its state")
    rules.add_argument("--format", choices=("terminal", "json"), default="terminal")

    explain = sub.add_parser("explain", help="print a finding's documentation")
    explain.add_argument("id", metavar="ID")
    explain.add_argument("--format", choices=("terminal", "json"), default="terminal")

    report = sub.add_parser("report", help="re-render a saved JSON report")
    report.add_argument("record", metavar="RUN.json")
    report.add_argument(
        "--recheck", action="store_true", help="run the current rules on the saved facts again"
    )
    _output_options(report)
    _html_option(report)

    from gpuwhy.fix.input_command import add_parser as add_fix_parser

    add_fix_parser(sub)
    return parser


def _output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="also write the JSON report (schema 1) to PATH")
    p.add_argument(
        "-f",
        "--format",
        default="terminal",
        help="stdout format: terminal (default), json, or module:Class",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="add tables and TF's log lines")


def _html_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="PATH",
        help="also write the HTML report to PATH: one file that opens offline, "
        "with the step timeline, GPU activity, input pipeline and placement charts",
    )


def _watch_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hz",
        type=float,
        default=10.0,
        metavar="N",
        help="GPU samples per second (10; GPM metrics are read at most at 10)",
    )
    p.add_argument(
        "-o", "--output", metavar="PATH", help="write the report to PATH instead of stderr"
    )


def main(argv: Sequence[str] | None = None) -> int:
    from gpuwhy.runner import ScriptInterrupted

    args = build_parser().parse_args(argv)
    try:
        return COMMANDS[args.command](args)
    except UsageError as e:
        _error(str(e))
        return EXIT_ERROR
    except ScriptInterrupted:
        # Let the interpreter finish as it does after an uncaught KeyboardInterrupt:
        # non-daemon threads joined, the script's atexit handlers run (TF's temporary
        # files removed), streams flushed, then death by SIGINT. The traceback was
        # already printed as the script's own.
        sys.excepthook = _quiet_excepthook
        raise KeyboardInterrupt from None
    except KeyboardInterrupt:
        _error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gpuwhy check | head`
        return EXIT_OK
    except Exception as e:
        if os.environ.get("GPUWHY_DEBUG"):
            raise
        _error(f"internal error: {type(e).__name__}: {e} (GPUWHY_DEBUG=1 shows the traceback)")
        return EXIT_ERROR


def _quiet_excepthook(exc_type, exc, tb) -> None:
    if not issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)


def _error(message: str) -> None:
    from gpuwhy import own_stderr

    own_stderr.say(f"gpuwhy: error: {message}")


def plan_outputs(args, *, inputs=(), project_dir=None, extra=()) -> dict:
    """Every output the command will write, checked now, before anything runs
    (gpuwhy.outputs): paths against the directory gpuwhy started in."""
    from gpuwhy.outputs import OutputPathError
    from gpuwhy.outputs import plan_outputs as plan

    named = [
        ("--json", getattr(args, "json", None)),
        ("-o", getattr(args, "output", None)),
        ("--html", getattr(args, "html", None)),
        *extra,
    ]
    try:
        return plan(named, inputs=inputs, project_dir=project_dir)
    except OutputPathError as e:
        raise UsageError(str(e)) from None


def _emit(record, args, outputs: dict, to_stderr: bool = False, optimizations=None) -> None:
    """Write --json, then the chosen format: on stdout, or for commands that run a
    program (whose stdout it owns) on gpuwhy's own stderr or in -o; then --html (after
    the text report, which a failure there must not cost). A planned file that cannot be
    written now is written to the temporary directory instead, and gpuwhy says where."""
    from gpuwhy import own_stderr
    from gpuwhy.outputs import write_or_divert
    from gpuwhy.report import MisconfigurationError, renderer_class

    if "--json" in outputs:
        write_or_divert(outputs["--json"], record.save, own_stderr.say)
    stream = own_stderr.stream() if to_stderr else sys.stdout
    try:
        renderer = renderer_class(args.format)(
            verbose=args.verbose,
            color="-o" not in outputs and (own_stderr.isatty() if to_stderr else stream.isatty()),
        )
    except MisconfigurationError as e:
        raise UsageError(str(e)) from None
    if "-o" in outputs:
        text = renderer.render(record)
        data = text if renderer.is_binary else text.encode("utf-8")
        write_or_divert(outputs["-o"], lambda path: Path(path).write_bytes(data), own_stderr.say)
    else:
        if renderer.is_binary and stream.isatty():
            raise UsageError(f"{renderer.name} output is binary; redirect it to a file")
        text = ("\n" if to_stderr else "") + renderer.render(record)
        if to_stderr:
            _write_quietly(stream, text)
        else:
            stream.write(text)
            stream.flush()
    if "--html" in outputs:
        from gpuwhy.report.html import write_html

        write_or_divert(
            outputs["--html"],
            lambda path: write_html(record, path, optimizations=optimizations),
            own_stderr.say,
        )


def _check_format(name: str) -> None:
    """A bad ``-f`` fails before a long run, not after it."""
    from gpuwhy.report import MisconfigurationError, renderer_class

    try:
        renderer_class(name)
    except MisconfigurationError as e:
        raise UsageError(str(e)) from None


def _write_quietly(stream, text: str) -> None:
    """The report on a stderr the program may have closed or broken: losing the terminal
    copy is not a failure of the run (the files were written first)."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def cmd_check(args) -> int:
    from gpuwhy.collect.environment import EnvironmentCollector
    from gpuwhy.record import RunRecord

    if not Path(args.python).exists():
        raise UsageError(f"no Python interpreter at {args.python}")
    if not (math.isfinite(args.timeout) and args.timeout > 0):
        raise UsageError("--timeout must be a positive number of seconds")
    outputs = plan_outputs(args, inputs=[args.python])
    facts = EnvironmentCollector(args.python, args.timeout).collect()
    record = RunRecord.diagnose("check", facts)
    _emit(record, args, outputs)
    return _exit_status(record)


def cmd_audit(args) -> int:
    os.environ.setdefault(
        "TF_CPP_MIN_LOG_LEVEL", "2"
    )  # our own process: keep TF's C++ banner quiet
    if not Path(args.path).exists():
        raise UsageError(f"{args.path}: no such file or directory")
    outputs = plan_outputs(
        args, inputs=[args.path], project_dir=args.path if os.path.isdir(args.path) else None
    )
    try:
        import tensorflow  # noqa: F401
    except ImportError as e:
        raise UsageError(
            f"TensorFlow is not importable here ({e}); `gpuwhy check` says why"
        ) from None
    from gpuwhy.auditor import AuditError, audit_path

    try:
        record = audit_path(args.path, verify=args.verify)
    except AuditError as e:
        raise UsageError(str(e)) from None
    _emit(record, args, outputs)
    return _exit_status(record)


def cmd_run(args) -> int:
    from gpuwhy import own_stderr
    from gpuwhy.runner import ScriptError, end_like_the_script, load_script, run_and_report
    from gpuwhy.watched_run import Session

    own_stderr.keep()
    _check_hz(args.hz)
    try:
        code = load_script(args.script)
    except ScriptError as e:
        raise UsageError(str(e)) from None
    if args.eager_duty is not None and not (0 < args.eager_duty <= 1):
        raise UsageError("--eager-duty must be a fraction in (0, 1]")
    outputs = plan_outputs(
        args, inputs=[args.script], project_dir=os.path.dirname(os.path.abspath(args.script))
    )
    _check_format(args.format)
    session = Session(
        hz=args.hz,
        audit=args.audit,
        eager=args.eager,
        command=[args.script, *args.args],
        eager_duty=args.eager_duty,
    )

    def report(ended: str, exit_code: int, error: str | None) -> None:
        """After the script: gpuwhy failing here is one line, and the exit status
        stays the script's (``gpuwhy run train.py && deploy`` must mean what it says)."""
        try:
            _emit(session.stop(ended, exit_code, error), args, outputs, to_stderr=True)
        except UsageError as e:
            _error(str(e))
        except Exception as e:
            if os.environ.get("GPUWHY_DEBUG"):
                raise
            _error(
                f"internal error while reporting: {type(e).__name__}: {e} "
                "(GPUWHY_DEBUG=1 shows the traceback)"
            )

    session.start()
    return end_like_the_script(run_and_report(args.script, args.args, code, report))


def cmd_watch(args) -> int:
    from gpuwhy.watcher import WatchError, watch

    _check_hz(args.hz)
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError(
            "nothing to watch: give the command after --, e.g. gpuwhy watch -- python train.py"
        )
    files, project_dir = _command_files(command)
    outputs = plan_outputs(
        args, inputs=files, project_dir=project_dir, extra=[("--record", args.record)]
    )
    record_path = outputs["--record"].path if "--record" in outputs else None
    _check_format(args.format)
    try:
        record, exit_code = watch(command, hz=args.hz, record_path=record_path)
    except WatchError as e:
        raise UsageError(str(e)) from None
    _emit(record, args, outputs, to_stderr=True)
    return exit_code


def _command_files(command: Sequence[str]) -> tuple[list[str], str | None]:
    """The files a watched command names (never to be overwritten by a report), and the
    directory of its script (the first ``.py``/``.sh`` file it names, or the program)."""
    files = [arg for arg in command if os.path.isfile(arg)]
    scripts = [f for f in files if f.endswith((".py", ".sh"))] or [
        f for f in files[:1] if not os.path.isabs(f)
    ]
    return files, os.path.dirname(os.path.abspath(scripts[0])) if scripts else None


def _check_hz(hz: float) -> None:
    if not (math.isfinite(hz) and 0 < hz <= 100):
        raise UsageError("--hz must be between 0 and 100 samples per second")


def _exit_status(record) -> int:
    """check: 0 when TF can use a GPU. Other records: 1 when a high/medium finding exists."""
    from gpuwhy.verdict import gpu_usable

    if record.command == "check":
        return EXIT_OK if gpu_usable(record.facts) else EXIT_PROBLEM
    return (
        EXIT_PROBLEM if any(f.severity in ("high", "medium") for f in record.findings) else EXIT_OK
    )


def cmd_report(args) -> int:
    from gpuwhy.record import RecordError, RunRecord

    try:
        record = RunRecord.load(args.record)
    except RecordError as e:
        raise UsageError(str(e)) from None
    outputs = plan_outputs(args, inputs=[args.record])
    if args.recheck:
        record = record.recheck()
    optimizations = None
    if args.html:
        from gpuwhy.report.html import load_optimizations

        optimizations = load_optimizations(args.record)
    _emit(record, args, outputs, optimizations=optimizations)
    return _exit_status(record)


def cmd_rules(args) -> int:
    from gpuwhy.rules import ALL_RULES

    rows = [
        {
            "id": r.id,
            "status": r.status,
            "severity": r.severity,
            "question": r.question,
            "summary": r.summary(),
            "needs": list(r.needs),
        }
        for r in ALL_RULES
    ]
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
        print(
            json.dumps(
                {
                    "id": rule.id,
                    "status": rule.status,
                    "severity": rule.severity,
                    "since": rule.since,
                    "needs": list(rule.needs),
                    "options": rule.options,
                    "doc": rule.doc(),
                },
                indent=2,
            )
        )
        return EXIT_OK
    from rich.console import Console
    from rich.markdown import Markdown

    console = Console(soft_wrap=not sys.stdout.isatty())
    console.print(
        f"{rule.id}  (status: {rule.status}, default severity: {rule.severity}, "
        f"since {rule.since})",
        style="bold",
        highlight=False,
    )
    if sys.stdout.isatty():
        console.print(Markdown(rule.doc()))
    else:
        print(rule.doc())
    return EXIT_OK


def cmd_fix(args) -> int:
    """``gpuwhy fix --input SCRIPT``: exits 0 whatever the script's own status, unless
    gpuwhy itself failed (a usage error: 2)."""
    from gpuwhy.fix.input_command import FixUsageError
    from gpuwhy.fix.input_command import run as run_fix

    try:
        return run_fix(args)
    except FixUsageError as e:
        raise UsageError(str(e)) from None


COMMANDS = {
    "check": cmd_check,
    "audit": cmd_audit,
    "run": cmd_run,
    "watch": cmd_watch,
    "fix": cmd_fix,
    "report": cmd_report,
    "rules": cmd_rules,
    "explain": cmd_explain,
}

if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
