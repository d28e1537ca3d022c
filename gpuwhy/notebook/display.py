"""A record shown inline, and the files the magics write beside it.

The output is one mime bundle: ``text/html``, the page ``gpuwhy run --html`` writes (a
whole document that opens offline: plotly.js and the styles inlined, nothing fetched),
embedded in an ``<iframe srcdoc>`` as pyinstrument embeds its report, so the page's
styles and scripts never touch the notebook's; and ``text/plain``, the terminal report,
for a terminal IPython, a notebook that does not run HTML, and ``nbconvert --to script``.
"""

from __future__ import annotations

import html
import re
import sys
from collections.abc import Mapping
from typing import Any

from IPython.display import display

from gpuwhy.commands.output_paths import Output, write_or_divert
from gpuwhy.commands.reporting import write_file
from gpuwhy.commands.settings import ReportSettings
from gpuwhy.record import Record
from gpuwhy.report.base import Renderer
from gpuwhy.report.renderers import renderer_class
from gpuwhy.tfapi.graph_ops import relative

# The frame takes its page's height once loaded, up to MAX_HEIGHT_PX (the rest scrolls
# inside it, so the next cell stays near); before that, and where the notebook runs no
# scripts in its outputs, HEIGHT_PX: the verdict and the first findings.
HEIGHT_PX, MAX_HEIGHT_PX = 640, 900
_FIT_HEIGHT = (
    "try{this.style.height=Math.min(this.contentWindow.document.documentElement"
    f".scrollHeight+24,{MAX_HEIGHT_PX})+'px'}}catch(e){{}}"
)


def bundle(
    record: Record,
    verbose: bool = False,
    page: bool = True,
    cells: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """The inline report: the terminal text, and (``page``) the HTML page in an iframe;
    ``cells``: the label to show for each cell's file name (:func:`cell_labels`)."""
    text = renderer_class("terminal")(verbose=verbose).render(record)
    cells = cells or {}
    out = {"text/plain": relabel(text.rstrip("\n"), cells)}
    if page:
        html_page = renderer_class("html")(verbose=verbose).render(record)
        out["text/html"] = framed(relabel(html_page, cells, escaped=True))
    return out


def cell_labels(shell: Any) -> dict[str, str]:
    """Each cell's file name as the report writes it (``/tmp/ipykernel_7/2871.py``, or
    relative to the working directory), and the label IPython's tracebacks give it
    (``In[5]``). Only the shown report says so: the record keeps the file names."""
    numbers = getattr(getattr(shell, "compile", None), "_filename_map", None) or {}
    labels = {}
    for filename, number in numbers.items():
        if number:
            labels[filename] = f"In[{number}]"
            labels[relative(filename, 0).rpartition(":")[0]] = f"In[{number}]"
    return labels


def relabel(text: str, cells: Mapping[str, str], escaped: bool = False) -> str:
    """``text`` with every cell's file name in ``cells`` written as its label."""
    if not cells:
        return text
    names = {html.escape(k) if escaped else k: v for k, v in cells.items()}
    pattern = re.compile("|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)))
    return pattern.sub(lambda m: names[m.group(0)], text)


def framed(page: str) -> str:
    """A whole HTML document as an iframe of the notebook's width."""
    return (
        f'<iframe srcdoc="{html.escape(page, quote=True)}" '
        f'style="width:100%;height:{HEIGHT_PX}px;border:1px solid #ddd" '
        f'onload="{_FIT_HEIGHT}"></iframe>'
    )


def show(record: Record, shell: Any, verbose: bool = False, page: bool = True) -> None:
    """Display the record's report in the cell's output, the cells named as in IPython."""
    display(bundle(record, verbose, page, cell_labels(shell)), raw=True)


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


def say(line: str) -> None:
    """One line (``gpuwhy: ...``) in the cell's stderr output: gpuwhy's own stderr
    (report_stream.py, where the commands say it) is the kernel's log, which nobody reads."""
    print(line, file=sys.stderr)
