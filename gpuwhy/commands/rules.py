"""``gpuwhy rules``: every finding id, its state and the question it answers."""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from typing import Any

from gpuwhy.commands.reporting import EXIT_OK
from gpuwhy.rules import ALL_RULES

HELP = "list every finding id with its state"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--format", choices=("terminal", "json"), default="terminal")


@dataclass(frozen=True)
class RulesSettings:
    format: str


def settings_from(args: argparse.Namespace) -> RulesSettings:
    """The command line read once."""
    return RulesSettings(format=args.format)


def execute(settings: RulesSettings) -> int:
    rows: list[dict[str, Any]] = [
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
    if settings.format == "json":
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
