"""Which CUDA libraries the TensorFlow build needs, and whether each one loads here.

TensorFlow dlopens its GPU libraries by soname at GPU initialisation (XLA's
``tsl/platform/default/dso_loader.cc``: ``libcudart.so.<TF_CUDART_VERSION>``,
``libcublas.so.<TF_CUBLAS_VERSION>``, ``libcufft.so.<TF_CUFFT_VERSION>`` ...), and when one
fails it only logs "Cannot dlopen some GPU libraries" and carries on without a GPU. This
module repeats those loads in the child process, after TensorFlow had its go, so each
missing library is named with the package that provides it, and a library of another
major version (CUDA 13 installed for a CUDA 12 build) is told apart from no library.

pip's ``tensorflow[and-cuda]`` puts the libraries in ``site-packages/nvidia/<pkg>/lib``,
which TensorFlow's shared objects reach through their RPATH; a plain ``dlopen`` from
Python does not, so those directories are searched explicitly.
"""

import ctypes
import glob
import os
import re
import subprocess
import sys

# Library sonames per CUDA major version. The cuFFT and cuSOLVER majors do not follow
# CUDA's (CUDA 12 ships libcufft.so.11 and libcusolver.so.11).
_MAJORS = {
    11: {
        "cudart": "11.0",
        "cublas": "11",
        "cublasLt": "11",
        "cufft": "10",
        "cusolver": "11",
        "cusparse": "11",
    },
    12: {
        "cudart": "12",
        "cublas": "12",
        "cublasLt": "12",
        "cufft": "11",
        "cusolver": "11",
        "cusparse": "12",
    },
    13: {
        "cudart": "13",
        "cublas": "13",
        "cublasLt": "13",
        "cufft": "12",
        "cusolver": "12",
        "cusparse": "12",
    },
}

# short name -> (pip package dir under site-packages/nvidia, pip package, apt package)
_PACKAGES = {
    "cudart": ("cuda_runtime", "nvidia-cuda-runtime-cu{cuda}", "cuda-cudart-{cuda}-{minor}"),
    "cublas": ("cublas", "nvidia-cublas-cu{cuda}", "libcublas-{cuda}-{minor}"),
    "cublasLt": ("cublas", "nvidia-cublas-cu{cuda}", "libcublas-{cuda}-{minor}"),
    "cufft": ("cufft", "nvidia-cufft-cu{cuda}", "libcufft-{cuda}-{minor}"),
    "cusolver": ("cusolver", "nvidia-cusolver-cu{cuda}", "libcusolver-{cuda}-{minor}"),
    "cusparse": ("cusparse", "nvidia-cusparse-cu{cuda}", "libcusparse-{cuda}-{minor}"),
    "cudnn": ("cudnn", "nvidia-cudnn-cu{cuda}", "libcudnn{cudnn}-cuda-{cuda}"),
}

_CUDA_FILE = re.compile(
    r"/lib(cuda|cudart|cublas|cublasLt|cudnn\w*|cufft|cusolver|cusparse|"
    r"nccl|nvidia-ml|nvrtc|nvJitLink|cupti)\.so[.\d]*$"
)


def _major_minor(version):
    parts = [int(p) for p in re.findall(r"\d+", str(version or ""))[:2]]
    return (parts + [0, 0])[:2] if parts else (None, None)


def required(build_info):
    """[(name, soname, pip_package, apt_package)] for a CUDA build; [] otherwise."""
    if not build_info.get("is_cuda_build"):
        return []
    cuda, minor = _major_minor(build_info.get("cuda_version"))
    cudnn, _ = _major_minor(build_info.get("cudnn_version"))
    if cuda is None:
        return []
    majors = _MAJORS.get(cuda, {n: str(cuda) for n in _MAJORS[12]})
    fmt = {"cuda": cuda, "minor": minor, "cudnn": cudnn}
    out = []
    for name, version in majors.items():
        out.append(
            (
                name,
                f"lib{name}.so.{version}",
                _PACKAGES[name][1].format(**fmt),
                _PACKAGES[name][2].format(**fmt),
            )
        )
    if cudnn is not None:
        out.append(
            (
                "cudnn",
                f"libcudnn.so.{cudnn}",
                _PACKAGES["cudnn"][1].format(**fmt),
                _PACKAGES["cudnn"][2].format(**fmt),
            )
        )
    return out


