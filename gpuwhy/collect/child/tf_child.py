"""Entry point of the child process that imports TensorFlow for ``gpuwhy check``.

Why a child: importing TensorFlow with a broken CUDA setup can hang (cuInit waiting on a
wedged driver), crash (SIGILL on a CPU without AVX, SIGSEGV from mismatched libraries) or
print pages of logs. In a child with a time limit none of that can take gpuwhy down, and
TF's own log lines arrive on the child's stderr where the parent reads them.

Protocol: each line on stdout that starts with ``MARK`` is a JSON object. ``{"stage": ..}``
lines say where the child is (so a timeout can name the stage that hung) and carry what
is known so far; the last line is ``{"result": {...}}``. Only the standard library is used
before TensorFlow is imported.
"""

import json
import os
import sys
import time
import traceback

if __package__:  # imported by `gpuwhy run` to describe TF inside the watched process
    from gpuwhy.collect.child import build_info_file, cuda_libraries
else:  # run as a script in the child: standard library only before TF
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    # the same two modules, found by path: mypy sees one name bound twice
    import build_info_file  # type: ignore[no-redef]
    import cuda_libraries  # type: ignore[no-redef]

MARK = "@@gpuwhy-probe "
_DISTRIBUTIONS = (
    "tensorflow",
    "tensorflow-cpu",
    "tensorflow-gpu",
    "tf-nightly",
    "tf-nightly-cpu",
    "tensorflow-macos",
    "tensorflow-intel",
    "tensorflow-aarch64",
    "tensorflow-cpu-aws",
    "intel-tensorflow",
    "tensorflow-rocm",
)


def emit(**payload):
    sys.stdout.write(MARK + json.dumps(payload, default=str) + "\n")
    sys.stdout.flush()


def distribution():
    """The pip distribution that installed the package: tensorflow-cpu means a CPU build."""
    try:
        from importlib import metadata
    except ImportError:  # pragma: no cover - Python < 3.8
        return None
    for name in _DISTRIBUTIONS:
        try:
            metadata.version(name)
            return name
        except metadata.PackageNotFoundError:
            continue
    return None


def confirm_on_gpus(tf, gpus):
    """Run a real matmul on each GPU; return (device of the first, error, details)."""
    details, first_device, error = [], None, None
    try:
        from tensorflow.python.client import device_lib  # private: PCI bus ids per GPU

        descs = {
            d.name: d.physical_device_desc
            for d in device_lib.list_local_devices()
            if d.device_type == "GPU"
        }
    except Exception:  # noqa: BLE001 - only used to match TF GPUs with NVML ones
        descs = {}
    for i, gpu in enumerate(gpus):
        row = {"name": gpu.name}
        try:
            row.update(tf.config.experimental.get_device_details(gpu))
        except Exception as e:  # noqa: BLE001
            row["details_error"] = str(e)
        desc = descs.get(f"/device:GPU:{i}", "")
        if "pci bus id:" in desc:
            row["pci_bus_id"] = desc.split("pci bus id:")[1].split(",")[0].strip()
        try:
            with tf.device(f"/GPU:{i}"):
                a = tf.random.uniform((256, 256))
                b = tf.linalg.matmul(a, a)
            b.numpy()
            row["confirm_device"] = b.device
            if i == 0:  # ops without a device request go to GPU:0: it must work
                first_device = b.device
        except Exception as e:  # noqa: BLE001
            row["confirm_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
            error = error or row["confirm_error"]
        details.append(row)
    return first_device, error, details


def main():
    import platform

    result = {"installed": False, "python_version": platform.python_version()}
    location = build_info_file.tensorflow_location()
    if location is None:
        emit(result=result)
        return
    build = build_info_file.read_build_info(location)
    result.update(installed=True, location=location, build=build, distribution=distribution())
    emit(stage="import", known=result)

    t0 = time.perf_counter()
    try:
        import tensorflow as tf
    except BaseException as e:  # noqa: BLE001 - SystemExit from a broken install too
        result.update(
            import_ok=False,
            import_error=f"{type(e).__name__}: {e}".strip(),
            import_traceback=traceback.format_exc(limit=-8),
            libraries=cuda_libraries.probe(build),
        )
        emit(result=result)
        return
    result.update(
        import_ok=True,
        import_seconds=round(time.perf_counter() - t0, 3),
        version=getattr(tf, "__version__", None),
    )
    try:
        result["build"] = dict(tf.sysconfig.get_build_info())
    except Exception:  # noqa: BLE001 - keep the statically read one
        pass

    emit(stage="list_gpus", known=result)
    try:
        gpus = tf.config.list_physical_devices("GPU")
    except Exception as e:  # noqa: BLE001 - e.g. a half-removed install without tf.config
        result["probe_error"] = f"{type(e).__name__}: {e}".splitlines()[0]
        result["libraries"] = cuda_libraries.probe(result["build"])
        emit(result=result)
        return
    result["gpus"] = [g.name for g in gpus]
    if gpus:
        emit(stage="confirm", known=result)
        device, error, details = confirm_on_gpus(tf, gpus)
        result.update(confirm_device=device, confirm_error=error, gpu_details=details)

    emit(stage="libraries", known=result)
    result["loaded_libraries"] = cuda_libraries.mapped_libraries()
    result["libraries"] = cuda_libraries.probe(result["build"], result["loaded_libraries"])
    emit(result=result)


if __name__ == "__main__":
    main()
