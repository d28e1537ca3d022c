"""One hook on iterator creation, many listeners: ``gpuwhy run``'s pipeline collector and
``gpuwhy fix``'s capture listen to the same patch of ``OwnedIterator._create_iterator``,
in order, and TF's own method is back once the last of them stops."""

from __future__ import annotations

import pytest

tf = pytest.importorskip("tensorflow")

from tensorflow.python.data.ops import iterator_ops  # noqa: E402

from gpuwhy.tfapi.tfdata import (  # noqa: E402
    iterator_models,
    stages,
)


def test_two_listeners_share_one_patch_and_tf_s_method_comes_back():
    original = iterator_ops.OwnedIterator.__dict__["_create_iterator"]
    seen: list[str] = []
    run_side = iterator_models.install_iterator_hooks(lambda it, ds: seen.append("after"))
    patched = iterator_ops.OwnedIterator.__dict__["_create_iterator"]
    fix_side = stages.install_iterator_capture(lambda ds, where: seen.append(f"before {where}"))
    assert iterator_ops.OwnedIterator.__dict__["_create_iterator"] is patched  # not stacked
    try:
        for _ in tf.data.Dataset.range(2):  # @loop
            pass
        loop = next(i for i, line in enumerate(open(__file__), 1) if "# @loop" in line)
        assert seen[0] == f"before tests/tfapi/tfdata/test_iterators.py:{loop}"
        assert seen[1:] == ["after"]
        for patch in fix_side:
            patch.undo()
        iter(tf.data.Dataset.range(1))
        assert seen[2:] == ["after"]  # the collector still listens
    finally:
        for patch in fix_side + run_side:
            patch.undo()
    assert iterator_ops.OwnedIterator.__dict__["_create_iterator"] is original


def test_a_listener_that_fails_never_breaks_the_loop_but_stop_early_goes_through():
    def broken(ds, where):
        raise RuntimeError("listener bug")

    patches = stages.install_iterator_capture(broken)
    try:
        assert [int(x) for x in tf.data.Dataset.range(3)] == [0, 1, 2]
    finally:
        for patch in patches:
            patch.undo()

    def stop(ds, where):
        raise SystemExit(0)

    patches = stages.install_iterator_capture(stop)
    try:
        with pytest.raises(SystemExit):
            iter(tf.data.Dataset.range(3))
    finally:
        for patch in patches:
            patch.undo()