def mapped_libraries():
    """CUDA-related shared objects mapped into this process (what TF really loaded)."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as f:
            paths = {line.split()[-1] for line in f if ".so" in line}
    except OSError:
        return []
    return sorted(p for p in paths if _CUDA_FILE.search(p))


def _pip_dirs():
    dirs = []
    for entry in sys.path:
        dirs.extend(glob.glob(os.path.join(entry, "nvidia", "*", "lib")))
    return dirs


def _search_dirs(pip_dirs):
    """Directories a user's CUDA libraries usually live in, for 'other version' hints
    (``pip_dirs``: :func:`_pip_dirs`, looked up once by the probe)."""
    dirs = [d for d in os.environ.get("LD_LIBRARY_PATH", "").split(":") if d]
    dirs += glob.glob("/usr/local/cuda*/lib64") + glob.glob("/usr/local/cuda*/targets/*/lib")
    dirs += ["/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"]
    return dirs + pip_dirs


def _ldconfig_entries():
    try:
        out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, timeout=5).stdout
    except (OSError, subprocess.SubprocessError):
        return []
    return re.findall(r"=>\s*(\S+)", out)


def _try_load(path_or_name):
    try:
        ctypes.CDLL(path_or_name, mode=getattr(os, "RTLD_LOCAL", 0) | getattr(os, "RTLD_LAZY", 1))
        return None
    except OSError as e:
        return str(e)


def _by_library(found, pip_dirs):
    """Every ``lib*.so.*`` file seen (``found``: ldconfig's, and the search directories'),
    by its name before the first ``.so.`` (``libcudart``): each library missing looks
    at its own (a host without a GPU misses all seven, and going through the ~1,400
    files seven times was most of the probe's time)."""
    for d in _search_dirs(pip_dirs):
        found.update(glob.glob(os.path.join(d, "lib*.so.*")))
    groups: dict[str, list[str]] = {}
    for path in found:
        groups.setdefault(os.path.basename(path).partition(".so.")[0], []).append(path)
    return groups


def _other_majors(candidates, name, soname):
    """One path per other major version of ``lib<name>.so`` (symlinks folded)."""
    prefix = f"lib{name}.so."
    wanted_major = soname[len(prefix) :].split(".")[0]
    by_major: dict[str, str] = {}
    for c in sorted(candidates):
        base = os.path.basename(c)
        if not base.startswith(prefix):
            continue
        major = base[len(prefix) :].split(".")[0]
        if major and major != wanted_major and os.path.exists(c):
            by_major.setdefault(major, os.path.realpath(c))
    return [by_major[m] for m in sorted(by_major)]


def probe(build_info, mapped=None):
    """One dict per required library (the fields of ``gpuwhy.facts.LibraryProbe``)."""
    mapped = mapped_libraries() if mapped is None else mapped
    candidates = None  # every lib*.so.* file we can see, built once on demand
    pip_dirs = None  # pip's nvidia-*/lib folders: a glob per sys.path entry, done once
    results = []
    for name, soname, pip_package, apt_package in required(build_info):
        row = {
            "name": name,
            "wanted": soname,
            "loaded": False,
            "path": None,
            "error": None,
            "other_versions": [],
            "pip_package": pip_package,
            "apt_package": apt_package,
        }
        already = [p for p in mapped if os.path.basename(p) == soname]
        if already:
            row.update(loaded=True, path=already[0])
            results.append(row)
            continue
        error = _try_load(soname)
        if error is None:
            row.update(loaded=True, path=soname)
        else:
            if pip_dirs is None:
                pip_dirs = _pip_dirs()
            for d in pip_dirs:
                path = os.path.join(d, soname)
                if os.path.exists(path):
                    pip_error = _try_load(path)
                    row.update(loaded=pip_error is None, path=path)
                    error = pip_error
                    break
            row["error"] = error
        if not row["loaded"]:
            if candidates is None:  # a row not loaded looked in pip's folders above
                candidates = _by_library(set(_ldconfig_entries()), pip_dirs)
            row["other_versions"] = _other_majors(candidates.get(f"lib{name}", ()), name, soname)
        results.append(row)
    return results
