"""A record shown inline, and the files the magics write beside it.

The output is one mime bundle: ``text/html``, the page ``gpuwhy run --html`` writes (a
whole document that opens offline: plotly.js and the styles inlined, nothing fetched),
embedded in an ``<iframe srcdoc>`` as pyinstrument embeds its report, so the page's
styles and scripts never touch the notebook's; and ``text/plain``, the terminal report,
for a terminal IPython, a notebook that does not run HTML, and ``nbconvert --to script``.
"""

from __future__ import annotations

import html
import sys
from typing import Any

from IPython.display import display

from gpuwhy.commands.output_paths import Output, write_or_divert
from gpuwhy.commands.reporting import write_file
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.renderers import renderer_class

# The frame grows to its page's height once loaded (where the notebook runs scripts in
# its outputs); until then, and where it does not, a height that shows the verdict and
# the first findings, the rest a scroll away.
HEIGHT_PX = 640
_FIT_HEIGHT = (
    "try{this.style.height=(this.contentWindow.document.documentElement"
    ".scrollHeight+24)+'px'}catch(e){}"
)


def bundle(record: Record, verbose: bool = False, page: bool = True) -> dict[str, str]:
    """The inline report: the terminal text, and (``page``) the HTML page in an iframe."""
    text = renderer_class("terminal")(verbose=verbose).render(record)
    out = {"text/plain": text.rstrip("\n")}
    if page:
        out["text/html"] = framed(renderer_class("html")(verbose=verbose).render(record))
    return out


def framed(page: str) -> str:
    """A whole HTML document as an iframe of the notebook's width."""
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{HEIGHT_PX}px;border:1px solid #ddd" '
        f'onload="{_FIT_HEIGHT}"></iframe>'
    )


def show(record: Record, verbose: bool = False, page: bool = True) -> None:
    """Display the record's report in the cell's output."""
    display(bundle(record, verbose, page), raw=True)


def write_outputs(record: Record, report: ReportSettings, outputs: dict[str, Output]) -> None:
    """--json, -o (the -f format) and --html, as the commands write them; a file that
    cannot be written now goes to the temporary directory, and the cell says where."""
    if "--json" in outputs:
        write_or_divert(outputs["--json"], record.save, say)
    if "-o" in outputs:
        _write(renderer_class(report.format)(verbose=report.verbose), record, outputs["-o"])
    if "--html" in outputs:
        _write(renderer_class("html")(), record, outputs["--html"])


def _write(renderer: Renderer, record: Record, output: Output) -> None:
    def to(path: str) -> None:
        write_file(path, lambda out: renderer.write(record, out))

    write_or_divert(output, to, say)


def say(line: str, stream: Any = None) -> None:
    """One line in the cell's stderr output (gpuwhy's own stderr is the kernel's log)."""
    print(f"gpuwhy: {line}", file=stream or sys.stderr)
