"""The command-line options several commands share, declared once so that ``-f``,
``--json``, ``--html``, ``-o`` and ``--hz`` mean the same thing for every command."""

from __future__ import annotations

import argparse


def output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="also write the JSON report (schema 1) to PATH")
    p.add_argument(
        "-f",
        "--format",
        default="terminal",
        help="report format: terminal (default), json, html, or module:Class",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="add tables and TF's log lines")


def html_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="PATH",
        help="also write the HTML report to PATH: one file that opens offline, "
        "with the step timeline, GPU activity, input pipeline and placement charts",
    )


def report_file_option(p: argparse.ArgumentParser) -> None:
    """For commands that run a program, whose stdout is the program's."""
    p.add_argument(
        "-o", "--output", metavar="PATH", help="write the report to PATH instead of stderr"
    )


def sampling_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--hz",
        type=float,
        default=10.0,
        metavar="N",
        help="GPU samples per second (10; GPM metrics are read at most at 10)",
    )
    report_file_option(p)
