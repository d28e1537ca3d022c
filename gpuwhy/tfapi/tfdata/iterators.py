"""``next()`` on tf.data iterators from Python, timed: the input wait of custom loops.

In ``for x, y in dataset: train_step(x, y)`` every batch is fetched by
``OwnedIterator.__next__`` (``tensorflow/python/data/ops/iterator_ops.py``) in Python,
so the time inside that call is exactly the time the loop waited for input, and the
time from one call to the next is one step. Calls made while a tf.function is being
traced build graph ops instead of fetching, and are not timed. Keras ``fit`` reads its
iterator inside the compiled step, so it never shows up here.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.graph_ops import is_library_file
from gpuwhy.tfapi.patching import Patch

# emit(iterator id, the user's file:line of the loop, start, end, exhausted)
Emit = Callable[[int, object, float, float, bool], None]


def install(emit: Emit) -> list[Patch]:
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager import context

    sites: dict[int, object] = {}

    def make(original):
        def __next__(self):
            if not context.executing_eagerly():
                return original(self)
            start = time.perf_counter()
            exhausted = False
            try:
                return original(self)
            except StopIteration:
                exhausted = True
                raise
            finally:
                end = time.perf_counter()
                key = id(self)
                site = sites.get(key)
                if site is None:  # once per iterator: the loop that reads it
                    site = sites[key] = _reader(sys._getframe(1))
                if site is not _LIBRARY:
                    try:
                        emit(key, site, start, end, exhausted)
                    except Exception:  # noqa: BLE001 - never break the user's loop
                        pass
                if exhausted:
                    sites.pop(key, None)

        __next__.__wrapped__ = original
        return __next__

    return [Patch(iterator_ops.OwnedIterator, "__next__", make)]


_LIBRARY = object()  # read by Keras' own predict/evaluate loops, not by a user's loop


def _reader(caller) -> object:
    """The user's file:line of the loop, or _LIBRARY when a library reads the iterator."""
    if caller is not None and is_library_file(caller.f_code.co_filename):
        return _LIBRARY
    return user_location(skip=3) or "?"
