"""gpuwhy.tfapi.own_frames_hidden: no gpuwhy frames in the stacks TF prints (issue #12).

A graph error inside a tf.function prints the stack TF recorded when it created the op
("Detected at node ... defined at"). Under ``gpuwhy run`` that stack must be the one
``python script.py`` prints: the user's frames, none of gpuwhy's (launcher, cli.py,
runner.py, the tf.function hooks).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwhy.tfapi.own_frames_hidden import gpuwhy_files, hide_gpuwhy_frames
from gpuwhy.tfapi.patching import Patch
from tests import markers

tf = pytest.importorskip("tensorflow")

THIS_FILE = Path(__file__)
PACKAGE_DIR = Path(__file__).parents[2] / "gpuwhy"
GPUWHY = str(Path(sys.executable).with_name("gpuwhy"))

_at = markers.marker_lines(THIS_FILE)

# The op fails when it runs, not when it is traced: an out-of-range tf.gather on the CPU.
SCRIPT = textwrap.dedent("""\
    import tensorflow as tf


    @tf.function
    def lookup(table, index):
        return tf.gather(table, index)  # @op


    def main():
        table = tf.constant([1.0, 2.0, 3.0])
        print(lookup(table, tf.constant(7)))  # @call


    main()  # @main
""")


def _script_line(marker: str) -> int:
    """The line number of SCRIPT's line that ends with ``# @marker``."""
    return next(n for n, line in enumerate(SCRIPT.splitlines(), 1) if line.endswith(f"# @{marker}"))


def _without_debug() -> dict[str, str]:
    """This environment less GPUWHY_DEBUG, which keeps gpuwhy's frames on purpose."""
    return {k: v for k, v in os.environ.items() if k != "GPUWHY_DEBUG"}


_FILE_LINE = re.compile(r'^\s*File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<name>\S+)')


def _defined_at(stderr: str) -> list[str]:
    """The ``File ...`` lines of TF's "defined at" stack in an error message."""
    lines = stderr.splitlines()
    start = next(i for i, line in enumerate(lines) if "defined at (most recent call last):" in line)
    frames = []
    for line in lines[start + 1 :]:
        if not line.strip():
            continue
        if not _FILE_LINE.match(line):
            break
        frames.append(line.strip())
    return frames


def _file_lines(stderr: str) -> list[tuple[str, str, str]]:
    """Every ``File "...", line N, in NAME`` of the output: tracebacks and TF's stacks."""
    return [
        m.group("file", "line", "name") for m in map(_FILE_LINE.match, stderr.splitlines()) if m
    ]


@pytest.fixture(scope="module")
def plain_python(tmp_path_factory) -> tuple[Path, str]:
    """The failing script and what ``python script.py`` prints to stderr."""
    root = tmp_path_factory.mktemp("frames-hidden")
    script = root / "lookup.py"
    script.write_text(SCRIPT)
    result = subprocess.run(
        [sys.executable, script.name],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=root,
        env=_without_debug(),
    )
    assert result.returncode == 1 and "Graph execution error" in result.stderr, result.stderr
    return script, result.stderr


@pytest.mark.parametrize(
    "launcher", [[GPUWHY], [sys.executable, "-m", "gpuwhy"]], ids=["console-script", "python-m"]
)
def test_gpuwhy_run_prints_the_stack_python_prints(plain_python, launcher):
    """The user's file:lines in TF's "defined at" stack, the same lists as plain Python,
    and no frame of the gpuwhy package or its launcher anywhere in the output."""
    script, python_stderr = plain_python
    result = subprocess.run(
        [*launcher, "run", "--no-audit", script.name],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=script.parent,
        env=_without_debug(),
    )
    assert result.returncode == 1, result.stderr
    defined_at = _defined_at(result.stderr)
    assert defined_at == _defined_at(python_stderr)
    assert defined_at == [
        f'File "{script}", line {_script_line(marker)}, in {name}'
        for marker, name in (("main", "<module>"), ("call", "main"), ("op", "lookup"))
    ]
    frames = _file_lines(result.stderr)
    hidden = [
        f
        for f in frames
        if f[0].startswith(str(PACKAGE_DIR) + os.sep) or f[0] == GPUWHY or "runpy" in f[0]
    ]
    assert hidden == [], result.stderr
    user = [f for f in frames if f[0] == str(script)]
    assert user == [f for f in _file_lines(python_stderr) if f[0] == str(script)]


