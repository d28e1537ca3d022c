"""``gpuwhy.audit(...)`` and ``gpuwhy audit PATH``: the placement audit on demand.

Turns what a user has in hand (a tf.function, a concrete function, a Keras
model, a plain Python function, a SavedModel directory or a Keras file) into
traced concrete functions, audits them, and returns a Record whose findings
come from the same rules as ``gpuwhy run``.
"""

from __future__ import annotations

import os
import re
import zipfile
from pathlib import Path
from typing import Any

from gpuwhy.collect.placement import AuditTarget, audit_functions
from gpuwhy.facts import Facts, TargetFacts
from gpuwhy.record import Record
from gpuwhy.tfapi.graph_ops import relative
from gpuwhy.tfapi.training import traced_before

__all__ = ["AuditError", "audit", "audit_path", "targets_for"]


class AuditError(ValueError):
    """Something that cannot be audited, said in one line."""


def audit(obj: Any, *example_args: Any, verify: bool = False, **example_kwargs: Any) -> Record:
    """Audit the placement of ``obj`` traced with the example arguments.

    ``obj`` is a ``tf.function``, a ConcreteFunction, a Keras model (with ``x, y``: its
    training step; with ``x`` or nothing: its forward pass) or a Python function.
    ``verify=True`` runs it once with TensorFlow's real placer (needs a GPU): its side
    effects (variable updates, reading from an iterator) happen as in any call. A Keras
    training step is never run.
    """
    targets = targets_for(obj, example_args, example_kwargs)
    facts, _ = audit_functions(targets, verify=verify)
    return Record.diagnose("audit", Facts(placement=facts))


def audit_path(
    path: str | os.PathLike,
    *,
    verify: bool = False,
    target: str | None = None,
    batch: int | None = None,
) -> Record:
    """Audit a SavedModel directory or a Keras ``.keras``/``.h5`` file; with ``target``
    (a GPU name or "auto"), also project its first function onto that GPU, an unknown
    batch dimension read as ``batch``. A model that cannot be audited, or has nothing to
    project, is an :class:`AuditError`."""
    targets = targets_for_path(Path(path))
    placement, _ = audit_functions(targets, verify=verify, batch=batch)
    facts = Facts(placement=placement, target=TargetFacts(target) if target else None)
    record = Record.diagnose("audit", facts)
    refused = record.derived.projection_refused
    if refused is not None:  # the GPU unknown here, or nothing to cost
        raise AuditError(refused)
    return record


def _label(name: str | bytes) -> str:
    if isinstance(name, bytes):  # ConcreteFunction.name is bytes in TF 2.21
        name = name.decode(errors="replace")
    name = re.sub(r"^__inference_", "", name)
    return re.sub(r"_\d+$", "", name)


def _code_location(function: Any) -> str | None:
    function = getattr(function, "__wrapped__", function)
    code = getattr(function, "__code__", None)
    return relative(code.co_filename, code.co_firstlineno) if code else None


def _is_concrete(obj: Any) -> bool:
    return hasattr(obj, "graph") and hasattr(obj, "structured_input_signature")


def _is_tf_function(obj: Any) -> bool:
    return hasattr(obj, "get_concrete_function") and hasattr(obj, "python_function")


def _is_keras_model(obj: Any) -> bool:
    return hasattr(obj, "train_step") and hasattr(obj, "compile") and hasattr(obj, "layers")


def targets_for(obj: Any, args: tuple, kwargs: dict) -> list[AuditTarget]:
    import tensorflow as tf

    call_args = args or None
    if _is_concrete(obj):
        return [AuditTarget(_label(obj.name), obj, example_args=call_args)]
    if _is_tf_function(obj):
        location = _code_location(obj.python_function)
        name = getattr(obj.python_function, "__name__", "function")
        if args or kwargs:
            concrete = obj.get_concrete_function(*args, **kwargs)
            return [AuditTarget(name, concrete, location, call_args if not kwargs else None)]
        traced = traced_before(obj)
        if not traced:
            raise AuditError(
                f"tf.function {name!r} has not been traced yet: pass example arguments, "
                f"e.g. gpuwhy.audit({name}, x)"
            )
        return [AuditTarget(name, cf, location) for cf in traced]
    if _is_keras_model(obj):
        return _keras_targets(obj, args)
    if callable(obj):
        if not args and not kwargs:
            raise AuditError(
                "a Python function needs example arguments to be traced: gpuwhy.audit(fn, x)"
            )
        function = tf.function(obj)
        concrete = function.get_concrete_function(*args, **kwargs)
        name = getattr(obj, "__name__", "function")
        return [AuditTarget(name, concrete, _code_location(obj), call_args if not kwargs else None)]
    raise AuditError(
        f"cannot audit a {type(obj).__name__}: pass a tf.function, a Keras model or a function"
    )


