"""The settings several commands share, as typed, frozen values: each command reads its
``argparse.Namespace`` once, at its start, into its own settings (``settings_from`` in
its module), which hold these. What builds them from the command line, next to where
the options are declared, is commands/options.py; this module imports no other command
module, so that every one of them can take these types."""

from __future__ import annotations

from dataclasses import dataclass

from gpuwhy.comparison.gate import Condition


@dataclass(frozen=True)
class ReportSettings:
    """Which report to write and where: ``-f``, ``-v``, ``--json``, ``-o`` and ``--html``
    (None for an option not given, or one the command does not have)."""

    format: str = "terminal"
    verbose: bool = False
    json: str | None = None
    output: str | None = None
    html: str | None = None


@dataclass(frozen=True)
class Gate:
    """``--fail-on``, ``--fail-on-file`` and ``--fail-ignore``: the conditions, read and
    checked before anything runs (none: no gate)."""

    conditions: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class OutDir:
    """``--out-dir DIR``: as typed (for messages) and resolved against the directory
    gpuwhy started in (a script that chdirs must not move it)."""

    given: str
    path: str


@dataclass(frozen=True)
class ScriptSettings:
    """``SCRIPT ARGS...`` of the commands that run the user's script (run, fix)."""

    path: str
    args: tuple[str, ...] = ()
