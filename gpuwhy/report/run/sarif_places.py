"""Where a finding is, as SARIF says it: its ``path:line`` made an artifact location
relative to the project directory, the source line read back, and the replacements a
fix spells as ``# path:line: in place of: OLD`` turned into regions of that file.

The record keeps each place as gpuwhy wrote it: relative to the directory the program
ran in where the file was under it, else absolute; ``<stdin>``-like names and findings
with no place at all exist too. The record does not keep that directory, so the
project directory (``%SRCROOT%``) is the one the report is rendered in: the same
directory for ``gpuwhy run/audit -f sarif``, and the checkout's root where CI renders a
saved record with ``gpuwhy report``. GitHub annotates a pull request only at paths
relative to the repository, which a relative place already is.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

SRCROOT = "%SRCROOT%"
_LINE_END = re.compile(r"\r\n|\r|\n")
_MARKER = re.compile(r"^# (?P<path>.+):(?P<line>\d+): in place of: (?P<old>.+)$")
_LEAVE_OUT = "# and leave out the "  # a second edit, not a replacement (snippets.vectorise)
_PLACEHOLDER = re.compile(r"<[A-Za-z][^<>]*>")  # <dataset>, <batch size>: not code to apply


@dataclass(frozen=True)
class Place:
    """A file and a line of it, with the artifact location SARIF gives it."""

    path: str  # as the record wrote it
    line: int
    artifact: dict[str, Any]
    source: Path  # where to read it from here

    def text(self) -> str | None:
        """The line's source text, where the file can be read here."""
        try:  # lines as Python numbers them: not str.splitlines's, which splits at \f too
            lines = _LINE_END.split(self.source.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError):
            return None
        return lines[self.line - 1] if 0 < self.line <= len(lines) else None

    def location(self) -> dict[str, Any]:
        region = {"startLine": self.line}
        return {"physicalLocation": {"artifactLocation": self.artifact, "region": region}}


def place(where: str | None, root: Path) -> Place | None:
    """``path:line`` as a Place (``root``: absolute); None where it names no file: no
    place, ``<stdin>``, ``<ipython-input-3>``, no line number."""
    path, _, line = (where or "").rpartition(":")
    if not (path and line.isdigit() and int(line) > 0) or path.startswith("<"):
        return None
    # no symlink resolved: the record's relative paths are os.path.relpath's, a
    # train.py linked from elsewhere is still the project's train.py
    source = Path(os.path.normpath(root / path))
    try:
        inside = source.relative_to(root)
    except ValueError:
        artifact = {"uri": source.as_uri()}
    else:
        artifact = {"uri": quote(inside.as_posix()), "uriBaseId": SRCROOT}
    return Place(path, int(line), artifact, source)


def root_uri(root: Path) -> str:
    """``%SRCROOT%``'s own URI: a directory's, so it ends with a slash."""
    return root.as_uri().rstrip("/") + "/"


def replacement_fix(fix: str | None, root: Path) -> dict[str, Any] | None:
    """The fix as one SARIF fix where it is nothing but ``in place of`` replacements
    (and comments: advice, ``# or:`` alternatives), each exact here; else None. Not one
    where the fix also adds statements (``options = tf.data.Options()`` before the
    changed line) or says to ``leave out`` a call elsewhere: the replacement alone
    would break the program. Nor where a file is unreadable, OLD is not found once on
    its line (written over several lines, or reformatted), or NEW has a
    ``<placeholder>`` to fill in. A fix is one change; half of it would not apply."""
    lines = (fix or "").splitlines()
    changes: dict[str, dict[str, Any]] = {}
    said = []
    index = 0
    while index < len(lines):
        marker = _MARKER.match(lines[index])
        if marker is None:
            line = lines[index].strip()
            if line.startswith(_LEAVE_OUT) or (line and not line.startswith("#")):
                return None
            index += 1
            continue
        new = lines[index + 1].strip() if index + 1 < len(lines) else ""
        at = place(f"{marker['path']}:{marker['line']}", root)
        replacement = _replacement(at, marker["old"], new)
        if at is None or replacement is None:
            return None
        change = changes.setdefault(at.path, {"artifactLocation": at.artifact, "replacements": []})
        change["replacements"].append(replacement)
        said.append(f"{at.path}:{at.line}: {marker['old']} -> {new}")
        index += 2
    if not changes:
        return None
    return {"description": {"text": "; ".join(said)}, "artifactChanges": list(changes.values())}


def _replacement(at: Place | None, old: str, new: str) -> dict[str, Any] | None:
    """OLD on its line replaced by NEW, where OLD is there once and NEW is code."""
    text = at.text() if at is not None else None
    if at is None or text is None or text.count(old) != 1:
        return None
    if not new or new.startswith("#") or _PLACEHOLDER.search(new):
        return None
    column = text.index(old) + 1  # SARIF columns start at 1; endColumn is past the end
    region = {"startLine": at.line, "startColumn": column, "endColumn": column + len(old)}
    return {"deletedRegion": region, "insertedContent": {"text": new}}