def _keras_xla_note(model: Any) -> str | None:
    """Keras 3 compiles steps with XLA on a GPU machine when ``jit_compile="auto"`` (the
    default) and every layer supports it (keras/src/trainers/trainer.py
    ``_resolve_auto_jit_compile``). Without a GPU it resolves to False, so the two cannot
    be told apart here: the step is audited without XLA, and the report says so."""
    if getattr(model, "_jit_compile", None) is True or _gpu_here():
        return None
    try:
        from keras.src.trainers.trainer import model_supports_jit

        if not model_supports_jit(model):
            return None
    except Exception:  # noqa: BLE001 - a Keras private helper: any failure means no note
        return None
    return (
        "audited without XLA; on a GPU, Keras compiles this step with XLA unless "
        "compile(jit_compile=False) is set, and XLA then fuses it into one GPU cluster"
    )


def _gpu_here() -> bool:
    import tensorflow as tf

    return bool(tf.config.list_physical_devices("GPU"))


def _keras_targets(model: Any, args: tuple) -> list[AuditTarget]:
    import tensorflow as tf

    name = getattr(model, "name", "model")
    jit = getattr(model, "_jit_compile", None) is True
    note = _keras_xla_note(model)

    def to_tensors(value: Any) -> Any:
        return tf.nest.map_structure(tf.convert_to_tensor, value)

    if len(args) >= 2 and getattr(model, "optimizer", None) is not None:
        data = tuple(to_tensors(a) for a in args[:3])
        step = tf.function(model.train_step, jit_compile=jit)
        concrete = step.get_concrete_function(data)
        # Running a training step would update the weights: never verified.
        return [AuditTarget(f"{name}.train_step", concrete, None, None, note=note)]
    forward = tf.function(lambda x: model(x, training=False), jit_compile=jit)
    if args:
        x = to_tensors(args[0])
        return [
            AuditTarget(
                f"{name}.predict_step", forward.get_concrete_function(x), None, (x,), note=note
            )
        ]
    inputs = getattr(model, "inputs", None)
    if not inputs:
        raise AuditError(
            f"Keras model {name!r} is not built: pass example inputs, e.g. gpuwhy.audit(model, x, y)"
        )
    specs = [tf.TensorSpec(t.shape, t.dtype) for t in inputs]
    signature = specs[0] if len(specs) == 1 else specs
    return [
        AuditTarget(
            f"{name}.predict_step", forward.get_concrete_function(signature), None, None, note=note
        )
    ]


def _example_inputs(function: Any) -> dict | None:
    """Zeros matching a signature's inputs (unknown dims as 1), for --verify; None if unknowable."""
    import tensorflow as tf

    try:
        _, specs = function.structured_input_signature
    except (AttributeError, ValueError):
        return None
    inputs = {}
    for name, spec in specs.items():
        if not isinstance(spec, tf.TensorSpec) or spec.shape.rank is None:
            return None
        shape = [d if d is not None else 1 for d in spec.shape.as_list()]
        if spec.dtype == tf.string:
            inputs[name] = tf.fill(shape, "")
        else:
            inputs[name] = tf.zeros(shape, spec.dtype)
    return inputs


_HDF5_SIGNATURE = b"\x89HDF\r\n\x1a\n"
_KERAS_NOT_ZIP = "not a valid Keras archive (a .keras file is a zip)"
_H5_NOT_HDF5 = "not a valid HDF5 file (a .h5 Keras model is HDF5)"


def _one_line(error: BaseException) -> str:
    """The first non-blank line of an error, at most 300 characters: TF and Keras errors
    run to many lines, and ``gpuwhy audit`` must fail in one."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = lines[0] if lines else type(error).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _head(path: Path, size: int = 4096) -> bytes:
    """The first bytes of a file, or an AuditError saying why it cannot be read (Keras
    reports an unreadable file as "File not found", which sends the user the wrong way)."""
    try:
        with open(path, "rb") as file:
            return file.read(size)
    except OSError as error:
        raise AuditError(f"{path}: cannot be read: {error.strerror or error}") from None


def _looks_like(head: bytes) -> str:
    """What a file that is not the expected format seems to be, for the error line."""
    if not head:
        return "the file is empty (0 bytes)"
    if head.startswith(_HDF5_SIGNATURE):
        return "it is an HDF5 file (a legacy Keras model? name it .h5)"
    if head.startswith(b"PK\x03\x04"):
        return "it starts like a zip but has no zip directory at its end (truncated or still being written?)"
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return f"unknown binary content starting {head[:8]!r}"
    first = text.strip().splitlines()[0][:60] if text.strip() else ""
    return f"it is a text file (starts {first!r})"


def _check_keras_archive(path: Path) -> None:
    """Refuse a .keras file that is not a zip with a ``config.json`` in one line that says
    so: Keras 3's ``load_model`` calls any non-zip ``.keras`` file "File not found"
    (keras/src/saving/saving_api.py), which is wrong for a truncated or text file."""
    head = _head(path)
    if not head or not zipfile.is_zipfile(path):
        raise AuditError(f"{path}: {_KERAS_NOT_ZIP}: {_looks_like(head)}")
    try:
        with zipfile.ZipFile(path) as archive:
            names = archive.namelist()
    except (zipfile.BadZipFile, OSError) as error:
        raise AuditError(f"{path}: {_KERAS_NOT_ZIP}: {_one_line(error)}") from None
    if "config.json" not in names:
        shown = ", ".join(names[:3]) + (", ..." if len(names) > 3 else "") or "nothing"
        raise AuditError(
            f"{path}: not a valid Keras archive: the zip has no config.json (it holds {shown})"
        )


def _has_hdf5_signature(path: Path) -> bool:
    """HDF5's signature is at byte 0, or at 512, 1024, 2048, ... after a user block."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as file:
            offset = 0
            while offset + len(_HDF5_SIGNATURE) <= size:
                file.seek(offset)
                if file.read(len(_HDF5_SIGNATURE)) == _HDF5_SIGNATURE:
                    return True
                offset = offset * 2 or 512
    except OSError as error:
        raise AuditError(f"{path}: cannot be read: {error.strerror or error}") from None
    return False


