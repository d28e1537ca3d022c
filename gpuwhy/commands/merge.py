"""``gpuwhy merge DIR``: one report for a cluster's workers, from the records each wrote
with ``gpuwhy run --out-dir DIR`` (whatever launched them: by hand, a TFJob, ``srun``);
the merging is :func:`gpuwhy.modes.merge.merge`'s, this is the command around it.

The verdict first, then a table with one row per task, the straggler and why
(distribute.straggler), and every worker's findings once, each naming the workers it
holds on. A record cut short, of a run that was interrupted or failed, or missing for a
task the cluster spec names is kept in the table and said so: a cluster that lost a
worker still gets its report.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass

from gpuwhy.commands.options import (
    html_option,
    output_options,
    report_settings,
    stdout_file_option,
)
from gpuwhy.commands.reporting import UsageError, emit, exit_status, plan_outputs
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.modes.merge import MergeError, merge

HELP = "one report for many workers: merge the records of `gpuwhy run --out-dir DIR`"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Reads every worker's record in DIR (written by `gpuwhy run --out-dir DIR` on each "
        "worker) and reports them together: a per-worker table (steps, step time, input "
        "wait, GPU busy, collective time), the straggler and its cause, and the workers' "
        "findings once each with the workers they hold on. Exit status 1 when a high or "
        "medium finding holds."
    )
    parser.add_argument("directory", metavar="DIR", help="the directory given to --out-dir")
    output_options(parser)
    stdout_file_option(parser)
    html_option(parser)


@dataclass(frozen=True)
class MergeSettings:
    directory: str
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> MergeSettings:
    """The command line read once."""
    return MergeSettings(directory=args.directory, report=report_settings(args))


def execute(settings: MergeSettings) -> int:
    outputs = plan_outputs(settings.report)
    try:
        record = merge(settings.directory)
    except MergeError as e:
        raise UsageError(str(e)) from None
    emit(record, settings.report, outputs)
    return exit_status(record)
