"""Run code right after a module is imported, without importing it ourselves.

gpuwhy must not import TensorFlow before the watched script does: scripts set
``CUDA_VISIBLE_DEVICES`` or ``TF_CPP_MIN_LOG_LEVEL`` before their import, some import
TF lazily inside a function, and importing it early would change start-up time and
memory. So hooks that need TF wait here until the script's own ``import tensorflow``
has finished (after wrapt's post-import hooks, PEP 369).

A finder on ``sys.meta_path`` sees the import first, lets the normal finders find the
module, and wraps that one loader *instance*'s ``exec_module``; the spec, loader class
and ``__loader__`` stay TF's own.
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import threading
from collections.abc import Callable

import gpuwhy.forked as forked

Callback = Callable[[object], None]


class _PostImportFinder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self.callbacks: dict[str, list[Callback]] = {}
        self._busy = threading.local()

    def find_spec(self, name, path, target=None):
        if name not in self.callbacks or getattr(self._busy, name, False):
            return None
        setattr(self._busy, name, True)
        try:
            spec = importlib.util.find_spec(name)
        except (ImportError, ValueError):
            return None
        finally:
            setattr(self._busy, name, False)
        loader = getattr(spec, "loader", None) if spec else None
        if loader is None or not hasattr(loader, "exec_module"):
            return None
        original = loader.exec_module

        def exec_module(module, _original=original, _loader=loader):
            try:
                _original(module)
            finally:
                try:
                    del _loader.exec_module  # back to the class's method
                except AttributeError:
                    pass
            self._fire(name, module)

        loader.exec_module = exec_module
        return spec

    def _fire(self, name: str, module) -> None:
        with _LOCK:
            callbacks = self.callbacks.pop(name, [])
            if not self.callbacks:
                _remove_finder()
        for callback in callbacks:
            callback(module)


_FINDER = _PostImportFinder()
_LOCK = threading.Lock()
_forget_in_child: Callable[[], None] = lambda: None


def _insert_finder() -> None:
    global _forget_in_child
    if _FINDER not in sys.meta_path:
        _forget_in_child = forked.undo_in_child(_nothing_waits_in_child)  # first: see Patch
        sys.meta_path.insert(0, _FINDER)


def _remove_finder() -> None:
    if _FINDER in sys.meta_path:
        sys.meta_path.remove(_FINDER)
    _forget_in_child()


def _nothing_waits_in_child() -> None:
    """A forked child arms no collector when it imports TensorFlow (gpuwhy.forked); the
    lock may have been held by a thread the child does not have."""
    global _LOCK
    _LOCK = threading.Lock()
    _FINDER.callbacks.clear()
    _remove_finder()


def when_imported(name: str, callback: Callback) -> None:
    """Call ``callback(module)`` once ``name`` is imported: now if it already is."""
    with _LOCK:
        module = sys.modules.get(name)
        if module is None:
            _FINDER.callbacks.setdefault(name, []).append(callback)
            _insert_finder()
            return
    callback(module)


def cancel(callback: Callback) -> None:
    """Forget ``callback`` wherever it waits; removes the finder when nothing waits."""
    with _LOCK:
        for name in list(_FINDER.callbacks):
            _FINDER.callbacks[name] = [c for c in _FINDER.callbacks[name] if c != callback]
            if not _FINDER.callbacks[name]:
                del _FINDER.callbacks[name]
        if not _FINDER.callbacks:
            _remove_finder()
