"""One module per command, named after it: ``gpuwhy check`` is commands/check.py, and so on.

Each module has ``HELP`` (its line in ``gpuwhy --help``), ``configure(parser)`` (its
options), ``settings_from(args)`` and ``execute(settings) -> exit status``: cli.py runs
``execute(settings_from(args))``, so the parsed arguments are read once, into the
command's frozen settings, where a bad option is a usage error, and nothing after reads
(or writes) them. One that makes a
record then calls its mode's function (gpuwhy/modes/, the one ``gpuwhy.<mode>()`` calls
too) and writes the record. How every command ends (exit statuses, the usage error,
writing the reports) is in commands/reporting.py; the options they share are declared
and read in commands/options.py, into the settings of commands/settings.py.
gpuwhy/cli.py only parses and dispatches.
"""

from __future__ import annotations

import importlib
from types import ModuleType

# In the order ``gpuwhy --help`` lists them
COMMANDS = ("check", "audit", "run", "watch", "merge", "diff", "rules", "explain", "report", "fix")


def command_module(name: str) -> ModuleType:
    """One command's module, imported when asked for: ``gpuwhy run`` imports its own, not
    every command's (diff's, fix's, audit's and their reports' are a third of what it
    imported before the watched program's first line)."""
    return importlib.import_module(f"{__name__}.{name}")


def command_modules() -> dict[str, ModuleType]:
    """Every command's module, in the order ``gpuwhy --help`` lists them."""
    return {name: command_module(name) for name in COMMANDS}