def _check_hdf5(path: Path) -> None:
    """Refuse a .h5 file that is not HDF5 in one line naming it: h5py says "file
    signature not found" and leaves out which file and what it is instead."""
    if _has_hdf5_signature(path):
        return
    if zipfile.is_zipfile(path):
        described = "it is a zip (a .keras archive? name it .keras)"
    else:
        described = _looks_like(_head(path))
    raise AuditError(f"{path}: {_H5_NOT_HDF5}: {described}")


def _saved_model_problem(path: Path) -> str | None:
    """What is wrong with a SavedModel's ``saved_model.pb`` when TF failed to load it, or
    None to keep TF's own words: TF calls an empty one "requires a `tags=` argument",
    which hides that it is empty. Only asked after a failure: parsing a large graph twice
    on every audit would be waste."""
    proto = path / "saved_model.pb"
    if not proto.is_file():
        return None  # saved_model.pbtxt: TF's own message says enough
    try:
        data = proto.read_bytes()
        from google.protobuf.message import DecodeError
        from tensorflow.core.protobuf import saved_model_pb2
    except (OSError, ImportError):
        return None
    try:
        saved_model = saved_model_pb2.SavedModel.FromString(data)
    except DecodeError as error:
        return f"saved_model.pb is corrupt ({_one_line(error)})"
    if not saved_model.meta_graphs:
        return "saved_model.pb is " + (
            "empty (0 bytes)" if not data else "a protobuf with no MetaGraph in it"
        )
    return None


def targets_for_path(path: Path) -> list[AuditTarget]:
    """Audit targets of a model on disk; any file that is not a loadable model is an
    AuditError naming the file and what is wrong with it, in one line."""
    if not path.exists():
        raise AuditError(f"{path}: no such file or directory")
    if path.is_dir():
        if not (path / "saved_model.pb").exists() and not (path / "saved_model.pbtxt").exists():
            raise AuditError(f"{path} is a directory but not a SavedModel (no saved_model.pb)")
        return _saved_model_targets(path)
    if path.suffix in (".keras", ".h5", ".hdf5"):
        if path.suffix == ".keras":
            _check_keras_archive(path)
        else:
            _check_hdf5(path)
        import keras

        try:
            model = keras.models.load_model(path, compile=False)
        except Exception as error:  # noqa: BLE001 - whatever Keras raises is the user's file, said in one line
            raise AuditError(f"{path}: Keras could not load it: {_one_line(error)}") from None
        return _keras_targets(model, ())
    if path.name in ("saved_model.pb", "saved_model.pbtxt"):
        raise AuditError(
            f"{path}: pass the SavedModel's directory ({path.parent}), not the file in it"
        )
    raise AuditError(f"{path}: not a SavedModel directory or a .keras/.h5 file")


def _saved_model_targets(path: Path) -> list[AuditTarget]:
    import tensorflow as tf

    try:
        loaded = tf.saved_model.load(str(path))
    except Exception as error:  # noqa: BLE001 - whatever TF raises is the user's SavedModel, said in one line
        problem = _saved_model_problem(path)
        if problem:
            raise AuditError(f"{path}: not a valid SavedModel: {problem}") from None
        raise AuditError(
            f"{path}: TensorFlow could not load the SavedModel: {_one_line(error)}"
        ) from None
    targets = [
        AuditTarget(f"signature {key}", function, example_kwargs=_example_inputs(function))
        for key, function in loaded.signatures.items()
    ]
    if not targets:
        for attribute in sorted(dir(loaded)):
            if attribute.startswith("_") and attribute != "__call__":
                continue
            value: Any = getattr(loaded, attribute, None)  # whatever TF restored
            if _is_tf_function(value) or hasattr(value, "_list_all_concrete_functions"):
                for concrete in traced_before(value):
                    targets.append(AuditTarget(f"{attribute}", concrete))
    if not targets:
        raise AuditError(f"{path}: the SavedModel has no signatures or traced functions to audit")
    return targets
