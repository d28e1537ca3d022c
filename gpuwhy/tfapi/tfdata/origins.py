"""Where each dataset object was created: the hook that records it on every dataset made
from now on (the user's file:line, or the call into the library that built it for the
user, and the user's lines above it), and the reading of that record.

Its own module because every other reader of tf.data's objects asks it: dataset_chain.py (the
chain as written), stages.py (the chain as fixes plan on it) and the distribute hooks.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.graph_ops import NOTEBOOK_CELL, is_library_file, relative
from gpuwhy.tfapi.patching import Patch, mark_wrapped
from gpuwhy.tfapi.tfdata.generator_gaps import GeneratorGaps

ORIGIN_ATTR = "_gpuwhy_origin"  # (file or None, line, made by a library, callers)
GENERATOR_ATTR = "_gpuwhy_generator"  # the callable given to from_generator
GAPS_ATTR = "_gpuwhy_generator_gaps"  # its consumer's gaps, timed (generator_gaps.py)
_MAX_FRAMES = 80

# -- where a dataset was created ---------------------------------------------------

_TF_DIR_MARK = f"{os.sep}tensorflow{os.sep}"
# Inside TF, these build datasets *for* the user (rebatching, sharding): a library.
_TF_LIBRARY_PARTS = (
    f"{os.sep}python{os.sep}distribute{os.sep}",
    f"{os.sep}python{os.sep}keras{os.sep}",
    f"{os.sep}dtensor{os.sep}",
)
# ... and these functions of tf.data's own build a whole pipeline for the user from files
# (tensorflow/python/data/experimental/ops/readers.py): its interleave, maps and shuffle
# are the helper's, not calls the program wrote (a template of them named an
# `<dataset>.interleave(filename_to_dataset)` in TF's custom training walkthrough)
_TF_HELPERS = frozenset(
    {
        "make_csv_dataset_v1",
        "make_csv_dataset_v2",
        "make_batched_features_dataset_v1",
        "make_batched_features_dataset_v2",
        "make_tf_record_dataset",
    }
)
_GPUWHY_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_SKIP, _LIBRARY, _USER = 0, 1, 2
_FRAME_KIND: dict[Any, int] = {}


def _frame_kind(code: Any) -> int:
    """TF itself and gpuwhy are skipped (tf.data calls itself, and traces user
    functions through TF's function machinery); Keras and other libraries that build
    datasets on the user's behalf are "library"; anything else is the user's."""
    kind = _FRAME_KIND.get(code)
    if kind is None:
        filename = code.co_filename
        generated = filename.startswith("<") and not filename.startswith(NOTEBOOK_CELL)
        if "__autograph_generated" in filename or generated:
            kind = _SKIP
        elif _TF_DIR_MARK in filename and code.co_name in _TF_HELPERS:
            kind = _LIBRARY
        elif _TF_DIR_MARK in filename and not any(p in filename for p in _TF_LIBRARY_PARTS):
            kind = _SKIP
        elif is_library_file(filename):
            skip = filename.endswith(("functools.py", "contextlib.py")) or filename.startswith(
                _GPUWHY_DIR
            )
            kind = _SKIP if skip else _LIBRARY
        else:
            kind = _USER
        _FRAME_KIND[code] = kind
    return kind


def _creation_site(frame: Any) -> tuple:
    """(user's file, line, made by a library, the callers) for a dataset being created
    now; the path is made relative only when read (``os.path.relpath`` costs
    microseconds). The callers are the user's lines that led to the creating function,
    innermost first (see :func:`_callers`): they tell apart the pipelines one helper
    builds."""
    by_library = False
    for _ in range(_MAX_FRAMES):
        if frame is None:
            break
        kind = _frame_kind(frame.f_code)
        if kind == _USER:
            return frame.f_code.co_filename, frame.f_lineno, by_library, _callers(frame)
        if kind == _LIBRARY:
            by_library = True
        frame = frame.f_back
    return None, 0, by_library, ()


MAX_CALLERS = 8  # user frames kept above the one that created a dataset


def _callers(frame: Any) -> tuple[tuple[str, int], ...]:
    """The user's lines that called ``frame``'s function, innermost first, skipping TF
    and gpuwhy frames (a tf.function tracing the helper); up to the module's line or a
    library's frame. A ``make_dataset(split)`` helper that calls its own ``_finish(ds)``
    (where ``batch`` is) has the same first caller for every split: the line that tells
    train from test may be further out, so the chain is kept, not one line."""
    out: list[tuple[str, int]] = []
    while frame.f_code.co_name != "<module>" and len(out) < MAX_CALLERS:
        outer = frame.f_back
        for _ in range(_MAX_FRAMES):
            if outer is None:
                return tuple(out)
            kind = _frame_kind(outer.f_code)
            if kind == _USER:
                break
            if kind == _LIBRARY:
                return tuple(out)
            outer = outer.f_back
        else:
            return tuple(out)
        out.append((outer.f_code.co_filename, outer.f_lineno))
        frame = outer
    return tuple(out)


@dataclass(frozen=True)
class Origin:
    """Where a dataset object was created."""

    location: str | None  # the user's file:line (for a library-made one, the call into it)
    by_library: bool = False  # built by Keras or another library, not written by the user
    # the user's lines that called the function that built it, innermost first
    callers: tuple[str, ...] = ()


def origin(dataset: Any) -> Origin | None:
    """The creation site the hook recorded, or None (created before the hook)."""
    value = getattr(dataset, ORIGIN_ATTR, None)
    if not isinstance(value, tuple) or len(value) != 4:
        return None
    filename, line, by_library, caller = value
    if not isinstance(caller, tuple):
        return None
    return Origin(
        relative(filename, line) if filename else None,
        by_library,
        tuple(relative(*c) for c in caller),
    )


def install_origin_hooks() -> list[Patch]:
    """Make every dataset created from now on remember its creation site, and every
    ``from_generator`` dataset its generator. Undo the returned patches to restore TF."""
    from tensorflow.python.data.ops import dataset_ops, from_generator_op

    def make_init(original: Callable) -> Callable:
        getframe = sys._getframe

        def __init__(self, variant_tensor):
            original(self, variant_tensor)
            try:
                if ORIGIN_ATTR not in self.__dict__:
                    self.__dict__[ORIGIN_ATTR] = _creation_site(getframe(1))
            except Exception:  # noqa: BLE001 - never break dataset creation
                pass

        __init__.__doc__ = original.__doc__
        return mark_wrapped(__init__, original)

    def make_from_generator(original: Callable) -> Callable:
        def _from_generator(generator, *args, **kwargs):
            gaps: GeneratorGaps | None = None
            given = generator
            try:
                if callable(generator):  # TF's own check: one that is not is its error
                    gaps = GeneratorGaps()
                    given = gaps.wrap(generator)
            except Exception:  # noqa: BLE001 - never break dataset creation
                gaps, given = None, generator
            dataset = original(given, *args, **kwargs)
            try:
                dataset.__dict__[GENERATOR_ATTR] = generator
                if gaps is not None:
                    dataset.__dict__[GAPS_ATTR] = gaps
            except Exception:  # noqa: BLE001
                pass
            return dataset

        return mark_wrapped(_from_generator, original)

    init = Patch(dataset_ops.DatasetV2, "__init__", make_init)
    try:
        generator = Patch(from_generator_op, "_from_generator", make_from_generator)
    except Exception:
        init.undo()
        raise
    return [init, generator]
