"""Reading Python-side details of graph ops: where the user created them, static shapes.

A graph op keeps the Python stack of its creation (``Operation.traceback``, a
``tf_stack.StackTrace`` already mapped from AutoGraph's generated code back to
the user's source). The nested bodies of a tf.function are FuncGraphs held in
``FuncGraph._functions`` (name -> AtomicFunction with ``.graph``); both are
private, hence this module. Looking an op up costs microseconds, so it is done
only for the ops a report names.
"""

from __future__ import annotations

import os
import sys
import sysconfig
from typing import Any

from gpuwhy.facts.placement import PYTHON_OPS  # kept with the facts: the rules read it too

__all__ = [
    "PYTHON_OPS",
    "body_graph",
    "creation_site",
    "imported_library_dirs",
    "is_library_file",
    "output_shape",
    "relative",
]

# The libraries whose frames are not the user's, by top-level package name.
_LIBRARY_PACKAGES = (
    "tensorflow",
    "keras",
    "tf_keras",
    "tensorflow_probability",
    # TF's companions (tf.summary's ops are written in tensorboard's files)
    "tensorboard",
    "tensorflow_datasets",
    "tensorflow_hub",
    "tensorflow_text",
    "tensorflow_addons",
    "keras_hub",
    "keras_nlp",
    "keras_cv",
    "absl",
    "tree",
    "optree",
    "numpy",
    # a notebook's machinery, which runs the user's cells (%%gpuwhy)
    "IPython",
    "ipykernel",
)
# In an installed location their folder names mark them; elsewhere (a user's project in a
# folder named "keras" or "tensorflow") only the folder the package was imported from does.
_LIBRARY_MARKERS = tuple(f"{os.sep}{name}{os.sep}" for name in _LIBRARY_PACKAGES)
# the standard library's context managers and wrappers, whichever Python's they are
_STDLIB_FILES = (f"{os.sep}contextlib.py", f"{os.sep}functools.py")


_GPUWHY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# the standard library (threading.py runs a MirroredStrategy's replica functions): its
# folder, less the packages installed under it in a Python without a virtual environment
_STDLIB_DIRS = tuple(
    {
        path + os.sep
        for key in ("stdlib", "platstdlib")
        for path in (sysconfig.get_paths()[key], os.path.realpath(sysconfig.get_paths()[key]))
    }
)
_INSTALLED = (f"{os.sep}site-packages{os.sep}", f"{os.sep}dist-packages{os.sep}")


# IPython's name for a cell's code outside a Jupyter kernel (``<ipython-input-3-8f2a...>``;
# ipykernel names it as a file: /tmp/ipykernel_<pid>/<hash>.py): the user's, not a library's.
NOTEBOOK_CELL = "<ipython-input-"


def is_library_file(filename: str) -> bool:
    """Frames inside TensorFlow, Keras, gpuwhy, the standard library and any installed
    package (matplotlib, pandas: a GC pause a figure's allocation set off is no place the
    user can change) are not the user's, nor is other generated code (``<string>``); a
    notebook cell is. An installed package is the user's where the script run is in it
    (``gpuwhy run .../site-packages/trainer/main.py``)."""
    if filename.startswith("<"):
        return not filename.startswith(NOTEBOOK_CELL)
    if "__autograph_generated" in filename:
        return True
    if filename.endswith((f"{os.sep}gpuwhy", f"{os.sep}gpuwhy.exe")):  # the console script
        return True
    if filename.startswith(_GPUWHY_DIR):  # not a marker: a user's checkout may be named gpuwhy
        return True
    installed = any(m in filename for m in _INSTALLED)
    if (filename.startswith(_STDLIB_DIRS) and not installed) or filename.endswith(_STDLIB_FILES):
        return True
    if installed:
        if any(marker in filename for marker in _LIBRARY_MARKERS):
            return True
        main_package = _installed_package(_main_file())
        return main_package is None or _installed_package(filename) != main_package
    return filename.startswith(imported_library_dirs())


def _main_file() -> str:
    """The file of the script being run (``__main__``'s), '' in a notebook or a REPL."""
    main = sys.modules.get("__main__")
    return str(getattr(main, "__file__", None) or "")


def _installed_package(filename: str) -> str | None:
    """The folder of the installed package (or module) ``filename`` belongs to:
    ``.../site-packages/trainer`` for ``.../site-packages/trainer/loop.py``; None
    outside site-packages and dist-packages."""
    for mark in _INSTALLED:
        at = filename.find(mark)
        if at >= 0:
            top = filename[at + len(mark) :].split(os.sep, 1)[0]
            return filename[: at + len(mark)] + top.removesuffix(".py")
    return None


_library_dirs_cache: dict[tuple, tuple[str, ...]] = {}


def imported_library_dirs() -> tuple[str, ...]:
    """The folders the library packages were imported from (also outside site-packages:
    a ``pip install --target`` folder on PYTHONPATH, a source checkout); recomputed only
    when one of them is newly imported."""
    modules = tuple(sys.modules.get(name) for name in _LIBRARY_PACKAGES)
    key = tuple(id(m) for m in modules)
    cached = _library_dirs_cache.get(key)
    if cached is None:
        dirs = []
        for module in modules:
            for path in getattr(module, "__path__", None) or ():
                dirs.append(os.path.join(os.path.abspath(path), ""))
                dirs.append(os.path.join(os.path.realpath(path), ""))
        cached = tuple(dict.fromkeys(dirs))
        _library_dirs_cache.clear()
        _library_dirs_cache[key] = cached
    return cached


