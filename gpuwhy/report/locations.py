"""file:line in the HTML pages: kept on one line (a location broken after its colon reads
as two things) and linked to the source it names, so that a finding's line is one click
away. Each ``path.py:LINE`` in a cell, a sentence or a card's "at" becomes an
``<a class="loc">`` where the file exists on this machine (else a ``<span class="loc">``:
a record read elsewhere links to nothing rather than to a file that is not there); the
stylesheet keeps it whole (``white-space: nowrap``), so a cell of several locations still
wraps, between them.

A location is relative to the directory the program ran in, which is where gpuwhy writes
its report; ``gpuwhy report`` run elsewhere links the files found from there. The link is
the file's ``file://`` URL (any browser shows it), or an editor's: ``GPUWHY_EDITOR=vscode``
(or ``cursor``, ``pycharm``, ``idea``, ``sublime``), or a template of one's own,
``GPUWHY_EDITOR='myeditor://open?file={path}&line={line}'``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any
from urllib.parse import quote

# a source location as gpuwhy writes one: a path ending in a source file, then :LINE
# (and :COLUMN where given); paths with spaces are left to wrap
LOCATION = re.compile(r"[\w./~+-]*\.(?:py|pyx|ipynb|cc|h|cpp|sh)(?::\d+)+")

EDITORS = {
    "vscode": "vscode://file{path}:{line}",
    "cursor": "cursor://file{path}:{line}",
    "pycharm": "pycharm://open?file={path}&line={line}",
    "idea": "idea://open?file={path}&line={line}",
    "sublime": "subl://open?url=file://{path}&line={line}",
}


def source_link(location: str, cwd: str | None = None) -> str | None:
    """The URL that opens ``location`` (``train.py:36``) at its line: the editor's of
    ``GPUWHY_EDITOR``, else the file's ``file://`` URL; None where no such file is here."""
    path_text, _, rest = location.partition(":")
    line = rest.split(":", 1)[0]
    path = Path(path_text).expanduser()
    if not path.is_absolute():
        path = Path(cwd or os.getcwd()) / path
    try:
        if not path.is_file():
            return None
        path = path.resolve()
    except OSError:  # a path too long, a folder without permission
        return None
    editor = os.environ.get("GPUWHY_EDITOR", "").strip()
    template = EDITORS.get(editor.lower(), editor if "{path}" in editor else "")
    if not template:
        return f"{path.as_uri()}#L{line}"
    return template.format(path=quote(str(path)), line=line)


# what else must not break where a narrow column would: a path (it may, after a "/") and
# a number and its unit ("86.5 ms" broken after 86.5 reads as two things)
PATH = re.compile(r"(?:~|\.{1,2})?/[\w.+-]+(?:/[\w.+-]+)+/?|[\w.+-]+(?:/[\w.+-]+){2,}/?")
UNIT = re.compile(r"(?<=\d) (?=(?:ms|µs|ns|s|%|KiB|MiB|GiB|MB/s|GB/s|W|MHz|°C)(?![\w/]))")
TOKENS = re.compile(f"(?P<loc>{LOCATION.pattern})|(?P<path>{PATH.pattern})")


def nowrap_locations(value: Any) -> Any:
    """The cell's text, escaped, each location in an ``<a class="loc">`` to its source
    (a ``<span class="loc">`` where the file is not here), each other path in a
    ``<span class="path">`` that breaks only after a ``/``, and a number kept with its
    unit (Markup: the template prints it as it is)."""
    from markupsafe import Markup, escape  # with jinja2: only the HTML pages need it

    def marked(match: re.Match[str]) -> str:
        if match.group("path") is not None:
            return '<span class="path">' + match.group(0).replace("/", "/<wbr>") + "</span>"
        location = match.group(0)
        href = source_link(location)
        if href is None:
            return f'<span class="loc">{location}</span>'
        return f'<a class="loc" href="{escape(href)}" title="open {location}">{location}</a>'

    text = UNIT.sub("\u00a0", str(escape(value)))
    return Markup(TOKENS.sub(marked, text))
