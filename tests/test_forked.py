"""What gpuwhy installs in a process is out of a child the process forks, and only there:
a patched method is the original again, the import hook is gone, the live metrics port
is closed; the parent keeps all of them. Real ``os.fork``; no TensorFlow."""

from __future__ import annotations

import os
import sys
import urllib.request
from collections.abc import Callable

from gpuwhy import forked
from gpuwhy.collect.inprocess import imports
from gpuwhy.export.prometheus import Endpoint, PrometheusMetrics
from gpuwhy.tfapi.patching import Patch


def in_child(check: Callable[[], bool]) -> int:
    """Exit status of a forked child that runs ``check``: 0 true, 1 false, 2 raised."""
    pid = os.fork()
    if pid == 0:
        try:
            code = 0 if check() else 1
        except BaseException:  # the child must never get back into pytest
            code = 2
        os._exit(code)
    return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])


class Watched:
    def step(self) -> str:
        return "original"


def test_a_patch_is_undone_in_a_forked_child_only():
    patch = Patch(Watched, "step", lambda original: lambda self: "patched")
    try:
        assert in_child(lambda: Watched().step() == "original") == 0
        assert Watched().step() == "patched"
        assert in_child(lambda: Watched().step() == "original") == 0  # at every fork
    finally:
        patch.undo()
    assert Watched().step() == "original"


def test_what_was_undone_in_the_process_is_forgotten():
    before = len(forked._UNDO)
    Patch(Watched, "step", lambda original: lambda self: "patched").undo()
    assert len(forked._UNDO) == before


def test_the_import_hook_is_gone_in_a_forked_child():
    fired: list[object] = []
    imports.when_imported("gpuwhy_never_such_module", fired.append)
    try:
        assert imports._FINDER in sys.meta_path
        assert in_child(lambda: imports._FINDER not in sys.meta_path) == 0
        assert imports._FINDER in sys.meta_path
    finally:
        imports.cancel(fired.append)
    assert imports._FINDER not in sys.meta_path


def test_the_metrics_port_is_closed_in_a_forked_child_and_still_served_by_the_parent():
    endpoint = Endpoint(
        PrometheusMetrics({}, {"mode": "run", "command": "t.py", "version": "0"}), 0, "127.0.0.1"
    )
    assert endpoint.start()
    server = endpoint._server
    try:
        assert in_child(lambda: server.socket.fileno() == -1) == 0
        url = f"http://127.0.0.1:{server.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            assert response.status == 200
    finally:
        endpoint.stop()


def test_an_undo_that_fails_in_the_child_is_silent(capfd):
    def fails() -> None:
        raise RuntimeError("gpuwhy's undo failed")

    forget = forked.undo_in_child(fails)
    try:
        assert in_child(lambda: True) == 0
    finally:
        forget()
    assert "undo failed" not in capfd.readouterr().err
