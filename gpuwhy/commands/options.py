"""The command-line options several commands share, declared once so that ``-f``,
``--json``, ``--html``, ``-o`` and ``--hz`` mean the same thing for every command; and,
beside each group, the one function that reads it into its settings
(commands/settings.py), checked: a bad value is a usage error before anything runs."""

from __future__ import annotations

import argparse
import ipaddress
import os
import re
from dataclasses import replace
from typing import TypeVar

import gpuwhy.export as export
from gpuwhy.collect.inprocess.base import Option
from gpuwhy.collect.inprocess.projection import TARGET
from gpuwhy.collect.sampler import DCGM_EXPORTER, SAMPLES_PER_S
from gpuwhy.commands.reporting import UsageError
from gpuwhy.commands.settings import Gate, OutDir, ReportSettings
from gpuwhy.comparison.gate import GateError, parse, read_file
from gpuwhy.export.metrics_options import ALL_INTERFACES, MetricsOptions

T = TypeVar("T")


def output_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", metavar="PATH", help="also write the JSON report (schema 1) to PATH")
    p.add_argument(
        "-f",
        "--format",
        default="terminal",
        help="report format: terminal (default), json, html, sarif (the findings for code "
        "scanning, SARIF 2.1.0), or module:Class",
    )
    p.add_argument("-v", "--verbose", action="store_true", help="add tables and TF's log lines")


def report_settings(args: argparse.Namespace) -> ReportSettings:
    """``--json`` and ``-f`` (:func:`output_options`, or the command's own), with ``-v``,
    ``-o`` (:func:`stdout_file_option`, :func:`report_file_option`) and ``--html``
    (:func:`html_option`) where the command declared them (None or False where not)."""
    return ReportSettings(
        format=args.format,
        verbose=args.verbose if "verbose" in args else False,
        json=args.json,
        output=args.output if "output" in args else None,
        html=args.html if "html" in args else None,
    )


def html_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--html",
        metavar="PATH",
        help="also write the HTML report to PATH: one file that opens offline, "
        "with the step timeline, GPU activity, input pipeline and placement charts",
    )


def stdout_file_option(p: argparse.ArgumentParser) -> None:
    """For commands whose report goes to stdout: into a file instead (``-f sarif -o
    gpuwhy.sarif`` on a CI runner, where redirecting is one more shell to get right)."""
    p.add_argument(
        "-o", "--output", metavar="PATH", help="write the report to PATH instead of stdout"
    )


def report_file_option(p: argparse.ArgumentParser) -> None:
    """For commands that run a program, whose stdout is the program's."""
    p.add_argument(
        "-o", "--output", metavar="PATH", help="write the report to PATH instead of stderr"
    )


def sampling_options(p: argparse.ArgumentParser) -> None:
    """--hz and --dcgm-exporter (the GPU sampler's own options) and -o, for ``watch``."""
    SAMPLES_PER_S.add_to(p)
    DCGM_EXPORTER.add_to(p)
    report_file_option(p)


def target_option(p: argparse.ArgumentParser) -> None:
    """--target, the projection's own option, for ``audit``."""
    TARGET.add_to(p)


def checked(option: Option[T], value: T) -> T:
    """``value`` as ``option``'s collector accepts it; else the usage error it says."""
    try:
        return option.check(value)
    except ValueError as e:
        raise UsageError(str(e)) from None


def metrics_options(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--metrics-port",
        type=int,
        metavar="PORT",
        help="serve live metrics for Prometheus on PORT (/metrics, on all interfaces unless "
        "--metrics-addr says otherwise) while the program runs; the names are in docs/metrics.md",
    )
    p.add_argument(
        "--metrics-addr",
        metavar="ADDR",
        help="the address --metrics-port listens on: 0.0.0.0 (all interfaces, the default), "
        "127.0.0.1 (this host only), an interface's address, or :: (all, IPv6 too)",
    )
    p.add_argument(
        "--metrics-push",
        metavar="URL",
        help="also push them to a Prometheus Pushgateway at URL (host:port or http://...), "
        "every update and when the run ends",
    )
    p.add_argument(
        "--metrics-otlp",
        metavar="URL",
        help="also export them through OpenTelemetry to an OTLP/HTTP collector at URL "
        "(http://HOST:4318; /v1/metrics is added to a URL without a path; env: the "
        "OTEL_EXPORTER_OTLP_[METRICS_]ENDPOINT variables), every update and when the run "
        "ends; needs pip install 'gpuwhy[otlp]'",
    )
    p.add_argument(
        "--metrics-interval",
        type=float,
        default=10.0,
        metavar="S",
        help="seconds between updates of the live metrics (10)",
    )


