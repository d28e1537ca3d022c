"""Source lines named by a marker comment, so tests assert exact file:line locations."""

import os
from pathlib import Path


def line(test_file, marker: str) -> int:
    """The number of the one line of ``test_file`` that ends with ``# @marker`` (a
    marker on two lines would let a test pass on the wrong one)."""
    path = Path(test_file)
    hits = [
        number
        for number, text in enumerate(path.read_text().splitlines(), 1)
        if text.rstrip().endswith(f"# @{marker}")
    ]
    assert len(hits) == 1, f"marker {marker!r} must be on exactly one line of {path}, found {hits}"
    return hits[0]


def at(test_file, marker: str) -> str:
    """``file:line`` (relative to the working directory, as gpuwhy writes it) of the line
    of ``test_file`` that ends with ``# @marker``."""
    return f"{os.path.relpath(test_file)}:{line(test_file, marker)}"


def marker_lines(test_file):
    """``at`` bound to one test file: ``at = marker_lines(__file__)``, then ``at("call")``."""
    return lambda marker: at(test_file, marker)
