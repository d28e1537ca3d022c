"""Whether a frame the profiler's Python tracer recorded (``$callback_list.py:217
_on_train_batch_end``) is a library's rather than the program's.

The tracer names a frame by its file's base name, never its folder, so a path cannot
say it is in site-packages. A frame is a library's where a file of that name, installed
in site-packages (any distribution's), in Python's standard library or in gpuwhy, defines
that function; or where the name is one of the frameworks' own files a fit's capture shows
(Keras' trainer and data adapters, JAX's dispatch), for a capture read where they are
not installed. A finding's location comes from the program's frames only: a library's
line (Keras' callback list, its data adapter) is no place the user can change.
"""

from __future__ import annotations

import functools
import os
import re
import sysconfig
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import importlib.metadata

__all__ = ["is_library_frame"]

# The frameworks' files a Keras or JAX fit's Python tracer shows, by base names no
# program is likely to take: known without the library installed where it is read
KNOWN_LIBRARY_FILES = frozenset(
    {
        # Keras 3: fit's loop, its callbacks, its data adapters and their slicing
        "array_data_adapter.py",
        "array_slicing.py",
        "base_optimizer.py",
        "callback_list.py",
        "compile_utils.py",
        "data_adapter_utils.py",
        "epoch_iterator.py",
        "generator_data_adapter.py",
        "grain_dataset_adapter.py",
        "keras_tensor.py",
        "optree_impl.py",
        "py_dataset_adapter.py",
        "reduction_metrics.py",
        "stateless_scope.py",
        "tf_dataset_adapter.py",
        "torch_data_loader_adapter.py",
        "traceback_utils.py",
        "tree_api.py",
        # JAX: jit's dispatch and its arrays
        "abstract_arrays.py",
        "api_util.py",
        "array_methods.py",
        "lax_numpy.py",
        "pjit.py",
        "pxla.py",
        "sharding_impls.py",
        "xla_bridge.py",
    }
)
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")
_GPUWHY_DIR = str(Path(__file__).resolve().parent)


def is_library_frame(function: str, file: str | None) -> bool:
    """Whether the tracer's frame ``function`` in ``file`` (a base name) runs a
    library's code. A frame without a file (``$builtins next``) is the interpreter's.
    A named function must be defined in the installed file of that name: a program's
    own ``make.py`` is not the one a syntax highlighter ships, unless it defines the
    same function; a code object without a def (``<lambda>``, ``<listcomp>``) goes by
    the file's name alone."""
    if not file:
        return True
    if file in KNOWN_LIBRARY_FILES:
        return True
    paths = _installed_files().get(file, ())
    if not paths:
        return False
    if function.startswith("<"):
        return True
    return any(function in _definitions(path) for path in paths)


@functools.cache
def _installed_files() -> dict[str, tuple[str, ...]]:
    """The Python files of site-packages, the standard library and gpuwhy, by base name:
    every installed distribution's own list (none is imported), and those folders.
    Built once, when a capture first needs it (0.05 s beside TensorFlow). importlib.metadata
    is imported here, not with the module: with what it loads, 17 ms of each run's start
    (``python -X importtime``), where few runs read a capture."""
    import importlib.metadata

    found: defaultdict[str, list[str]] = defaultdict(list)
    for distribution in importlib.metadata.distributions():
        for path in _python_files(distribution):
            if _is_installed(path):
                found[os.path.basename(path)].append(path)
    # the standard library, and gpuwhy's own files (its hooks run in the program's threads)
    for path in _files_under(sysconfig.get_paths()["stdlib"]) + _files_under(_GPUWHY_DIR):
        found[os.path.basename(path)].append(path)
    return {name: tuple(paths) for name, paths in found.items()}


def _python_files(distribution: importlib.metadata.Distribution) -> list[str]:
    """The Python files a distribution lists (its RECORD, or an egg-info's SOURCES.txt),
    as paths: read as text, for ``Distribution.files`` makes a path object of each of
    TensorFlow's tens of thousands of entries (three times as long)."""
    listing = distribution.read_text("RECORD") or distribution.read_text("SOURCES.txt") or ""
    base = str(distribution.locate_file(""))
    names = (row.split(",", 1)[0] for row in listing.splitlines())
    return [os.path.normpath(os.path.join(base, n)) for n in names if n.endswith(".py")]


def _is_installed(path: str) -> bool:
    """A file in site-packages: a program's project installed for development is listed
    where it was written, outside them, and stays the program's."""
    return any(mark in path for mark in _INSTALLED)


def _files_under(root: str) -> list[str]:
    """The Python files under ``root`` (the standard library's: threading.py,
    concurrent/futures/_base.py), without the packages installed under it."""
    files = []
    for folder, subfolders, names in os.walk(root):
        subfolders[:] = [s for s in subfolders if s not in ("site-packages", "dist-packages")]
        files += [os.path.join(folder, n) for n in names if n.endswith(".py")]
    return files


_DEFINITION = re.compile(r"(?m)^[ \t]*(?:async[ \t]+def|def|class)[ \t]+(\w+)")


@functools.cache
def _definitions(path: str) -> frozenset[str]:
    """The names the file at ``path`` defines (its defs and classes, nested ones too),
    read once however many of its frames a capture holds."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    return frozenset(_DEFINITION.findall(text))
