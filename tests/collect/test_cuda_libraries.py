"""The library probe with real shared objects and the real dynamic loader."""

import json
import os
import subprocess
import sys

from tests.conftest import CHILD_DIR

BUILD = {"is_cuda_build": True, "cuda_version": "12.5.1", "cudnn_version": "9"}


def probe_in_child(ld_library_path="", extra_sys_path=""):
    """LD_LIBRARY_PATH is read once at process start, so probe in a fresh process."""
    code = (
        f"import sys, json; sys.path[:0] = [{str(CHILD_DIR)!r}, {str(extra_sys_path)!r}]\n"
        f"import cuda_libraries\nprint(json.dumps(cuda_libraries.probe({BUILD!r}, [])))"
    )
    env = {**os.environ, "LD_LIBRARY_PATH": str(ld_library_path)}
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True
    ).stdout
    return {row["name"]: row for row in json.loads(out)}


def test_required_sonames_for_a_cuda_12_build():
    sys.path.insert(0, str(CHILD_DIR))
    try:
        import cuda_libraries

        wanted = [row[1] for row in cuda_libraries.required(BUILD)]
        assert cuda_libraries.required({"is_cuda_build": False}) == []
    finally:
        sys.path.remove(str(CHILD_DIR))
    assert wanted == [
        "libcudart.so.12",
        "libcublas.so.12",
        "libcublasLt.so.12",
        "libcufft.so.11",
        "libcusolver.so.11",
        "libcusparse.so.12",
        "libcudnn.so.9",
    ]


def test_library_on_the_loader_path_loads(tmp_path, build_so):
    build_so(tmp_path / "lib", "libcudart.so.12")
    rows = probe_in_child(tmp_path / "lib")
    assert rows["cudart"]["loaded"] is True
    assert rows["cublas"]["loaded"] is False
    assert "libcublas.so.12" in rows["cublas"]["error"]
    assert rows["cublas"]["pip_package"] == "nvidia-cublas-cu12"
    assert rows["cublas"]["apt_package"] == "libcublas-12-5"


def test_another_major_version_is_named(tmp_path, build_so):
    other = build_so(tmp_path / "cuda-13" / "lib64", "libcudart.so.13")
    rows = probe_in_child(other.parent)
    assert rows["cudart"]["loaded"] is False
    assert str(other) in rows["cudart"]["other_versions"]


def test_pip_installed_library_is_found_like_tensorflows_rpath(tmp_path, build_so):
    site = tmp_path / "site-packages"
    lib = build_so(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9")
    rows = probe_in_child(extra_sys_path=site)
    assert rows["cudnn"]["loaded"] is True and rows["cudnn"]["path"] == str(lib)


def test_each_missing_library_is_told_only_its_own_other_versions(tmp_path, build_so):
    """The files seen are grouped by library name once: cuBLAS is told of libcublas.so.13,
    never of cuBLASLt's libcublasLt.so.13 beside it, and cuBLASLt of its own."""
    lib = tmp_path / "cuda-13" / "lib64"
    cublas = build_so(lib, "libcublas.so.13")
    cublas_lt = build_so(lib, "libcublasLt.so.13")
    rows = probe_in_child(lib)
    assert rows["cublas"]["other_versions"] == [str(cublas)]
    assert rows["cublasLt"]["other_versions"] == [str(cublas_lt)]


def test_pips_library_folders_are_looked_for_once_a_probe(tmp_path, build_so):
    """A host without a GPU misses all seven libraries: each one looked through every
    ``sys.path`` entry's ``nvidia/*/lib`` again (a glob per entry and library, about 1 ms
    of the probe's 8 here). The folders are found once, and a library in one of them is
    still found."""
    site = tmp_path / "site-packages"
    lib = build_so(site / "nvidia" / "cudnn" / "lib", "libcudnn.so.9")
    code = (
        f"import sys, json, glob; sys.path[:0] = [{str(CHILD_DIR)!r}, {str(site)!r}]\n"
        "import cuda_libraries\n"
        "asked = []\n"
        "real = glob.glob\n"
        "def counting(pattern, *a, **k):\n"
        "    asked.append(pattern)\n"
        "    return real(pattern, *a, **k)\n"
        "glob.glob = counting\n"
        f"rows = cuda_libraries.probe({BUILD!r}, [])\n"
        "pip = [p for p in asked if p.endswith('nvidia/*/lib')]\n"
        "print(json.dumps({'rows': rows, 'pip': pip, 'path': sys.path}))"
    )
    out = json.loads(
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
    )
    rows = {row["name"]: row for row in out["rows"]}
    assert rows["cudnn"]["loaded"] is True and rows["cudnn"]["path"] == str(lib)
    assert sum(not row["loaded"] for row in out["rows"]) >= 2  # several libraries looked for
    assert len(out["pip"]) == len(out["path"])  # one glob per sys.path entry, all told