def metrics_settings(args: argparse.Namespace) -> MetricsOptions:
    """The --metrics-* options, checked before anything runs."""

    port, url, interval = args.metrics_port, args.metrics_push, args.metrics_interval
    if port is not None and not 1 <= port <= 65535:
        raise UsageError(f"--metrics-port must be a TCP port (1-65535), not {port}")
    if not interval > 0:
        raise UsageError("--metrics-interval must be a positive number of seconds")
    if url is not None and not url.strip():
        raise UsageError("--metrics-push needs the Pushgateway's address")
    otlp = None
    if args.metrics_otlp is not None:
        try:
            otlp = export.endpoint(args.metrics_otlp)  # the exporters: only when asked
        except export.BadEndpoint as e:
            raise UsageError(str(e)) from None
    addr = ALL_INTERFACES
    if args.metrics_addr is not None:
        if port is None:
            raise UsageError("--metrics-addr is where --metrics-port listens: give the port too")
        addr = listen_address(args.metrics_addr)
    return MetricsOptions(port=port, addr=addr, push_url=url, otlp_url=otlp, interval_s=interval)


_HOST_NAME = re.compile(r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)(\.(?!-)[A-Za-z0-9-]{1,63}(?<!-))*\.?")


def listen_address(given: str) -> str:
    """``--metrics-addr`` as the server takes it: an IPv4 or IPv6 address (``[::1]``
    as ``::1``) or a host name; anything else is a usage error, said before the program
    starts rather than as a server that never listened. (An address this host does not
    have is found when the server binds: one line, and the run goes on.)"""
    text = given.strip()
    if text.startswith("[") and text.endswith("]"):
        text = text[1:-1]
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        pass
    numeric = text.rstrip(".").rsplit(".", 1)[-1].isdigit()  # 300.1.1.1 is no host name
    if len(text) <= 253 and _HOST_NAME.fullmatch(text) and not numeric:
        return text
    raise UsageError(
        f"--metrics-addr must be an IP address or a host name to listen on (0.0.0.0: all "
        f"interfaces, 127.0.0.1: this host only), not {given!r}"
    )


def out_dir_option(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--out-dir",
        metavar="DIR",
        help="also write the JSON record to DIR/<task>.json, named after this process's "
        "task in the cluster (TF_CONFIG: worker-1, chief-0; Slurm: worker-<SLURM_PROCID>; "
        "else <host>-<pid>), for `gpuwhy merge DIR`; a record that cannot be written is "
        "one line on stderr and never fails the run",
    )


def out_dir_settings(args: argparse.Namespace) -> OutDir | None:
    """``--out-dir`` against the directory gpuwhy started in (a script that chdirs must
    not move it), and as typed for messages; None when not given."""
    given = args.out_dir
    return OutDir(given=given, path=os.path.abspath(given)) if given else None


def gate_options(parser: argparse.ArgumentParser, findings_only: bool) -> None:
    """--fail-on and --fail-on-file, for ``diff`` (all conditions) and ``run`` (findings)."""
    if findings_only:
        help_text = (
            "exit 1 when the run has a finding of SEVERITY or worse (high, medium, low, info)"
        )
    else:
        help_text = (
            "exit 1 when CONDITION holds: step:+5%% (slower by 5%% or more, called), "
            "gpu-busy:-10 (10 points less busy), new:medium (a new or worse finding of "
            "medium or higher), medium (any finding of AFTER); repeatable"
        )
    parser.add_argument(
        "--fail-on",
        action="append",
        default=[],
        metavar="SEVERITY" if findings_only else "CONDITION",
        help=help_text,
    )
    parser.add_argument(
        "--fail-on-file",
        metavar="PATH",
        help="conditions for --fail-on, one per line (# comments)",
    )
    parser.add_argument(
        "--fail-ignore",
        action="append",
        default=[],
        metavar="ID",
        help="findings the gate never fails on (an id or a pattern: env.no-gpu, 'env.*'), "
        "e.g. what a CPU-only CI runner always has; repeatable",
    )


def gate_settings(args: argparse.Namespace, findings_only: bool) -> Gate:
    """The gate's conditions, read before anything runs: a bad one is a usage error."""
    try:
        out = [parse(text, findings_only) for text in args.fail_on]
        if args.fail_on_file:
            out += read_file(args.fail_on_file, findings_only)
    except GateError as e:
        raise UsageError(str(e)) from None
    ignored = tuple(args.fail_ignore)
    return Gate(tuple(replace(c, ignore=ignored) for c in out) if ignored else tuple(out))
