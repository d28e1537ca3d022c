"""``gpuwhy report RUN.json``: a saved record rendered again, by the same renderers and
options as the command that made it (``--recheck`` runs today's rules on its facts).
``gpuwhy report RECORDING.jsonl``: a ``watch --record`` file diagnosed as the live
``watch`` would (modes/recording.py). ``gpuwhy report CAPTURE``: an XProf capture (an
``*.xplane.pb``, or a TensorBoard log directory) diagnosed from what the profiler measured
(modes/capture.py)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from gpuwhy.collect.inprocess.projection import TARGET
from gpuwhy.collect.sampler import FORMAT, RecordingError
from gpuwhy.commands.options import (
    checked,
    html_option,
    output_options,
    report_settings,
    stdout_file_option,
)
from gpuwhy.commands.reporting import UsageError, emit, exit_status, plan_outputs
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.modes.capture import CaptureError, diagnose_capture, is_capture
from gpuwhy.modes.recording import diagnose_recording, header_format
from gpuwhy.record import Record, RecordError

HELP = "re-render a saved JSON report, or diagnose a recording or an XProf capture"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.description = (
        "Re-renders a saved JSON report (gpuwhy run, audit, check, watch, merge), or "
        "diagnoses an NVML recording or an XProf capture. Exit status: 0, or 1 when the "
        "report has a high or medium finding (a check's: 1 when TensorFlow cannot use a "
        "GPU); 2 for input gpuwhy cannot read."
    )
    parser.add_argument(
        "record",
        metavar="RUN.json|CAPTURE",
        help="a saved JSON report, an NVML recording (gpuwhy watch --record PATH), or an "
        "XProf capture: a *.xplane.pb or a TensorBoard log directory (TensorFlow's or JAX's "
        "profiler)",
    )
    parser.add_argument(
        "--run",
        metavar="NAME",
        help="with a TensorBoard log directory: the profile run to read "
        "(plugins/profile/NAME; default the newest)",
    )
    parser.add_argument(
        "--recheck", action="store_true", help="run the current rules on the saved facts again"
    )
    parser.add_argument(
        "--target",
        metavar="GPU",
        help="project the saved run's training step onto GPU (A100, H100, L4 ... or auto: the "
        "GPU the run had) from what its record kept, and run the current rules again; the "
        "CPU ops' time is costed only where the run was watched with --target",
    )
    output_options(parser)
    stdout_file_option(parser)
    html_option(parser)


@dataclass(frozen=True)
class ReportCommandSettings:
    record: str  # RUN.json
    recheck: bool
    run: str | None
    target: str | None  # project onto this GPU again (implies a recheck)
    report: ReportSettings


def settings_from(args: argparse.Namespace) -> ReportCommandSettings:
    """The command line read once."""
    return ReportCommandSettings(
        record=args.record,
        recheck=args.recheck,
        run=args.run,
        target=checked(TARGET, args.target) if args.target is not None else None,
        report=report_settings(args),
    )


def execute(settings: ReportCommandSettings) -> int:
    record = load_record(settings)
    outputs = plan_outputs(settings.report, inputs=[settings.record])
    emit(record, settings.report, outputs)
    return exit_status(record)


def load_record(settings: ReportCommandSettings) -> Record:
    """The record the command renders: a capture diagnosed, a recording diagnosed, or a
    saved report (rechecked with ``--recheck``); what cannot be read is a usage error.
    Also ``%gpuwhy report PATH``'s, in a notebook."""
    try:
        given = Path(settings.record)
        if settings.run is not None or is_capture(given) or given.is_dir():
            return diagnose_capture(settings.record, settings.run)
        kind = header_format(settings.record)
        if kind == FORMAT:
            record = diagnose_recording(settings.record)
        elif kind is not None:
            raise UsageError(
                f"{settings.record} is a {kind} file, not a gpuwhy NVML recording or a saved report"
            )
        else:
            record = Record.load(settings.record)
    except (RecordError, RecordingError, CaptureError) as e:
        raise UsageError(str(e)) from None
    if settings.target is not None:
        return record.projected_onto(settings.target)
    return record.recheck() if settings.recheck else record
