"""Plain aligned text blocks for the terminal report (rich Text, no tables that pad or wrap)."""

from __future__ import annotations

import io
from collections.abc import Sequence

from rich.console import Console
from rich.text import Text


def text_console(buffer: io.StringIO, color: bool, width: int | None = None) -> Console:
    """A console writing into ``buffer``: colour only for a terminal, and piped output
    neither coloured nor hard-wrapped (the diff's and the calibration's reports)."""
    return Console(
        file=buffer,
        force_terminal=color,
        no_color=not color,
        width=width or 100,
        soft_wrap=not color,
        highlight=False,
        emoji=False,
        force_jupyter=False,  # into the buffer, also in a notebook (rich would display it)
    )


class Rows:
    """Aligned "key  value" lines; unlike a rich Table they are not padded to the
    terminal width, so piped output has no trailing blanks and long values do not wrap."""

    def __init__(self, key_width: int = 18) -> None:
        self.key_width = key_width
        self.lines: list[Text] = []

    def add_row(self, key: str, value: str) -> None:
        line = Text(key.ljust(self.key_width - 2) + "  ", style="bold")
        line.append(value)
        self.lines.append(line)


def table(header: Sequence[str], rows: Sequence[Sequence[str]], indent: int) -> list[Text]:
    """Columns padded to their widest cell; the last column is never padded or cut."""
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header) - 1)]

    def line(cells: Sequence[str], style: str = "") -> Text:
        text = " " * indent + "  ".join(str(c).ljust(w) for c, w in zip(cells, widths))
        return Text(text + "  " + str(cells[-1]), style=style)

    return [line(header, "bold"), *(line(r) for r in rows)]
