"""Keep the script's modules and gpuwhy's apart, in both directions.

Under ``python train.py`` the script's directory comes first on ``sys.path``, so a
``random.py`` or ``secrets.py`` next to it is what ``import random`` gives the script,
and whatever Python imported at start-up is all that is already loaded. gpuwhy, running
the script in its own process, has loaded more (argparse, json, rich ...). Two ways that
goes wrong, both handled here:

- the script would get gpuwhy's copy of a module it shadows: :func:`for_the_script`
  takes such modules out of ``sys.modules`` while the script runs (only those Python
  itself had not loaded at start-up, found by asking a bare interpreter, and only when
  the script's directory shadows one at all);
- gpuwhy's report, imported after the script, would get the script's module (a
  ``secrets.py`` breaking jinja2): :func:`for_gpuwhy` swaps the script's shadowing
  modules and ``sys.path[0]`` back to gpuwhy's for the length of the report, then
  restores the script's view for its ``atexit`` handlers.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import os
import subprocess
import sys
from collections.abc import Iterator
from types import ModuleType

_STARTUP_PROBE = "import sys; print('\\n'.join(sys.modules))"


class ScriptModules:
    """The module table as gpuwhy had it, and what must change for the script."""

    def __init__(self, script_dir: str) -> None:
        self.script_dir = os.path.abspath(script_dir)
        self.gpuwhy_path = list(sys.path)
        self.before = set(sys.modules)
        self.hidden: dict[str, ModuleType] = {}

    def hide_shadowed(self) -> None:
        """Take out of ``sys.modules`` the modules gpuwhy loaded that a file in the
        script's directory shadows, so the script imports its own file as under Python."""
        shadowed = [
            name
            for name in self.before
            if "." not in name and name != "__main__" and _has_file(name, [self.script_dir])
        ]
        if not shadowed:
            return
        at_startup = _python_startup_modules()
        for name in shadowed:
            if name in at_startup:
                continue
            for key in [k for k in sys.modules if k == name or k.startswith(name + ".")]:
                self.hidden[key] = sys.modules.pop(key)

    @contextlib.contextmanager
    def for_gpuwhy(self) -> Iterator[None]:
        """gpuwhy's own imports while it reports: ``sys.path`` and the shadowed modules
        as they were before the script; the script's view is restored afterwards."""
        script_path = list(sys.path)
        script_own = {key: sys.modules.pop(key) for key in self._script_shadowing()}
        sys.modules.update(self.hidden)
        sys.path[:] = self.gpuwhy_path
        try:
            yield
        finally:
            sys.path[:] = script_path
            for key in self.hidden:
                sys.modules.pop(key, None)
            sys.modules.update(script_own)

    def _script_shadowing(self) -> list[str]:
        """Modules (with their submodules) that the script loaded under a name gpuwhy's
        own path resolves to another file: its ``secrets.py``, its ``random.py``."""
        tops = []
        for name, module in list(sys.modules.items()):
            if (
                "." in name
                or name == "__main__"
                or (name in self.before and name not in self.hidden)
            ):
                continue
            origin = getattr(module, "__file__", None)
            if name in self.hidden or (
                origin and _resolves_elsewhere(name, origin, self.gpuwhy_path)
            ):
                tops.append(name)
        return [
            key
            for key in list(sys.modules)
            if any(key == top or key.startswith(top + ".") for top in tops)
        ]


def _resolves_elsewhere(name: str, origin: str, path: list[str]) -> bool:
    spec = _find(name, path)
    found = getattr(spec, "origin", None)
    if not found or found == origin:
        # the same path, so the same file: no realpath (each an lstat per component,
        # two for every top-level module a TF program loads, after its last line)
        return False
    return found != "namespace" and os.path.realpath(found) != os.path.realpath(origin)


def _find(name: str, path: list[str]):
    try:
        return importlib.machinery.PathFinder.find_spec(name, path)
    except (ImportError, ValueError, OSError):
        return None


def _has_file(name: str, path: list[str]) -> bool:
    """Whether importing ``name`` from ``path`` finds a module or regular package (a bare
    directory is a namespace portion, which a regular module later on the path beats)."""
    spec = _find(name, path)
    return spec is not None and spec.loader is not None and spec.origin not in (None, "namespace")


def _python_startup_modules() -> frozenset[str]:
    """The modules a bare ``python script.py`` has loaded before the script's first line
    (``site`` and its ``.pth`` files included): asked of this interpreter, once."""
    global _startup_cache
    if _startup_cache is None:
        try:
            out = subprocess.run(
                [sys.executable, "-c", _STARTUP_PROBE],
                capture_output=True,
                text=True,
                timeout=30,
                check=True,
                cwd=os.path.dirname(sys.executable) or None,
            ).stdout
            _startup_cache = frozenset(out.split())
        except (OSError, subprocess.SubprocessError):
            _startup_cache = frozenset(sys.builtin_module_names)
    return _startup_cache


_startup_cache: frozenset[str] | None = None
