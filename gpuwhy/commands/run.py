"""``gpuwhy run SCRIPT``: run a training script as ``python SCRIPT`` would, watched by a
Session (gpuwhy.run_session), and report why its GPU sat idle."""

from __future__ import annotations

import argparse
import os

from gpuwhy.commands.options import html_option, output_options, sampling_options
from gpuwhy.commands.outcome import (
    UsageError,
    check_format,
    check_hz,
    plan_outputs,
    report_after_script,
)

HELP = "Why is my training slow on the GPU? Run a script and diagnose it."


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Runs SCRIPT as `python SCRIPT ARGS...` would (same argv, __main__, working "
        "directory, output and exit status) and watches it: training steps and input wait, "
        "eager ops, tf.function traces, GPU activity through NVML, and the placement of the "
        "functions it ran. The report goes to stderr after the script's own output; the exit "
        "status is the script's."
    )
    parser.add_argument("script", metavar="SCRIPT", help="the Python script to run")
    parser.add_argument(
        "args",
        nargs=argparse.REMAINDER,
        metavar="ARGS",
        help="arguments for the script (everything after SCRIPT)",
    )
    sampling_options(parser)
    parser.add_argument(
        "--no-audit",
        dest="audit",
        action="store_false",
        help="skip the placement audit of the tf.functions the script ran",
    )
    parser.add_argument(
        "--no-eager",
        dest="eager",
        action="store_false",
        help="do not count eager ops (no per-op callback at all)",
    )
    parser.add_argument(
        "--eager-duty",
        type=float,
        default=None,
        metavar="F",
        help="share of the run in which eager ops are counted (default 1/11, "
        "which keeps the cost under 5%%; 1 counts every op, ~20%% slower eager ops)",
    )
    output_options(parser)
    html_option(parser)


def main(args: argparse.Namespace) -> int:
    from gpuwhy import own_stderr
    from gpuwhy.script_runner import ScriptError, end_like_the_script, load_script, run_and_report
    from gpuwhy.run_session import Session

    own_stderr.keep()
    check_hz(args.hz)
    try:
        code = load_script(args.script)
    except ScriptError as e:
        raise UsageError(str(e)) from None
    if args.eager_duty is not None and not (0 < args.eager_duty <= 1):
        raise UsageError("--eager-duty must be a fraction in (0, 1]")
    outputs = plan_outputs(
        args, inputs=[args.script], project_dir=os.path.dirname(os.path.abspath(args.script))
    )
    check_format(args.format)
    session = Session(
        hz=args.hz,
        audit=args.audit,
        eager=args.eager,
        command=[args.script, *args.args],
        eager_duty=args.eager_duty,
    )

    def report(ended: str, exit_code: int, error: str | None) -> None:
        report_after_script(lambda: session.stop(ended, exit_code, error), args, outputs)

    session.start()
    return end_like_the_script(run_and_report(args.script, args.args, code, report))
