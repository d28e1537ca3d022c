"""A child the watched program forks runs as it would under plain ``python``.

``os.fork`` (multiprocessing's ``fork`` start method, the default on Linux up to Python
3.13: ``Pool``, ``Process``, Keras' ``PyDataset(use_multiprocessing=True)`` workers)
copies the whole process, gpuwhy included, but none of its threads. What gpuwhy put into
the process would then act in the child, where nothing ever reports:

- its SIGTERM handler (gpuwhy.modes.run.script turns SIGTERM into ``Terminated``, so
  that the parent writes its report first): a worker that ``Pool.terminate()`` or
  ``Process.terminate()`` stops would print a traceback from gpuwhy's runner and exit 1
  instead of dying of SIGTERM (exit code -15);
- its hooks (patched TF and Keras methods, the eager op callback, the import hook that
  arms the collectors when TF is imported): work for no report, an op callback left on
  for good (no window thread in the child switches it off), and locks that a collector
  thread of the parent may have held at the fork, which no thread of the child releases;
- the live metrics server's listening socket, which would keep the port taken after
  the parent ended.

So whatever gpuwhy installs in the process says here how to take it out of a forked
child (:func:`undo_in_child`), and forgets that when it is undone in the process itself.
At every fork the child undoes them all, newest first, before any of the program's code
runs again, taking no lock and never raising. Children started by ``spawn`` or
``forkserver``, and subprocesses, are new interpreters: nothing of gpuwhy's is in them.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable

_UNDO: dict[int, Callable[[], None]] = {}  # in the order installed
_KEYS = itertools.count()


def undo_in_child(undo: Callable[[], None]) -> Callable[[], None]:
    """Run ``undo()`` in every child forked from now on; returns the function that
    forgets it again (call it when the thing is undone in this process)."""
    key = next(_KEYS)
    _UNDO[key] = undo

    def forget() -> None:
        _UNDO.pop(key, None)

    return forget


def _in_child() -> None:
    undos = list(_UNDO.values())
    _UNDO.clear()
    for undo in reversed(undos):
        try:
            undo()
        except Exception:  # noqa: BLE001 - the child goes on as Python's would
            pass


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_in_child)
