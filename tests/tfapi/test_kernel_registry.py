"""The private-API wrappers in gpuwhy.tfapi, against the installed TensorFlow.

These are the tests that say which private API moved when TensorFlow is upgraded.
The stderr tests observe file descriptor 2 from outside, in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

import gpuwhy
from gpuwhy.tfapi import graph_ops
from gpuwhy.tfapi.quiet_stderr import stderr_set_aside

ROOT = Path(__file__).parents[2]
THIS_FILE = Path(__file__)


def _python(code: str, timeout: float = 120) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith("TF_CPP_")}  # TF's warnings on
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        cwd=ROOT,
        env=env,
        timeout=timeout,
        check=False,
    )


def _between(text: bytes, start: bytes, end: bytes) -> bytes:
    assert start in text and end in text, text[-2000:]
    return text[text.index(start) + len(start) : text.index(end)]


# ---------------------------------------------------------------------------
# stderr_set_aside, with no TensorFlow involved.


def test_stderr_set_aside_keeps_other_output_and_drops_noise():
    result = _python(
        """
        import os, sys
        from gpuwhy.tfapi.quiet_stderr import stderr_set_aside
        os.write(2, b"before\\n")
        with stderr_set_aside(lambda line: line.startswith(b"NOISE")):
            os.write(2, b"keep me\\n")
            os.write(2, b"NOISE: Registered: device='CPU'\\n")
            sys.stderr.write("python-level too\\n")
            sys.stderr.flush()
            os.write(1, b"stdout is untouched\\n")
            os.write(2, b"keep me too\\n")
        os.write(2, b"after\\n")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"before\nkeep me\npython-level too\nkeep me too\nafter\n"
    assert result.stdout == b"stdout is untouched\n"


