"""gpuwhy's own TensorFlow profiler session, written as an XProf capture, that gives way to
the program's.

TF runs one profiler session per process: a second ``start`` raises
``AlreadyExistsError``. ``tf.profiler.experimental.start`` keeps its session in a module
global (profiler_v2._profiler); gpuwhy's session is a ``ProfilerSession`` of its own
(the pybind class behind it, private API), so the program's ``start`` finds no session
of its own kind and calls into TF, where ours would make it fail. :func:`install_give_way`
therefore wraps ``start`` (the module's function, and the name the public API exports,
which Keras' TensorBoard callback and ``tf.profiler.experimental.Profile`` call): before
the program's session starts, gpuwhy's stops and writes what it has.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from gpuwhy.tfapi.patching import Patch, mark_wrapped


class OwnSession:
    """One capture into ``logdir`` (a TensorBoard log directory): ``start`` raises where
    another session runs; ``stop`` writes ``logdir/plugins/profile/<run>/<host>.xplane.pb``
    once, whoever calls it first (the capture's thread, or the program's ``start``).
    Starting and stopping hold one lock: a ``stop`` from the program's thread while the
    session starts (CUPTI's set-up can take seconds) waits for it and stops it, so the
    program's own session never finds gpuwhy's still on."""

    def __init__(self, logdir: str, options: dict[str, int]) -> None:
        self.logdir, self.options = logdir, options
        self._session: Any = None
        self._lock = threading.Lock()

    def start(self) -> None:
        from tensorflow.python.profiler.internal import _pywrap_profiler

        with self._lock:
            session = _pywrap_profiler.ProfilerSession()
            session.start(self.logdir, dict(self.options))
            self._session = session

    @property
    def running(self) -> bool:
        return self._session is not None

    def stop(self) -> bool:
        """Stop and write the capture; False where it was not running (or was stopped)."""
        with self._lock:
            session, self._session = self._session, None
            if session is None:
                return False
            session.export_to_tb()
            return True


def install_give_way(give_way: Callable[[], None]) -> list[Patch]:
    """``give_way()`` before every ``tf.profiler.experimental.start`` the program makes."""
    from tensorflow.python.profiler import profiler_v2

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def start(*args: Any, **kwargs: Any) -> Any:
            give_way()
            return original(*args, **kwargs)

        return mark_wrapped(start, original)

    patches = [Patch(profiler_v2, "start", make)]
    try:
        import tensorflow as tf

        api = tf.profiler.experimental
    except (ImportError, AttributeError):  # a TF without the public name
        return patches
    if getattr(api, "start", None) is patches[0].original:
        patches.append(Patch(api, "start", make))
    return patches
