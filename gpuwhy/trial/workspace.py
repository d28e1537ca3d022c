"""A working copy of the program's tree where a variant runs: the user's files are never
written, and what the program writes to relative paths (checkpoints, logs, outputs)
lands in the copy.

The copy's root is the folder above the deepest one holding both the working directory
and the script (``../data`` resolves in the copy as it does in the program's tree). The folders on the way down to them are real folders whose other entries are
symbolic links; the script's folder and the working directory are copied: their Python
files and other files up to :data:`COPY_BYTES` each, up to :data:`MAX_COPIED` files and
:data:`MAX_COPIED_BYTES` in all (a copy is made for every run),
larger files and deeper trees linked (data is read through the link, not copied).
A program that writes into a linked file or folder, or to an absolute path, still
writes there: said in the report's notes.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field

from gpuwhy.trial.source_edits import Edit, EditError, apply

COPY_BYTES = 4 << 20
MAX_COPIED = 5000
MAX_COPIED_BYTES = 256 << 20  # a copy per run: beyond this, files are linked
SKIP = frozenset({".git", "__pycache__", ".mypy_cache", ".pytest_cache", ".ruff_cache"})
LINKED = frozenset({".venv", "venv", "node_modules", ".tox", "site-packages"})


@dataclass
class Workspace:
    """One copy of the program's tree under ``path``, for one variant."""

    root: str  # the user's folder the copy mirrors
    path: str  # the copy
    linked: list[str] = field(default_factory=list)  # the user's entries reached by links

    def mapped(self, user_path: str) -> str:
        """Where ``user_path`` (under ``root``) is in the copy."""
        rel = os.path.relpath(os.path.abspath(user_path), self.root)
        return os.path.join(self.path, rel)

    def write_edits(self, edits: Iterable[Edit]) -> None:
        """The edits made in the copy's files (each file read from the user's, its line
        endings kept). A file is written only as a real file of the copy: every folder
        on its way that the copy reached by a link is made a real folder first (its
        entries linked), so no write can go through a link into the user's tree."""
        by_file: dict[str, list[Edit]] = {}
        for e in edits:
            by_file.setdefault(e.path, []).append(e)
        for user_path, file_edits in by_file.items():
            rel = os.path.relpath(os.path.abspath(user_path), self.root)
            if rel.startswith(os.pardir):
                raise EditError(f"{user_path} is outside the program's folder {self.root}")
            with open(user_path, encoding="utf-8", newline="") as f:
                text = apply(f.read(), file_edits)
            target = self._real_path_to(rel)
            with open(target, "w", encoding="utf-8", newline="") as f:
                f.write(text)

    def _real_path_to(self, rel: str) -> str:
        """``rel`` in the copy, its folders real folders of the copy, the file itself not a
        link (a link is removed: the file is then written in its place)."""
        here = self.path
        parts = rel.split(os.sep)
        for part in parts[:-1]:
            here = os.path.join(here, part)
            if os.path.islink(here):
                source = os.path.realpath(here)
                os.unlink(here)
                os.mkdir(here)
                for entry in os.scandir(source):
                    os.symlink(os.path.realpath(entry.path), os.path.join(here, entry.name))
            elif not os.path.isdir(here):
                os.mkdir(here)
        target = os.path.join(here, parts[-1])
        if os.path.islink(target):
            os.unlink(target)
        real_copy = os.path.realpath(self.path)
        if os.path.commonpath([os.path.realpath(os.path.dirname(target)), real_copy]) != real_copy:
            raise EditError(f"{target} would be written outside the copy")
        return target

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)


def common_root(script: str, cwd: str) -> str:
    """The folder the copy mirrors: the one above the deepest folder holding both the
    script and the working directory (a program reads ``../data`` from either), unless
    that is the file system's root."""
    deepest = os.path.commonpath([os.path.dirname(os.path.abspath(script)), os.path.abspath(cwd)])
    above = os.path.dirname(deepest)
    return deepest if above in (deepest, os.sep) else above


def make(script: str, cwd: str, parent: str, prefix: str = "variant-") -> Workspace:
    """A fresh copy under ``parent`` for ``script`` run from ``cwd``, its folder named
    from ``prefix`` (the variant: ``--keep`` shows which run is which)."""
    root = common_root(script, cwd)
    path = tempfile.mkdtemp(prefix=prefix, dir=parent)
    ws = Workspace(root=root, path=path)
    full = {os.path.dirname(os.path.abspath(script)), os.path.abspath(cwd)}
    budget = [MAX_COPIED, MAX_COPIED_BYTES]
    _mirror(root, path, full, ws, budget, os.path.realpath(parent))
    return ws


def _on_spine(folder: str, full: set[str]) -> bool:
    return any(f == folder or f.startswith(folder.rstrip(os.sep) + os.sep) for f in full)


def _mirror(src: str, dst: str, full: set[str], ws: Workspace, budget: list[int], own: str) -> None:
    """``src`` into ``dst``: copied where it is one of ``full`` (or inside one), a spine
    of real folders with linked entries on the way to them."""
    copying = any(src == f or src.startswith(f.rstrip(os.sep) + os.sep) for f in full)
    try:
        entries = sorted(os.scandir(src), key=lambda e: e.name)
    except OSError:
        return
    for entry in entries:
        real = os.path.realpath(entry.path)
        if entry.name in SKIP or real == own or real.startswith(own + os.sep):
            continue  # gpuwhy's own folder of copies, where the tree holds it: never copied
        target = os.path.join(dst, entry.name)
        try:
            is_dir = entry.is_dir(follow_symlinks=False)
            is_file = entry.is_file(follow_symlinks=False)
        except OSError:
            continue
        if (
            is_dir
            and entry.name not in LINKED
            and (copying and budget[0] > 0 or _on_spine(entry.path, full))
        ):
            os.mkdir(target)
            _mirror(entry.path, target, full, ws, budget, own)
        elif is_file and copying and budget[0] > 0 and _small(entry, budget[1]):
            try:
                shutil.copy2(entry.path, target)
            except OSError:  # unreadable: the program cannot read it either; linked
                os.symlink(os.path.realpath(entry.path), target)
                continue
            budget[0] -= 1
            budget[1] -= _size(entry)
        else:
            os.symlink(os.path.realpath(entry.path), target)
            if copying:
                ws.linked.append(entry.path)


def _small(entry: os.DirEntry, bytes_left: int) -> bool:
    """A Python file always (fixes edit them); another file up to COPY_BYTES while the
    copy's byte budget lasts."""
    size = _size(entry)
    return entry.name.endswith(".py") or size <= min(COPY_BYTES, bytes_left)


def _size(entry: os.DirEntry) -> int:
    try:
        return entry.stat().st_size
    except OSError:
        return COPY_BYTES + 1