def relative(filename: str, line: int) -> str:
    """``file:line`` with the path relative to the working directory when under it."""
    try:
        rel = os.path.relpath(filename)
        if not rel.startswith(".."):
            filename = rel
    except ValueError:  # another drive on Windows
        pass
    return f"{filename}:{line}"


def body_graph(graphs: dict[str, Any], function: str) -> Any | None:
    """The FuncGraph of the top function ("") or of a nested body, when TF kept it."""
    entry = graphs.get(function)
    if entry is None:
        return None
    if function == "":
        return entry
    try:
        return entry.graph  # AtomicFunction: None when built from a FunctionDef only
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
        return None


def _operation(graph: Any, name: str) -> Any | None:
    if graph is None:
        return None
    try:
        return graph.get_operation_by_name(name)
    except (KeyError, ValueError):
        return None


def creation_site(graph: Any, name: str) -> str | None:
    """``file:line`` of the innermost user frame that created op ``name``."""
    op = _operation(graph, name)
    if op is None:
        return None
    try:
        frames = op.traceback or ()  # None for ops loaded from a SavedModel
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade, never break the program
        return None
    for frame in reversed(frames):
        if not is_library_file(frame.filename):
            return relative(frame.filename, frame.lineno)
    return None


_TF_DIR = f"{os.sep}tensorflow{os.sep}"
# Inside TF's own tree, these parts build ops for the user as a library does (Keras 2),
# and make their own device choices: tf.summary moves the value it writes to the host
# with a tf.device block of its own (ops/summary_ops_v2.py), not one of the user's.
# (Operation._device_assignments cannot tell whose a block is: through tf.device it
# records TF's own framework/ops.py as the place the block was opened.)
_TF_LIBRARY_PARTS = (
    f"{os.sep}python{os.sep}keras{os.sep}",
    f"{os.sep}tf_keras{os.sep}",
    f"{os.sep}ops{os.sep}summary_ops_v2.py",
)


def created_in_library(graph: Any, name: str) -> bool:
    """Op ``name`` was created by a library's code (Keras, a preprocessing layer), not by
    the user's: the first frame of its creation traceback outside TensorFlow's own
    modules is a library's. Such an op's device request (a ``tf.device`` block in
    Keras' TextVectorization, say) is the library's choice, not one in the user's code."""
    op = _operation(graph, name)
    if op is None:
        return False
    try:
        frames = op.traceback or ()
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: degrade
        return False
    for frame in reversed(frames):
        filename = frame.filename
        if _TF_DIR in filename and not any(p in filename for p in _TF_LIBRARY_PARTS):
            continue  # TF building the op
        if "__autograph_generated" in filename or filename.startswith(_GPUWHY_DIR):
            continue
        return is_library_file(filename)
    return False


def _static_shape(tensors, index: int) -> tuple[int | None, ...] | None:
    if index >= len(tensors):
        return None
    shape = tensors[index].shape
    return None if shape.rank is None else tuple(shape.as_list())


def output_shape(graph: Any, name: str, index: int) -> tuple[int | None, ...] | None:
    """Static shape of output ``index`` of op ``name``; None when the rank is unknown."""
    op = _operation(graph, name)
    return None if op is None else _static_shape(op.outputs, index)


def input_shape(graph: Any, name: str, index: int) -> tuple[int | None, ...] | None:
    """Static shape of input ``index`` of op ``name``; None when the rank is unknown."""
    op = _operation(graph, name)
    return None if op is None else _static_shape(op.inputs, index)


def input_producer(graph: Any, name: str, index: int) -> tuple[str, str] | None:
    """(type, name) of the op whose output is input ``index`` of op ``name``."""
    op = _operation(graph, name)
    if op is None or index >= len(op.inputs):
        return None
    producer = op.inputs[index].op
    return producer.type, producer.name


# Reductions TF's constant folding in Python (tensor_util.constant_value) does not do:
# Keras' RNN loop bounds its iterations by tf.reduce_max of the static sequence length.
_REDUCTIONS = {"Max": "max", "Min": "min", "Sum": "sum", "Prod": "prod"}


def static_int(graph: Any, name: str, index: int) -> int | None:
    """The value of output ``index`` of op ``name`` where the graph fixes it to one
    integer (a constant, or a reduction of constants); None otherwise."""
    op = _operation(graph, name)
    if op is None or index >= len(op.outputs):
        return None
    value = _static_value(op.outputs[index])
    try:
        return int(value) if value is not None and value.size == 1 else None
    except (TypeError, ValueError):
        return None


def _static_value(tensor: Any, depth: int = 0) -> Any:
    import numpy as np
    from tensorflow.python.framework import tensor_util

    try:
        value = tensor_util.constant_value(tensor)
    except Exception:  # noqa: BLE001 - a private TF API may raise anything: unknown
        value = None
    if value is not None or depth > 4:
        return None if value is None else np.asarray(value)
    op = tensor.op
    if op.type in _REDUCTIONS and len(op.inputs) == 2:
        operand = _static_value(op.inputs[0], depth + 1)
        axes = _static_value(op.inputs[1], depth + 1)
        if operand is not None and axes is not None:
            reduce = getattr(np, _REDUCTIONS[op.type])
            return np.asarray(reduce(operand, axis=tuple(np.atleast_1d(axes).tolist()) or None))
    return None