def test_stderr_set_aside_restores_fd_2_when_the_block_raises():
    result = _python(
        """
        import os
        from gpuwhy.tfapi.quiet_stderr import stderr_set_aside
        try:
            with stderr_set_aside(lambda line: b"noise" in line):
                os.write(2, b"noise\\n")
                os.write(2, b"kept\\n")
                raise KeyError("boom")
        except KeyError:
            pass
        os.write(2, b"restored\\n")
        """
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == b"kept\nrestored\n"


def test_stderr_set_aside_in_process_leaves_fd_2_where_it_was():
    before = os.fstat(2)
    with stderr_set_aside(lambda line: True):
        os.write(2, b"swallowed by the test's noise filter\n")
    after = os.fstat(2)
    assert (before.st_dev, before.st_ino) == (after.st_dev, after.st_ino)


# ---------------------------------------------------------------------------
# KernelRegistry: TryFindKernelClass and the KernelDefs.

tf = pytest.importorskip("tensorflow")

from tensorflow.core.framework import node_def_pb2  # noqa: E402

from gpuwhy.tfapi.kernel_registry import GpuKernel, KernelRegistry, op_def  # noqa: E402


def _node(op: str, **types) -> node_def_pb2.NodeDef:
    node = node_def_pb2.NodeDef(name="probe", op=op)
    for name, dtype in types.items():
        node.attr[name].type = tf.as_dtype(dtype).as_datatype_enum
    return node


@pytest.fixture(scope="module")
def registry() -> KernelRegistry:
    return KernelRegistry()


def test_float32_matmul_has_a_gpu_kernel(registry):
    kernel = registry.lookup(_node("MatMul", T=tf.float32))
    assert isinstance(kernel, GpuKernel)
    assert kernel.exists and kernel.op_has_gpu_kernels
    assert "GPU" in kernel.class_name or "GPUDevice" in kernel.class_name, kernel.class_name
    assert kernel.host_memory_args == frozenset()


def test_as_string_has_no_gpu_kernel(registry):
    kernel = registry.lookup(_node("AsString", T=tf.float32))
    assert kernel == GpuKernel(
        class_name="", host_memory_args=frozenset(), op_has_gpu_kernels=False
    )
    assert not kernel.exists


def test_dtype_only_miss(registry):
    # Relu has GPU kernels for floats and int8/uint8/int64..., none for int32.
    kernel = registry.lookup(_node("Relu", T=tf.int32))
    assert (kernel.exists, kernel.op_has_gpu_kernels) == (False, True)
    assert registry.lookup(_node("Relu", T=tf.float32)).exists


def test_int32_const_keeps_its_output_in_host_memory_via_default(registry):
    from tensorflow.python.framework import kernels

    kernel = registry.lookup(_node("Const", dtype=tf.int32))
    assert kernel.exists and "output" in kernel.host_memory_args
    # It comes from the DEVICE_DEFAULT registration: no GPU-device Const takes int32.
    defs = kernels.get_registered_kernels_for_op("Const").kernel
    int32 = tf.int32.as_datatype_enum

    def allows_int32(kernel_def) -> bool:
        return any(
            int32 in c.allowed_values.list.type for c in kernel_def.constraint if c.name == "dtype"
        )

    assert not [k for k in defs if k.device_type == "GPU" and allows_int32(k)]
    assert [
        k
        for k in defs
        if k.device_type == "DEFAULT" and allows_int32(k) and "output" in k.host_memory_arg
    ]
    # A float32 Const is an ordinary device-memory GPU kernel.
    assert registry.lookup(_node("Const", dtype=tf.float32)).host_memory_args == frozenset()


def test_reshape_gpu_kernel_reads_its_shape_from_host_memory(registry):
    kernel = registry.lookup(_node("Reshape", T=tf.float32, Tshape=tf.int32))
    assert kernel.exists and kernel.host_memory_args == frozenset({"shape"})


def test_int32_arithmetic_gpu_kernel_is_all_host_memory(registry):
    kernel = registry.lookup(_node("AddV2", T=tf.int32))
    assert kernel.exists and kernel.host_memory_args == frozenset({"x", "y", "z"})


def test_lookups_are_cached_per_key(registry):
    first = registry.lookup(_node("Relu", T=tf.float16))
    other_name = _node("Relu", T=tf.float16)
    other_name.name = "another/node"
    other_name.device = "/device:CPU:0"  # ignored: the registry's device is asked
    assert registry.lookup(other_name) is first
    assert KernelRegistry.key(other_name) == KernelRegistry.key(_node("Relu", T=tf.float16))
    assert KernelRegistry.key(_node("Relu", T=tf.float16)) != KernelRegistry.key(
        _node("Relu", T=tf.float32)
    )


def test_function_call_ops_are_not_registry_ops(registry):
    call = node_def_pb2.NodeDef(name="f", op="__inference_my_function_42")
    assert op_def(call.op) is None
    assert KernelRegistry.key(call) is None and registry.lookup(call) is None
    assert op_def("MatMul").name == "MatMul"


def test_cpu_registry():
    cpu = KernelRegistry("/device:CPU:0")
    assert cpu.device_type == "CPU" and KernelRegistry().device_type == "GPU"
    assert cpu.lookup(_node("AsString", T=tf.float32)).exists
    assert cpu.lookup(_node("Relu", T=tf.int32)).exists


REGISTRY_CHILD = """
    import os
    import tensorflow as tf
    from tensorflow.core.framework import node_def_pb2
    from tensorflow.python.util import _pywrap_kernel_registry
    from gpuwhy.tfapi.kernel_registry import KernelRegistry

    node = node_def_pb2.NodeDef(name="probe", op="AsString")
    node.attr["T"].type = tf.float32.as_datatype_enum
    registry = KernelRegistry()
    os.write(2, b"MARK-BEFORE\\n")
    kernel = registry.lookup(node)
    os.write(2, b"MARK-AFTER\\n")
    assert not kernel.exists
    # Control: the raw call, outside the set-aside, does print the registry's noise.
    node.device = "/device:GPU:0"
    assert _pywrap_kernel_registry.TryFindKernelClass(node.SerializeToString()) == b""
    os.write(2, b"MARK-END\\n")
"""


@pytest.fixture(scope="module")
def registry_child_stderr() -> bytes:
    result = _python(REGISTRY_CHILD)
    assert result.returncode == 0, result.stderr.decode(errors="replace")[-3000:]
    return result.stderr


def test_lookup_hides_the_registered_kernels_list(registry_child_stderr):
    during = _between(registry_child_stderr, b"MARK-BEFORE\n", b"MARK-AFTER\n")
    control = _between(registry_child_stderr, b"MARK-AFTER\n", b"MARK-END\n")
    assert b"Registered:" in control  # the noise exists and this test can see it
    assert b"Registered:" not in during
    assert b"device='CPU'" not in during


def test_lookup_leaves_no_registry_warning_at_all(registry_child_stderr):
    during = _between(registry_child_stderr, b"MARK-BEFORE\n", b"MARK-AFTER\n")
    assert during == b""


# ---------------------------------------------------------------------------
# graph_ops: user frames, creation sites, shapes.


@pytest.mark.parametrize(
    ("filename", "library"),
    [
        ("<string>", True),
        ("<frozen importlib._bootstrap>", True),
        ("/tmp/__autograph_generated_filexyz.py", True),
        ("/venv/lib/python3.11/site-packages/tensorflow/python/ops/math_ops.py", True),
        ("/venv/lib/python3.11/site-packages/keras/src/layers/core/dense.py", True),
        ("/venv/lib/python3.11/site-packages/tf_keras/src/engine/training.py", True),
        (str(Path(gpuwhy.__file__).with_name("record.py")), True),  # gpuwhy's own package
        ("/home/me/gpuwhy/train.py", False),  # a user's checkout named gpuwhy is still the user's
        ("/usr/lib/python3.11/contextlib.py", True),
        ("/usr/lib/python3.11/functools.py", True),
        ("/venv/lib/python3.11/site-packages/numpy/core/fromnumeric.py", True),
        ("/venv/bin/gpuwhy", True),  # the console script running the user's program
        # MirroredStrategy runs replica functions in threads: threading.py is not the user's
        (str(Path(threading.__file__)), True),
        # a package installed under a Python without a virtual environment: installed
        (str(Path(threading.__file__).parent / "site-packages" / "mine" / "train.py"), True),
        ("/home/me/project/train.py", False),
        (
            "/home/me/project/keras_utils.py",
            False,
        ),  # a file named like a library is still the user's
        ("/home/me/tensorflow_models/train.py", False),
        ("relative/model.py", False),
    ],
)
def test_is_library_file(filename, library):
    assert graph_ops.is_library_file(filename) is library


def test_relative():
    assert (
        graph_ops.relative(str(ROOT / "pkg" / "train.py"), 12)
        == f"{os.path.relpath(ROOT / 'pkg' / 'train.py')}:12"
    )
    assert graph_ops.relative("/elsewhere/train.py", 3).endswith("train.py:3")


def _marked_line(marker: str) -> int:
    lines = THIS_FILE.read_text().splitlines()
    (number,) = [i for i, text in enumerate(lines, 1) if text.rstrip().endswith(f"# @{marker}")]
    return number


def _user_helper(a, b):
    return tf.matmul(a, b)  # @helper-matmul


@pytest.fixture(scope="module")
def traced_graph():
    @tf.function
    def traced(x):
        y = tf.nn.relu(x, name="my_relu")  # @relu
        return _user_helper(y, tf.transpose(y))

    return traced.get_concrete_function(tf.ones([3, 5])).graph


def test_creation_site_is_the_innermost_user_frame(traced_graph):
    here = os.path.relpath(THIS_FILE)
    assert graph_ops.creation_site(traced_graph, "my_relu") == f"{here}:{_marked_line('relu')}"
    # Created inside a helper: the helper's line, not the caller's.
    assert (
        graph_ops.creation_site(traced_graph, "MatMul") == f"{here}:{_marked_line('helper-matmul')}"
    )


def test_creation_site_of_unknown_ops(traced_graph):
    assert graph_ops.creation_site(traced_graph, "no_such_op") is None
    assert graph_ops.creation_site(None, "my_relu") is None


def test_static_shapes(traced_graph):
    assert graph_ops.output_shape(traced_graph, "my_relu", 0) == (3, 5)
    assert graph_ops.input_shape(traced_graph, "MatMul", 1) == (5, 3)
    assert graph_ops.output_shape(traced_graph, "MatMul", 0) == (3, 3)
    assert graph_ops.output_shape(traced_graph, "MatMul", 1) is None  # no such output
    assert graph_ops.output_shape(traced_graph, "no_such_op", 0) is None


def test_body_graph(traced_graph):
    assert graph_ops.body_graph({"": traced_graph}, "") is traced_graph
    assert graph_ops.body_graph({"": traced_graph}, "missing_body") is None
