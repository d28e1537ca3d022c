"""The magics' options, from the same definitions the commands use: ``%%gpuwhy`` takes
``gpuwhy run``'s collector options (--hz, --no-eager, --target, --capture ...), its
--json/--html/-o/-f/-v, and ``-r NAME``; ``%gpuwhy check`` and ``%gpuwhy report`` take
their commands' own. A bad option is IPython's UsageError: one line and the usage, no
traceback, as every magic refuses input."""

from __future__ import annotations

import argparse
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn

from IPython.core.error import UsageError

from gpuwhy.collect.registry import run_options
from gpuwhy.commands import check as check_command
from gpuwhy.commands import report as report_command
from gpuwhy.commands.options import html_option, output_options
from gpuwhy.commands.options import report_settings as read_report_settings
from gpuwhy.commands.reporting import UsageError as CommandUsageError
from gpuwhy.commands.run import collector_options
from gpuwhy.commands.settings import ReportSettings

LINE_USAGE = (
    "%gpuwhy check [options] | %gpuwhy report PATH|NAME [options]; "
    "%%gpuwhy [options] as a cell's first line watches the cell (%%gpuwhy -h lists them)"
)


class _Parser(argparse.ArgumentParser):
    """argparse whose refusal is IPython's UsageError (the error and the usage line)
    instead of an exit of the kernel."""

    def error(self, message: str) -> NoReturn:
        usage = " ".join(self.format_usage().split())
        raise UsageError(f"{message}\n{usage}")


@dataclass(frozen=True)
class CellSettings:
    """``%%gpuwhy``'s line read once: the Session's options, where the report goes."""

    collector_options: tuple[tuple[str, Any], ...]
    report: ReportSettings
    record_name: str | None = None
    html: bool = True  # the inline HTML page (--text: the terminal report only)


def cell_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="%%gpuwhy",
        description="Watch this cell as `gpuwhy run` watches a script and show the report "
        "inline (its HTML page, with the terminal report as the text fallback).",
        allow_abbrev=False,
    )
    parser.add_argument(
        "-r",
        "--record",
        metavar="NAME",
        help="keep the run's Record in the variable NAME (for gpuwhy.diff, .save, .findings)",
    )
    parser.add_argument(
        "--text",
        action="store_true",
        help="show the terminal report only (the HTML page inlines plotly.js: ~5 MB a cell "
        "in the saved notebook)",
    )
    for option in run_options():  # each collector's, declared where it is read
        option.add_to(parser)
    output_options(parser)
    parser.add_argument(
        "-o", "--output", metavar="PATH", help="also write the report in the -f format to PATH"
    )
    html_option(parser)
    return parser


def parse_cell(line: str) -> CellSettings | None:
    """``%%gpuwhy``'s options; None when -h printed the help."""
    args = _parse(cell_parser(), line)
    if args is None:
        return None
    if args.record is not None and not args.record.isidentifier():
        raise UsageError(f"-r needs a variable name, not {args.record!r}")
    return CellSettings(
        collector_options=_checked(lambda: collector_options(args)),
        report=_report(args),
        record_name=args.record,
        html=not args.text,
    )


def parse_check(words: list[str]) -> check_command.CheckSettings | None:
    """``%gpuwhy check``'s options: ``gpuwhy check``'s (--python, --timeout, --json ...)."""
    return _parse_command("%gpuwhy check", check_command, words)


def parse_report(words: list[str]) -> report_command.ReportCommandSettings | None:
    """``%gpuwhy report``'s: ``gpuwhy report``'s (PATH, --run, --recheck, --json ...)."""
    return _parse_command("%gpuwhy report", report_command, words)


def _parse_command(prog: str, command: Any, words: list[str]) -> Any:
    """A command's own options (its ``configure``, ``settings_from`` and ``HELP``) read
    from the magic's words; None where they asked for help."""
    parser = _Parser(prog=prog, description=command.HELP)
    command.configure(parser)
    args = _parse(parser, words)
    if args is None:
        return None
    _report(args)
    return _checked(lambda: command.settings_from(args))


def split(line: str) -> list[str]:
    """The magic's line as words, as a shell splits them."""
    try:
        return shlex.split(line)
    except ValueError as e:  # an unclosed quote
        raise UsageError(f"cannot read the options: {e}") from None


def _parse(parser: argparse.ArgumentParser, line: str | list[str]) -> argparse.Namespace | None:
    words = split(line) if isinstance(line, str) else line
    try:
        return parser.parse_args(words)
    except SystemExit:  # -h printed the help: nothing to run
        return None


def _report(args: argparse.Namespace) -> ReportSettings:
    """Where the report goes besides inline: --json, --html, and -o with its -f. The
    inline report is always the page and the terminal text, so -f alone is refused."""
    report = read_report_settings(args)
    if report.format != "terminal" and report.output is None:
        raise UsageError(
            f"-f {report.format} is the format of -o PATH here: the report is shown inline"
        )
    return report


def _checked(read: Callable[[], Any]) -> Any:
    """A command's own check of its options (a value refused), as a magic's UsageError."""
    try:
        return read()
    except CommandUsageError as e:
        raise UsageError(str(e)) from None
