"""The hooks on tf.data's ``OwnedIterator``: its creation (one patch, many listeners)
and ``next()`` timed (the input wait of custom loops).

Creation: ``gpuwhy run`` follows each iterator to read TF's autotune model of its
pipeline (iterator_models.py), ``gpuwhy fix`` catches the datasets a script iterates
(rewrite.py); both listen to the one patch of ``OwnedIterator._create_iterator`` here,
so the two never stack their own patches of one method.

``next()``: in ``for x, y in dataset: train_step(x, y)`` every batch is fetched by
``OwnedIterator.__next__`` (``tensorflow/python/data/ops/iterator_ops.py``) in Python,
so the time inside that call is exactly the time the loop waited for input, and the
time from one call to the next is one step. Calls made while a tf.function is being
traced build graph ops instead of fetching, and are not timed. Keras ``fit`` reads its
iterator inside the compiled step, so it never shows up here.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

import gpuwhy.forked as forked
from gpuwhy.tfapi.frames import user_location
from gpuwhy.tfapi.graph_ops import is_library_file
from gpuwhy.tfapi.patching import Patch, mark_wrapped

# emit((iterator id, the user's file:line of the loop, start, end, exhausted)): one
# tuple, so that a list's ``append`` can take it with no Python frame of its own
Read = tuple[int, object, float, float, bool]
Emit = Callable[[Read], None]


def install(
    emit: Emit, pauses: Any = None, track: Callable[[int, Any, object], None] | None = None
) -> list[Patch]:
    """The timing hook on ``OwnedIterator.__next__``. ``pauses`` (a
    :class:`~gpuwhy.collect.inprocess.hook_pauses.HookPauses`, or None) may take it out
    for a while: each iterator's first timed read is told to ``track(key, iterator,
    site)`` (which tells ``pauses`` how to count it), the first read after a pause to
    ``pauses.close``, a read made while ``pauses.wanted`` to ``pauses.pause`` once it
    returned."""
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager import context

    sites: dict[int, object] = {}
    if track is None:
        pauses = None

    perf_counter = time.perf_counter

    def make(original):
        def __next__(self):
            try:  # executing_eagerly(), read as tracing.py reads it: a call less per step
                eager = context._context._thread_local_data.is_eager
            except AttributeError:  # no Context yet
                eager = context.executing_eagerly()
            if not eager:
                return original(self)
            if pauses is not None and pauses.open and id(self) in pauses.open:
                pauses.close(self, id(self))  # this iterator's reads paused: counted first
            start = perf_counter()
            exhausted = False
            try:
                return original(self)
            except StopIteration:
                exhausted = True
                raise
            finally:
                end = perf_counter()
                key = id(self)
                site = sites.get(key)
                if site is None:  # once per iterator: the loop that reads it
                    site = sites[key] = _reader(sys._getframe(1))
                if pauses is not None and site is not _LIBRARY and key not in pauses.sources:
                    # counted at each pause (a new iterator, or one whose id a freed one had)
                    track(key, self, site)  # type: ignore[misc]
                if site is not _LIBRARY:
                    try:
                        emit((key, site, start, end, exhausted))
                    except Exception:  # noqa: BLE001 - never break the user's loop
                        pass
                    if pauses is not None:
                        pauses.recent.add(key)  # read by a hook since the last pause
                if exhausted:
                    sites.pop(key, None)
                    if pauses is not None:
                        pauses.forget(key)
                elif pauses is not None and pauses.wanted and end >= pauses.wanted_from:
                    try:
                        pauses.pause()
                    except Exception:  # noqa: BLE001 - never break the user's loop
                        pass

        return mark_wrapped(__next__, original)

    patches: list[Patch] = [Patch(iterator_ops.OwnedIterator, "__next__", make)]
    if pauses is not None:
        pauses.add(patches)

    # an iterator freed before its exhausting read was seen (its loop broke, or its end
    # came while the timing paused) leaves no loop site for the next one of its id
    def forget_site(iterator: Any) -> None:
        sites.pop(id(iterator), None)

    patches.append(on_iterator_created(end=forget_site))
    return patches


def after_each_next(callback: Callable[[], None]) -> Patch:
    """Call ``callback()`` after each eager ``next()`` on any dataset iterator, whoever
    reads it (a fix trial counts a loop's steps by them); never into the program."""
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager import context

    def make(original):
        def __next__(self):
            element = original(self)
            if context.executing_eagerly():
                try:
                    callback()
                except Exception:  # noqa: BLE001 - never break the user's loop
                    pass
            return element

        return mark_wrapped(__next__, original)

    return Patch(iterator_ops.OwnedIterator, "__next__", make)


_LIBRARY = object()  # read by Keras' own predict/evaluate loops, not by a user's loop
_TF_DIR = f"{os.sep}tensorflow{os.sep}"
_OWN_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep
_MAX_CREATOR_FRAMES = 40


def made_by_the_program() -> bool:
    """Called from an iterator-creation listener: whether the code that asked for the
    iterator (the first frame outside TensorFlow and gpuwhy: ``for x in ds``, ``zip(a,
    b)``'s caller, ``iter(ds)``) is the program's, not a library's (Keras' fit)."""
    frame: Any = sys._getframe(1)
    for _ in range(_MAX_CREATOR_FRAMES):
        if frame is None:
            return False
        name = frame.f_code.co_filename
        if _TF_DIR not in name and not name.startswith(_OWN_DIR):
            return not is_library_file(name)
        frame = frame.f_back
    return False


def _reader(caller) -> object:
    """The user's file:line of the loop, or _LIBRARY when a library reads the iterator."""
    if caller is not None and is_library_file(caller.f_code.co_filename):
        return _LIBRARY
    return user_location(skip=3) or "?"


# -- iterator creation: one patch, many listeners ----------------------------------------

Before = Callable[[Any, Any], None]  # (iterator, dataset), before TF builds the iterator
After = Callable[[Any, Any], None]  # (iterator, dataset), once it is built
End = Callable[[Any], None]  # (iterator), when it is about to be freed
# (start, end) of freeing an iterator's resource: TF's teardown of the pipeline's
# threads, on the thread that dropped the iterator (a loop's end: the program's)
Teardown = Callable[[float, float], None]


class _Listeners:
    before: list[Before] = []
    after: list[After] = []
    end: list[End] = []
    teardown: list[Teardown] = []
    patches: list[Patch] = []


class Listening(Patch):
    """Listeners registered on the creation hook; :meth:`undo` removes them, and the
    patches with the last of them."""

    def __init__(
        self,
        before: Before | None,
        after: After | None,
        end: End | None,
        teardown: Teardown | None = None,
    ) -> None:
        self.entries: list[tuple[list[Any], Any]] = [
            (group, fn)
            for group, fn in (
                (_Listeners.before, before),
                (_Listeners.after, after),
                (_Listeners.end, end),
                (_Listeners.teardown, teardown),
            )
            if fn is not None
        ]
        if not _Listeners.patches:
            _Listeners.patches = _install_creation_patches()
        for group, fn in self.entries:
            group.append(fn)
        self._forget_in_child = forked.undo_in_child(self.undo)

    def undo(self) -> None:
        self._forget_in_child()
        for group, fn in self.entries:
            if fn in group:
                group.remove(fn)
        self.entries = []
        if not (_Listeners.before or _Listeners.after or _Listeners.end or _Listeners.teardown):
            for patch in reversed(_Listeners.patches):
                patch.undo()
            _Listeners.patches = []


def on_iterator_created(
    before: Before | None = None,
    after: After | None = None,
    end: End | None = None,
    teardown: Teardown | None = None,
) -> Listening:
    """Call ``before(iterator, dataset)`` before and ``after(iterator, dataset)`` after
    each eager ``OwnedIterator`` is built (on the creating thread: the creating stack is
    still there), ``end(iterator)`` when one is about to be freed, and
    ``teardown(start, end)`` with the span its freeing took. Listeners must be quick
    and must not keep the iterator; an Exception from one is swallowed (the program's
    loop never breaks), a BaseException from ``before`` (gpuwhy fix's ``--stop-early``)
    goes through.

    The teardown: freeing the iterator's resource handle destroys TF's iterator, which
    stops the pipeline's background threads and waits for them (RootDataset's
    destructor). It runs where the last reference goes, inside the object's own
    finalisation; timed, the handle is let go in ``__del__`` instead of just after it
    (the object is being freed either way, nothing else reads the attribute), so that
    a program whose loop ends waiting there (tf.data's autotune thread sleeping out its
    period: docs/speed.md) shows where its time went."""
    return Listening(before, after, end, teardown)


def _timed_teardown(iterator: Any) -> None:
    """Let go of the iterator's resource handle here, timed, and tell the teardown
    listeners (see :func:`on_iterator_created`)."""
    try:
        handle = iterator.__dict__.pop("_iterator_resource", None)
    except Exception:  # noqa: BLE001 - a finaliser never raises
        return
    if handle is None:
        return
    start = time.perf_counter()
    del handle  # the last reference, where the loop held the only one: TF's teardown
    end = time.perf_counter()
    for listener in list(_Listeners.teardown):
        try:
            listener(start, end)
        except Exception:  # noqa: BLE001 - a finaliser never raises
            pass


def _install_creation_patches() -> list[Patch]:
    from tensorflow.python.data.ops import iterator_ops
    from tensorflow.python.eager import context

    def make_create(original: Callable) -> Callable:
        def _create_iterator(self, dataset):
            eager = context.executing_eagerly()
            if eager:
                for listener in list(_Listeners.before):
                    try:
                        listener(self, dataset)
                    except Exception:  # noqa: BLE001 - never break the user's loop
                        pass
            result = original(self, dataset)
            if eager:
                for listener in list(_Listeners.after):
                    try:
                        listener(self, dataset)
                    except Exception:  # noqa: BLE001 - never break iterator creation
                        pass
            return result

        return mark_wrapped(_create_iterator, original)

    def make_del(original: Callable | None) -> Callable:
        def __del__(self):
            eager = False
            try:
                eager = context.executing_eagerly()
                if eager:
                    for listener in list(_Listeners.end):
                        listener(self)
            except Exception:  # noqa: BLE001 - a finaliser never raises (shutdown included)
                pass
            if original is not None:
                original(self)
            if eager and _Listeners.teardown:
                _timed_teardown(self)

        return mark_wrapped(__del__, original)

    owner = iterator_ops.OwnedIterator
    patches: list[Patch] = [Patch(owner, "_create_iterator", make_create)]
    try:
        patches.append(_AddedMethod(owner, "__del__", make_del))
    except Exception:
        patches[0].undo()
        raise
    return patches


class _AddedMethod(Patch):
    """A :class:`Patch` for a method the class may not have at all (``__del__``)."""

    def __init__(self, owner: Any, name: str, make: Callable[[Any], Any]) -> None:
        if hasattr(owner, name):
            super().__init__(owner, name, make)
            return
        self.owner, self.name = owner, name
        self.had_own = False
        self.original = None
        self._put(make(None))
