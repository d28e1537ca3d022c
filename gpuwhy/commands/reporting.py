"""How every command ends: its exit statuses, the one-line usage error, and writing the
record's reports (``--json``, the ``-f`` format on stdout / stderr / ``-o``, ``--html``)
to the outputs planned before anything ran. One place, so that ``gpuwhy fix`` and
``gpuwhy report`` print what ``gpuwhy run`` prints for the same record."""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterable
from typing import IO

import gpuwhy.report_stream as report_stream
from gpuwhy.commands.output_paths import Output, OutputPathError, write_or_divert
from gpuwhy.commands.output_paths import plan_outputs as plan
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.renderers import MisconfigurationError, renderer_class
from gpuwhy.verdict import gpu_usable

EXIT_OK, EXIT_PROBLEM, EXIT_ERROR, EXIT_INTERRUPTED = 0, 1, 2, 130


class UsageError(Exception):
    """A one-line error for the user; exit status 2."""


def plan_outputs(
    report: ReportSettings,
    *,
    inputs: Iterable[str] = (),
    project_dir: str | None = None,
    extra: Iterable[tuple[str, str | None]] = (),
) -> dict[str, Output]:
    """Every output the command will write, checked now, before anything runs
    (gpuwhy.commands.output_paths): paths against the directory gpuwhy started in."""

    named = [
        ("--json", report.json),
        ("-o", report.output),
        ("--html", report.html),
        *extra,
    ]
    try:
        return plan(named, inputs=inputs, project_dir=project_dir)
    except OutputPathError as e:
        raise UsageError(str(e)) from None


def emit(
    record: Record, report: ReportSettings, outputs: dict[str, Output], to_stderr: bool = False
) -> None:
    """Write --json, then the chosen format: on stdout, or for commands that run a
    program (whose stdout it owns) on gpuwhy's own stderr or in -o; then --html (after
    the text report, which a failure there must not cost). A planned file that cannot be
    written now is written to the temporary directory instead, and gpuwhy says where."""

    if "--json" in outputs:
        write_or_divert(outputs["--json"], record.save, report_stream.say)
    stream = report_stream.stream() if to_stderr else sys.stdout
    try:
        renderer = renderer_class(report.format)(
            verbose=report.verbose,
            color="-o" not in outputs
            and (report_stream.isatty() if to_stderr else stream.isatty()),
        )
    except MisconfigurationError as e:
        raise UsageError(str(e)) from None
    if "-o" in outputs:
        _write_rendered(renderer, record, outputs["-o"])
    else:
        if stream.isatty():
            _refuse_terminal(type(renderer))
        if to_stderr:
            write_quietly(stream, "\n" + renderer.render(record))
        elif not renderer.for_terminal and hasattr(stream, "buffer"):
            stream.flush()  # a web page on stdout: UTF-8 bytes, written as it is rendered
            renderer.write(record, stream.buffer)
            stream.buffer.flush()
        else:
            stream.write(renderer.render(record))
            stream.flush()
    if "--html" in outputs:
        _write_rendered(renderer_class("html")(), record, outputs["--html"])


def _write_rendered(renderer: Renderer, record: Record, output: Output) -> None:
    write_or_divert(output, lambda path: _write_file(renderer, record, path), report_stream.say)


def _write_file(renderer: Renderer, record: Record, path: str) -> None:
    write_file(path, lambda out: renderer.write(record, out))


def write_file(path: str, write: Callable[[IO[bytes]], None]) -> None:
    """A report written straight into its file (the HTML page is never held whole); a
    page that fails half-way is removed, not left behind as if it were whole."""
    with open(path, "wb") as out:
        try:
            write(out)
        except BaseException:
            out.close()
            with contextlib.suppress(OSError):
                os.unlink(path)
            raise


def check_format(name: str, to_terminal: bool = False) -> None:
    """A bad ``-f`` fails before a long run, not after it; so does a format that is not
    for a terminal (binary, a web page) when the report would go to one."""

    try:
        found = renderer_class(name)
    except MisconfigurationError as e:
        raise UsageError(str(e)) from None
    if to_terminal:
        _refuse_terminal(found)


def _refuse_terminal(renderer: type[Renderer]) -> None:
    if renderer.is_binary or not renderer.for_terminal:
        raise UsageError(
            f"-f {renderer.name} is meant for a file, not a terminal: add -o PATH, or "
            "redirect the output"
        )


def write_quietly(stream: IO[str], text: str) -> None:
    """The report on a stderr the program may have closed or broken: losing the terminal
    copy is not a failure of the run (the files were written first)."""
    try:
        stream.write(text)
        stream.flush()
    except (OSError, ValueError):
        pass


def exit_status(record: Record) -> int:
    """check: 0 when TF can use a GPU. Other records: 1 when a high/medium finding exists."""

    if record.command == "check":
        return EXIT_OK if gpu_usable(record.facts) else EXIT_PROBLEM
    high = any(f.severity in ("high", "medium") for f in record.findings)
    return EXIT_PROBLEM if high else EXIT_OK


def say_error(message: str) -> None:
    report_stream.say(f"gpuwhy: error: {message}")


def say_note(message: str) -> None:
    """Something the user should know before the run, that stops nothing."""
    report_stream.say(f"gpuwhy: note: {message}")
