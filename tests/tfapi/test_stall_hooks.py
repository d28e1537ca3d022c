"""TF's checkpoint writes and summary flushes timed where the program calls them: the
outermost call only, with the user's line; undone exactly."""

import pytest

from gpuwhy.tfapi import stall_hooks
from tests.markers import marker_lines

at = marker_lines(__file__)


def test_checkpoint_writes_and_summary_flushes_are_timed_at_the_user_s_line(tmp_path):
    tf = pytest.importorskip("tensorflow")
    from tensorflow.python.checkpoint.checkpoint import Checkpoint

    original = Checkpoint.write
    seen = []
    patches = stall_hooks.install_tensorflow(lambda *event: seen.append(event))
    try:
        ckpt = tf.train.Checkpoint(v=tf.Variable(tf.ones([64, 64])))
        manager = tf.train.CheckpointManager(ckpt, str(tmp_path / "m"), max_to_keep=2)
        manager.save()  # @manager
        ckpt.write(str(tmp_path / "w"))  # @write
        writer = tf.summary.create_file_writer(str(tmp_path / "logs"))
        with writer.as_default():  # @default
            tf.summary.write("loss", tf.constant(0.5), step=1)  # TF's own op: no TensorBoard
        writer.flush()  # @flush
    finally:
        for patch in reversed(patches):
            patch.undo()
    assert Checkpoint.write is original
    rows = [(kind, where, what) for kind, _, _, where, what in seen]
    assert rows == [
        ("checkpoint", at("manager"), "tf.train.CheckpointManager.save"),  # its write: nested
        ("checkpoint", at("write"), "tf.train.Checkpoint.write"),
        ("summary", at("default"), "tf.summary writer flush"),  # as_default() flushes on exit
        ("summary", at("flush"), "tf.summary writer flush"),
    ]
    assert all(end >= start for _, start, end, _, _ in seen)
