"""Keep gpuwhy's own frames out of TensorFlow's stacks, the way TF keeps out its own.

``gpuwhy run`` executes the script inside gpuwhy (the ``gpuwhy`` launcher, cli.py and
modes/run/script.py below it; hooks such as tracing.py between it and TF), and TF records the
whole Python stack of every op it creates. Without this, a graph error's "defined at"
list names gpuwhy's files, which ``python script.py`` never shows.

What TF 2.21 uses to hide frames, and what is extended here (all private, hence this
one module; each part is optional and a missing one is reported, never raised):

* ``tf_stack._source_filter_stacks`` (tensorflow/python/util/tf_stack.py): per thread, a
  stack of ``StackTraceFilter`` s whose top one's file set ``extract_stack`` hands to
  C++ for every op (``ops._create_c_op``). Frames from those files are left out of
  ``op.traceback``, of ``get_user_frames()`` (error_interpolation's "defined at") and
  of the runtime's "Detected at node ... defined at" message. AutoGraph hides its own
  module by pushing a ``CurrentModuleFilter``, which also hides its parent's files. The
  bottom of every thread's stack, a ``SentinelFilter`` that hides nothing, is replaced
  by one that hides gpuwhy's files. The C++ side compares whole file names, so the set
  lists every file of the package, not a prefix.
* ``traceback_utils._EXCLUDED_PATHS``: path substrings that ``filter_traceback`` drops
  from Python tracebacks of errors raised through TF's API (tracing.py's hook runs
  inside ``Function.__call__``, below TF's filter).
* ``error_interpolation._FRAMEWORK_PATH_PREFIXES``: prefixes of files counted as TF's
  own when it picks an op's defining frame (for ops recorded before this ran, and the
  stacks saved with a SavedModel).

TF's third rule, the C++ ``IsInternalFrameForFilename`` ("tensorflow/python" in the
path), cannot be extended and is not needed.
"""

from __future__ import annotations

import importlib
import os
import sys
import threading
from collections.abc import Callable
from typing import Any

from gpuwhy.tfapi.frames import current_frames
from gpuwhy.tfapi.patching import Patch

__all__ = ["HiddenFrames", "gpuwhy_files", "hide_gpuwhy_frames"]

_PACKAGE_DIR = os.path.dirname(os.path.dirname(__file__))


class HiddenFrames:
    """What :func:`hide_gpuwhy_frames` changed. ``reason``: what could not be hidden and
    why (None when all of it was); :meth:`undo` puts TF's objects back."""

    def __init__(self) -> None:
        self.reason: str | None = None
        self.parts: list[str] = []  # what is hidden: "op stacks", "Python tracebacks", ...
        self._undo: list[Callable[[], None]] = []
        self._keras: set[str] = set()  # Keras' filters hidden from (hide_from_keras)

    @property
    def hidden(self) -> bool:
        """Whether op stacks leave gpuwhy out: the part a user sees in graph errors."""
        return "op stacks" in self.parts

    def undo(self) -> None:
        """Put back what this changed; safe to call twice. Op stacks recorded meanwhile
        keep gpuwhy hidden: they hold the file set itself, which is left as it is."""
        steps, self._undo, self.parts = self._undo, [], []
        self._keras = set()
        for step in reversed(steps):
            try:
                step()
            except Exception as error:  # noqa: BLE001 - undoing must not fail the run's end
                self._missed("undo", error)

    def hide_from_keras(self) -> None:
        """The same for Keras' own filter (``keras.src.utils.traceback_utils``, a copy of
        TF's), once Keras is imported: a gpuwhy frame Keras kept made it drop the
        fallback that keeps the innermost frame where it filters out every other, and a
        fit's error lost its last line ("keras/src/backend/tensorflow/core.py, line
        154, in convert_to_tensor") against python's. Never raises."""
        if os.environ.get("GPUWHY_DEBUG"):
            return
        for name in ("keras.src.utils.traceback_utils", "tf_keras.src.utils.traceback_utils"):
            module = sys.modules.get(name)
            if module is None or name in self._keras:
                continue  # not imported, or hidden from already (keras, then tf_keras)
            try:
                self._undo.append(_excluded(module, _package_dirs()))
                self._keras.add(name)
                self.parts.append("Keras tracebacks")
            except Exception as error:  # noqa: BLE001 - a Keras without these private names
                self._missed(f"hiding from {name}", error)

    def _missed(self, what: str, error: BaseException) -> None:
        why = f"{what} failed: {type(error).__name__}: {error}"
        self.reason = why if self.reason is None else f"{self.reason}; {why}"


def hide_gpuwhy_frames() -> HiddenFrames:
    """Hide gpuwhy's files from the stacks TF records and prints from now on. Call it once
    TensorFlow is imported; it never raises (``reason`` says what a TF lacked)."""
    result = HiddenFrames()
    if os.environ.get("GPUWHY_DEBUG"):
        result.reason = "GPUWHY_DEBUG is set: gpuwhy's frames are left in TF's stacks"
        return result
    files = gpuwhy_files()
    dirs = _package_dirs()
    for what, hide in (
        ("op stacks", lambda: _hide_from_op_stacks(files)),
        ("Python tracebacks", lambda: _hide_from_tracebacks(dirs)),
        ("defining frames", lambda: _hide_from_defining_frames(dirs)),
    ):
        try:
            result._undo.append(hide())
            result.parts.append(what)
        except Exception as error:  # noqa: BLE001 - a TF without these private names
            result._missed(f"hiding from {what}", error)
    return result


