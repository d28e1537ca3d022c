"""``gpuwhy report RUN.json``: a saved record rendered again, by the same renderers and
options as the command that made it (``--recheck`` runs today's rules on its facts)."""

from __future__ import annotations

import argparse

from gpuwhy.commands.options import html_option, output_options, stdout_file_option
from gpuwhy.commands.reporting import UsageError, emit, exit_status, plan_outputs
from gpuwhy.record import Record, RecordError

HELP = "re-render a saved JSON report"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("record", metavar="RUN.json")
    parser.add_argument(
        "--recheck", action="store_true", help="run the current rules on the saved facts again"
    )
    output_options(parser)
    stdout_file_option(parser)
    html_option(parser)


def main(args: argparse.Namespace) -> int:
    try:
        record = Record.load(args.record)
    except RecordError as e:
        raise UsageError(str(e)) from None
    outputs = plan_outputs(args, inputs=[args.record])
    if args.recheck:
        record = record.recheck()
    emit(record, args, outputs)
    return exit_status(record)
