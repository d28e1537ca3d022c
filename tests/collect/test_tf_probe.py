"""The TensorFlow child process, against the real TensorFlow and real broken installs."""

import os

import pytest

from gpuwhy.collect.tf_probe import TensorFlowProbe, log_lines, parse

CUDA_BUILD_INFO = (
    "import collections\nbuild_info = collections.OrderedDict([('cuda_version', "
    "'12.5.1'), ('cudnn_version', '9'), ('is_cuda_build', True)])\n"
)


@pytest.fixture(scope="module")
def real():
    return TensorFlowProbe().result()


def test_real_tensorflow_imports_and_reports_its_build(real):
    assert real.probe_status == "ok" and real.installed and real.import_ok
    assert real.version.startswith("2.")
    assert real.distribution == "tensorflow"
    assert real.build["is_cuda_build"] is True  # the pinned Linux wheel is a CUDA build
    assert real.build["cuda_version"].startswith("12.")
    assert {lib.wanted for lib in real.libraries} >= {"libcudart.so.12", "libcudnn.so.9"}


def test_real_tensorflow_on_this_machine_lists_what_the_driver_allows(real):
    if os.path.exists("/dev/nvidiactl"):
        assert real.gpus and "GPU" in real.confirm_device
    else:
        assert real.gpus == () and real.confirm_device is None
        assert any("cuInit" in line or "cuda drivers" in line for line in real.log_lines)


def test_python_without_tensorflow(python_without_tensorflow):
    facts = TensorFlowProbe(python_without_tensorflow).result()
    assert facts.probe_status == "ok" and facts.installed is False


def test_missing_interpreter_is_an_error_not_a_crash(tmp_path):
    facts = TensorFlowProbe(str(tmp_path / "nope")).result()
    assert facts.probe_status == "error" and "cannot start" in facts.import_error


def test_import_error_keeps_message_and_the_statically_read_build(fake_tensorflow):
    env = fake_tensorflow(
        "raise ImportError('libcudart.so.11.0: cannot open shared object file')",
        build_info=CUDA_BUILD_INFO,
    )
    facts = TensorFlowProbe(env=env).result()
    assert facts.installed and not facts.import_ok
    assert "libcudart.so.11.0" in facts.import_error
    assert facts.build["cuda_version"] == "12.5.1"  # read without importing
    assert [lib.wanted for lib in facts.libraries][0] == "libcudart.so.12"


def test_crash_is_reported_with_its_signal_and_stage(fake_tensorflow):
    env = fake_tensorflow("import os, signal\nos.kill(os.getpid(), signal.SIGILL)\n")
    facts = TensorFlowProbe(env=env).result()
    assert facts.probe_status == "crashed"
    assert facts.signal == "SIGILL" and facts.hung_in == "import"


def test_hang_is_cut_at_the_time_limit(fake_tensorflow):
    env = fake_tensorflow("import time\ntime.sleep(600)\n")
    facts = TensorFlowProbe(timeout=3, env=env).result()
    assert facts.probe_status == "timeout" and facts.hung_in == "import"
    assert "3 s" in facts.import_error


def test_parse_child_that_exits_without_a_result():
    facts = parse("", "Traceback...\nSystemError: boom\n", 1)
    assert facts.probe_status == "error" and "SystemError: boom" in facts.import_error


def test_log_lines_keep_gpu_lines_once_without_the_glog_prefix():
    stderr = (
        "I0000 00:00:1795241062.377455    5156 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.\n"
        "I0000 00:00:1795241062.900882    5156 cpu_feature_guard.cc:227] This TensorFlow binary is optimized\n"
        "I0000 00:00:1795241065.094093    5156 cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.\n"
        "W0000 00:00:1795241065.1    5156 gpu_device.cc:2341] Cannot dlopen some GPU libraries.\n"
        "random user print about a GPU\n"
    )
    assert log_lines(stderr) == (
        "I cudart_stub.cc:31] Could not find cuda drivers on your machine, GPU will not be used.",
        "W gpu_device.cc:2341] Cannot dlopen some GPU libraries.",
    )


def test_failure_after_import_is_reported_with_its_error(fake_tensorflow):
    """A half-removed install: `import tensorflow` works, `tf.config` does not exist."""
    env = fake_tensorflow("__version__ = '2.21.0'\n", build_info=CUDA_BUILD_INFO)
    facts = TensorFlowProbe(env=env).result()
    assert facts.import_ok and facts.probe_status == "error"
    assert "has no attribute 'config'" in facts.import_error