def _double(x):
    return x * 2.0  # @mul


class _Holder:
    value = None


def _mul_op_frames() -> list[str]:
    """Trace a tf.function from inside a gpuwhy frame, as gpuwhy's hooks do (Patch calls
    ``make`` from gpuwhy/tfapi/patching.py): the ``file:line`` s of the op's stack."""
    graphs = []

    def make(_original):
        spec = tf.TensorSpec([2], tf.float32)
        graphs.append(tf.function(_double).get_concrete_function(spec).graph)  # @trace

    Patch(_Holder, "value", make).undo()
    mul = next(op for op in graphs[0].get_operations() if op.type == "Mul")
    return [f"{os.path.relpath(f.filename)}:{f.lineno}" for f in mul.traceback]


def test_op_stacks_leave_gpuwhy_out_until_undone(monkeypatch):
    """In-process, without ``gpuwhy run``: hidden, the op's stack goes from this test to
    the op with no gpuwhy frame; undone, gpuwhy's frame is there again."""
    monkeypatch.delenv("GPUWHY_DEBUG", raising=False)
    patching = os.path.relpath(PACKAGE_DIR / "tfapi" / "patching.py")
    hidden = hide_gpuwhy_frames()
    try:
        assert hidden.hidden and hidden.reason is None
        frames = _mul_op_frames()
    finally:
        hidden.undo()
    assert _at("trace") in frames and _at("mul") in frames
    assert not [f for f in frames if f.startswith(os.path.relpath(PACKAGE_DIR) + os.sep)]
    assert any(f.startswith(patching + ":") for f in _mul_op_frames())
    hidden.undo()  # twice is harmless


def test_a_tensorflow_without_the_private_names_gets_a_reason(monkeypatch):
    """A TF that moved its private names: nothing raises, the reason names what is
    missing, and the parts that are still there are hidden and undone."""
    from tensorflow.python.util import tf_stack, traceback_utils

    monkeypatch.delenv("GPUWHY_DEBUG", raising=False)
    monkeypatch.delattr(tf_stack, "_source_filter_stacks")
    monkeypatch.delattr(traceback_utils, "_EXCLUDED_PATHS")
    hidden = hide_gpuwhy_frames()
    try:
        assert hidden.parts == ["defining frames"] and not hidden.hidden
        assert "op stacks" in hidden.reason and "_source_filter_stacks" in hidden.reason
        assert "Python tracebacks" in hidden.reason and "_EXCLUDED_PATHS" in hidden.reason
    finally:
        hidden.undo()


def test_gpuwhy_debug_leaves_the_frames(monkeypatch):
    """GPUWHY_DEBUG=1 is for debugging gpuwhy: its frames stay in TF's stacks."""
    monkeypatch.setenv("GPUWHY_DEBUG", "1")
    hidden = hide_gpuwhy_frames()
    assert not hidden.hidden and "GPUWHY_DEBUG" in hidden.reason
    hidden.undo()


def test_every_gpuwhy_module_is_in_the_hidden_files():
    """TF compares whole file names: each imported gpuwhy module's file is listed."""
    files = gpuwhy_files()
    modules = [m for name, m in list(sys.modules.items()) if name.split(".")[0] == "gpuwhy"]
    assert modules and all(m.__file__ in files for m in modules if getattr(m, "__file__", None))
    assert str(THIS_FILE) not in files  # no runner on this stack: the caller stays visible
