import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests import speed_marks

ROOT = Path(__file__).parents[1]
CHILD_DIR = ROOT / "gpuwhy" / "collect" / "child"


@pytest.fixture(scope="session")
def python_without_tensorflow(tmp_path_factory) -> str:
    """A real interpreter that cannot import TensorFlow: a fresh venv with no packages."""
    venv = tmp_path_factory.mktemp("venv-no-tf")
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return str(venv / "bin" / "python")


@pytest.fixture
def fake_tensorflow(tmp_path):
    """Make a `tensorflow` package on a PYTHONPATH whose import runs ``body``: a real broken
    install (shadowing package, crash, hang) for the child process to meet."""

    def make(body: str, build_info: str | None = None) -> dict:
        pkg = tmp_path / "site" / "tensorflow"
        (pkg / "python" / "platform").mkdir(parents=True)
        (pkg / "__init__.py").write_text(textwrap.dedent(body))
        if build_info is not None:
            (pkg / "python" / "platform" / "build_info.py").write_text(build_info)
        return {**os.environ, "PYTHONPATH": str(tmp_path / "site")}

    return make


@pytest.fixture(scope="session")
def build_so(tmp_path_factory):
    """Compile a real, empty shared library with the given soname (gcc is on every
    machine of this project's kind)."""
    if shutil.which("gcc") is None:
        pytest.skip("gcc is needed to build a shared library")
    src = tmp_path_factory.mktemp("so-src") / "empty.c"
    src.write_text("int gpuwhy_test_symbol(void) { return 42; }\n")

    def build(directory: Path, soname: str) -> Path:
        directory.mkdir(parents=True, exist_ok=True)
        out = directory / soname
        subprocess.run(
            ["gcc", "-shared", "-fPIC", "-o", str(out), str(src), f"-Wl,-soname,{soname}"],
            check=True,
        )
        return out

    return build


def pytest_configure(config):
    for name, text in speed_marks.MARKS.items():
        config.addinivalue_line("markers", f"{name}: {text}")


def pytest_collection_modifyitems(config, items):
    """Each test marked by what its module needs (tests/speed_marks.py): ``make test-fast``
    deselects the marked ones."""
    for item in items:
        for name in speed_marks.marks_for(Path(str(item.fspath)), item.fixturenames):
            item.add_marker(getattr(pytest.mark, name))
