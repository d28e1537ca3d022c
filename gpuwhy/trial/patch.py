"""The patch of the fixes that held: a unified diff of the user's files, paths relative
to the working directory (``git apply`` and ``patch -p1`` take it from there), each
file's text as the user wrote it with the fixes' edits made, nothing else."""

from __future__ import annotations

import difflib
import os
from collections.abc import Sequence

from gpuwhy.trial.source_edits import Edit, apply, joined_insertions, lines_of


def unified_diff(edits: Sequence[Edit], base: str) -> str:
    by_file: dict[str, list[Edit]] = {}
    for e in edits:
        by_file.setdefault(e.path, []).append(e)
    parts: list[str] = []
    for path in sorted(by_file):
        with open(path, encoding="utf-8", newline="") as f:
            before = f.read()
        after = apply(before, by_file[path])
        rel = os.path.relpath(path, base)
        parts.extend(
            difflib.unified_diff(
                lines_of(before),
                lines_of(after),
                fromfile=f"a/{rel}",
                tofile=f"b/{rel}",
            )
        )
    return "".join(p if p.endswith("\n") else p + "\n\\ No newline at end of file\n" for p in parts)


def compatible(chosen: Sequence[Sequence[Edit]]) -> list[int]:
    """Indices of the edit sets that can be made together, first come first kept (an
    import both add counts once; sets that overlap or touch are not, but for lines
    both insert before the same line: Edit.stacks_with)."""
    kept: list[int] = []
    taken: list[Edit] = []
    for i, edits in enumerate(chosen):
        new = [e for e in edits if e not in taken]
        if any(
            (a.overlaps(b) or a.touches(b)) and not a.stacks_with(b) for a in new for b in taken
        ):
            continue
        kept.append(i)
        taken += new
    return kept


def merged(chosen: Sequence[Sequence[Edit]]) -> list[Edit]:
    """The sets' edits as one, each once; lines inserted before one line joined, in the
    sets' order."""
    out: list[Edit] = []
    for edits in chosen:
        out += [e for e in edits if e not in out]
    return joined_insertions(out)
