"""A notebook interrupts what a script rarely does: the session's own start and stop.
A Ctrl-C while the hooks go in, or a second one while they come out, must still leave
none of them in the process (the next cell runs untouched), and reach the user."""

from __future__ import annotations

import pytest

from gpuwhy.collect.inprocess.base import Collector
from gpuwhy.collect.registry import COLLECTORS
from gpuwhy.modes.run.session import Session
from tests.notebook.hooks import NONE, installed_hooks

tf = pytest.importorskip("tensorflow")


class CtrlCAtStart(Collector):
    """Last to start: the user's Ctrl-C once every other collector's hooks are in."""

    name = "ctrl-c-at-start"

    def on_tensorflow(self) -> None:
        raise KeyboardInterrupt


class CtrlCAtStop(Collector):
    """First to stop: a second Ctrl-C before any other collector's hooks are out."""

    name = "ctrl-c-at-stop"

    def stop(self) -> None:
        raise KeyboardInterrupt


def test_ctrl_c_while_the_hooks_go_in_leaves_none():
    session = Session(collectors=(*COLLECTORS, CtrlCAtStart), eager_duty=1.0)
    with pytest.raises(KeyboardInterrupt):
        session.start()
    assert installed_hooks() == NONE


def test_ctrl_c_while_the_hooks_come_out_still_takes_every_one_out():
    session = Session(collectors=(*COLLECTORS, CtrlCAtStop), eager_duty=1.0)
    session.start()
    tf.constant(1.0) + 1.0  # an eager op: the op callback is in place
    assert installed_hooks()["op callbacks"]
    with pytest.raises(KeyboardInterrupt):
        session.stop("interrupted", 130, "KeyboardInterrupt")
    assert installed_hooks() == NONE
