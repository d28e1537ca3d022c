"""Command line: ``gpuwhy check | audit | run | watch | merge | fix | rules | explain | report``.

This module only parses the command line and turns what a command raises into an exit
status; each command lives in gpuwhy/commands/<name>.py.

Exit status: 0 when the answer is good (``check``: TF can use a GPU), 1 when gpuwhy
diagnosed a problem (``check``: it cannot), 2 when gpuwhy itself failed or was misused
(one line on stderr, never a traceback), 130 on Ctrl-C. ``run`` and ``watch`` exit with the
status of the program they watched.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from types import TracebackType
from typing import NoReturn

from gpuwhy.commands import COMMANDS, command_module, command_modules
from gpuwhy.commands.reporting import (
    EXIT_ERROR,
    EXIT_INTERRUPTED,
    EXIT_OK,
    UsageError,
    say_error,
)
from gpuwhy.modes.run.script import ScriptInterrupted
from gpuwhy.version import __version__


class Parser(argparse.ArgumentParser):
    """argparse, its errors in gpuwhy's one line (``gpuwhy: error: ...``, exit 2) instead
    of a usage block: a bad option reads like every other refusal."""

    def error(self, message: str) -> NoReturn:
        taken = _script_taken(message, self.given)
        if taken:
            option, script = taken
            say_error(
                f"{option} takes a PATH and took the script {script} as it: "
                f"give it a file to write ({self.prog} {option} out{_SUFFIXES.get(option, '')} "
                f"{script})"
            )
        else:
            say_error(f"{message} (`{self.prog} --help` lists the options)")
        raise SystemExit(EXIT_ERROR)

    given: Sequence[str] = ()  # the command line, set by main(): what an error names


# options that take a file to write: `gpuwhy run --json train.py` gives --json the script
_SUFFIXES = {"--json": ".json", "--html": ".html", "-o": ".txt", "--output": ".txt"}


def _script_taken(message: str, given: Sequence[str]) -> tuple[str, str] | None:
    """(option, script) where the script is missing because an option that takes a path
    took it: its value ends in ``.py`` and nothing follows."""
    if "SCRIPT" not in message or "required" not in message:
        return None
    for option, value in zip(given, given[1:]):
        if option in _SUFFIXES and value.endswith(".py"):
            return option, value
    return None


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The command line's parser; with ``only``, one command's (the one given: no other
    command's module is imported)."""
    parser = Parser(
        prog="gpuwhy",
        description="Why is my TensorFlow GPU idle? Diagnosis with evidence and fixes.",
    )
    parser.add_argument("--version", action="version", version=f"gpuwhy {__version__}")
    # the command line as given, set by main(): `diff` finds its `--` between the sides
    # in it (argparse drops it), `run --repeat` gives it again to each run
    parser.set_defaults(argv=None)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    chosen = {only: command_module(only)} if only else command_modules()
    for name, module in chosen.items():
        # no abbreviated options: `gpuwhy run train.py --out x` passes --out to the script,
        # not to gpuwhy as an ambiguous prefix of --out-dir/--output
        module.configure(sub.add_parser(name, help=module.HELP, allow_abbrev=False))
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """The command line. Its parsing is apart (:func:`parsed`): this frame stays below a
    script that ``gpuwhy run`` runs, and TensorFlow reads its line at every eager op, a
    scan of its code's line table up to the call it waits in (gpuwhy.modes.run.script.drive)."""
    args = parsed(argv)
    try:
        command = command_module(args.command)
        return int(command.execute(command.settings_from(args)))
    except UsageError as e:
        say_error(str(e))
        return EXIT_ERROR
    except ScriptInterrupted:
        # Let the interpreter finish as it does after an uncaught KeyboardInterrupt:
        # non-daemon threads joined, the script's atexit handlers run (TF's temporary
        # files removed), streams flushed, then death by SIGINT. The traceback was
        # already printed as the script's own.
        sys.excepthook = _quiet_excepthook
        raise KeyboardInterrupt from None
    except KeyboardInterrupt:
        say_error("interrupted")
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # `gpuwhy check | head`
        return EXIT_OK
    except Exception as e:
        if os.environ.get("GPUWHY_DEBUG"):
            raise
        say_error(f"internal error: {type(e).__name__}: {e} (GPUWHY_DEBUG=1 shows the traceback)")
        return EXIT_ERROR


def parsed(argv: Sequence[str] | None) -> argparse.Namespace:
    """The command line's arguments (``argv``: sys.argv's by default), with the command
    line as given in ``argv``."""
    given = list(sys.argv[1:] if argv is None else argv)
    Parser.given = given
    named = given[0] if given and given[0] in COMMANDS else None
    args = build_parser(only=named).parse_args(given)
    args.argv = given
    return args


def _quiet_excepthook(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    if not issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
