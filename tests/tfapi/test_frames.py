"""Reading a running frame's variables keeps none of them alive (frames.frame_values)."""

import gc
import sys
import threading
import weakref

from gpuwhy.tfapi.frames import current_frames, frame_values


class Big:
    """Stands in for a tf.data iterator: something whose lifetime the program decides."""


def test_a_value_read_off_a_frame_dies_when_the_frame_rebinds_its_variable():
    seen = {}

    def reader():
        seen.update(frame_values(sys._getframe(1), ("x", "batch_size", "absent")))

    def fit():
        x = Big()
        batch_size = 8
        ref = weakref.ref(x)
        reader()
        x = None  # the program lets go of it: nothing gpuwhy read may keep it
        seen.clear()
        gc.collect()
        return ref, x, batch_size

    ref, _, _ = fit()
    assert ref() is None


def test_the_frame_s_own_variables_are_untouched_by_the_read():
    def fit():
        x, batch_size = Big(), 16
        values = frame_values(sys._getframe(0), ("x", "batch_size"))
        assert values["x"] is x and values["batch_size"] == 16
        assert locals()["batch_size"] == 16  # a later read rebuilds the view
        return batch_size

    assert fit() == 16


def test_a_module_s_namespace_is_never_emptied():
    namespace = {"__name__": "m"}
    exec(  # a module-level frame: f_locals is the namespace itself
        "import sys\nfrom gpuwhy.tfapi.frames import frame_values\n"
        "kept = 3\nvalues = frame_values(sys._getframe(0), ('kept',))\n",
        namespace,
    )
    assert namespace["kept"] == 3 and namespace["values"] == {"kept": 3}


def test_current_frames_runs_with_the_collector_off_and_restores_it(monkeypatch):
    """sys._current_frames() holds the runtime's thread-state lock while it makes frame
    objects (before 3.12): a collection there runs gc.callbacks, which can hand the GIL
    to a thread that waits for that lock holding it, and the program hangs (CPython
    gh-106883: a heap census did, in a program reading a tf.data generator)."""
    seen = []
    real = sys._current_frames

    def recording():
        seen.append(gc.isenabled())
        return real()

    monkeypatch.setattr(sys, "_current_frames", recording)
    assert gc.isenabled()
    frames = current_frames()
    assert seen == [False] and gc.isenabled()
    assert threading.get_ident() in frames
    gc.disable()
    try:
        current_frames()
        assert not gc.isenabled()  # a program's own gc.disable() is left as it was
    finally:
        gc.enable()
