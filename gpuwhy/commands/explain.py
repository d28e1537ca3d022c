"""``gpuwhy explain ID``: a finding's documentation, kept next to its rule."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass

from gpuwhy.commands.reporting import EXIT_OK, UsageError
from gpuwhy.rules import Rule, UnknownRuleError, get_rule

HELP = "print a finding's documentation"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("id", metavar="ID")
    parser.add_argument("--format", choices=("terminal", "json"), default="terminal")


@dataclass(frozen=True)
class ExplainSettings:
    rule: type[Rule]  # the one ID names
    format: str


def settings_from(args: argparse.Namespace) -> ExplainSettings:
    """The command line read once: an ID that names no rule is a usage error."""
    try:
        rule = get_rule(args.id)
    except UnknownRuleError as e:
        raise UsageError(str(e)) from None
    return ExplainSettings(rule=rule, format=args.format)


def execute(settings: ExplainSettings) -> int:
    rule = settings.rule
    if settings.format == "json":
        doc = {
            "id": rule.id,
            "status": rule.status,
            "severity": rule.severity,
            "since": rule.since,
            "needs": list(rule.needs),
            "options": rule.options,
            "doc": rule.doc(),
        }
        print(json.dumps(doc, indent=2))
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
