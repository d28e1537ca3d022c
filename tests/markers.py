"""Source lines named by a marker comment, so tests assert exact file:line locations."""

import os
from pathlib import Path


def at(test_file, marker: str) -> str:
    """``file:line`` (relative to the working directory, as gpuwhy writes it) of the line
    of ``test_file`` that ends with ``# @marker``."""
    path = Path(test_file)
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if line.rstrip().endswith(f"# @{marker}"):
            return f"{os.path.relpath(path)}:{number}"
    raise AssertionError(f"no line marked # @{marker} in {path}")


def marker_lines(test_file):
    """``at`` bound to one test file: ``at = marker_lines(__file__)``, then ``at("call")``."""
    return lambda marker: at(test_file, marker)