def gpuwhy_files() -> frozenset[str]:
    """The file names of gpuwhy's code as Python records them in code objects, plus the
    launcher below gpuwhy's runner (the ``gpuwhy`` console script, or runpy for
    ``python -m gpuwhy``): every frame under the user's script when gpuwhy runs it."""
    files: set[str] = set()
    for directory in _package_dirs():
        for root, subdirs, names in os.walk(directory):
            subdirs[:] = [d for d in subdirs if d != "__pycache__"]
            files.update(os.path.join(root, name) for name in names if name.endswith(".py"))
    files.update(os.path.realpath(f) for f in list(files))
    return frozenset(files | _launcher_files())


def _package_dirs() -> list[str]:
    """gpuwhy's directory as imports name it, and resolved (a symlinked checkout)."""
    return sorted({_PACKAGE_DIR, os.path.abspath(_PACKAGE_DIR), os.path.realpath(_PACKAGE_DIR)})


def _launcher_files() -> set[str]:
    """Files on the main thread's stack below gpuwhy's runner. Nothing when the runner is
    not there: a Session started from the user's own script must not hide that script."""
    ident = threading.main_thread().ident  # None only for a thread not yet started
    frame = current_frames().get(ident) if ident is not None else None
    stack: list[str] = []
    while frame is not None:
        stack.append(frame.f_code.co_filename)
        frame = frame.f_back
    stack.reverse()  # outermost first
    runner = {
        os.path.realpath(os.path.join(d, "modes", "run", "script.py")) for d in _package_dirs()
    }
    for depth, filename in enumerate(stack):
        if os.path.realpath(filename) in runner:
            return set(stack[:depth])
    return set()


def _hide_from_op_stacks(files: frozenset[str]) -> Callable[[], None]:
    """Put a filter hiding ``files`` at the bottom of every thread's filter stack (and of
    the stacks of threads yet to record an op); returns the undo."""
    tf_stack = importlib.import_module("tensorflow.python.util.tf_stack")
    stacks = tf_stack._source_filter_stacks
    sentinel = tf_stack.SentinelFilter
    hiding = _hiding_filter(tf_stack.StackTraceFilter, files)
    original_factory = stacks.default_factory
    if not callable(original_factory) or not _is_bottom(original_factory()[0], sentinel):
        raise TypeError("tf_stack._source_filter_stacks is not what TF 2.16-2.21 builds")

    def bottom() -> list:
        return [hiding]

    replaced: dict[Any, Any] = {}
    stacks.default_factory = bottom
    for key, stack in list(stacks.items()):
        if stack and _is_bottom(stack[0], sentinel):
            replaced[key], stack[0] = stack[0], hiding

    def undo() -> None:
        if stacks.default_factory is bottom:
            stacks.default_factory = original_factory
        for key, stack in list(stacks.items()):
            if stack and stack[0] is hiding:
                stack[0] = replaced[key] if key in replaced else original_factory()[0]

    return undo


def _is_bottom(transform: Any, sentinel: type) -> bool:
    """TF's SentinelFilter, or the filter an earlier (still active) Session put there."""
    return isinstance(transform, sentinel) or getattr(transform, "gpuwhy_hides", False)


def _hiding_filter(base: type, files: frozenset[str]) -> Any:
    """A ``StackTraceFilter`` that is never entered: it sits where TF's SentinelFilter
    sits, and the filters TF pushes above it add its files to theirs."""

    class GpuwhyFilter(base):
        gpuwhy_hides = True

        def __init__(self) -> None:
            super().__init__()
            self.parent = None
            self.update()  # fills the C++ file set once; it never changes

        def get_filtered_filenames(self) -> frozenset[str]:
            return files

    return GpuwhyFilter()


def _hide_from_tracebacks(dirs: list[str]) -> Callable[[], None]:
    """Add gpuwhy's directory to the paths ``filter_traceback`` drops; returns the undo."""
    return _excluded(importlib.import_module("tensorflow.python.util.traceback_utils"), dirs)


def _excluded(module: Any, dirs: list[str]) -> Callable[[], None]:
    """``dirs`` added to a traceback filter's ``_EXCLUDED_PATHS`` (TF's, Keras'); the undo."""
    excluded = module._EXCLUDED_PATHS
    if not isinstance(excluded, tuple) or not all(isinstance(p, str) for p in excluded):
        raise TypeError("traceback_utils._EXCLUDED_PATHS is not a tuple of paths")
    patch = Patch(module, "_EXCLUDED_PATHS", lambda old: (*old, *(d + os.sep for d in dirs)))
    return patch.undo


def _hide_from_defining_frames(dirs: list[str]) -> Callable[[], None]:
    """Count gpuwhy's files as framework files when TF picks the frame that defined an
    op; returns the undo."""
    module = importlib.import_module("tensorflow.python.framework.error_interpolation")
    prefixes = module._FRAMEWORK_PATH_PREFIXES
    if not isinstance(prefixes, list) or not all(isinstance(p, str) for p in prefixes):
        raise TypeError("error_interpolation._FRAMEWORK_PATH_PREFIXES is not a list of paths")
    patch = Patch(
        module, "_FRAMEWORK_PATH_PREFIXES", lambda old: [*old, *(d + os.sep for d in dirs)]
    )
    return patch.undo
