"""TensorFlow's own kernel lookup, asked for a GPU on any machine.

The standard Linux wheel registers every GPU kernel whether or not a GPU is
present, so asking the registry "which kernel would run this NodeDef on
``/device:GPU:0``" gives the answer a GPU machine would give, offline.

Two private entry points are used, both here only:

* ``_pywrap_kernel_registry.TryFindKernelClass(serialized NodeDef)`` runs
  ``FindKernelDef`` (tensorflow/python/util/kernel_registry.cc): it fills the
  op's default attrs, parses ``node_def.device`` and returns the kernel class
  name, or ``b""`` when no kernel matches. This is the authority on whether a
  GPU kernel exists. On failure it prints the registered kernels to fd 2,
  hence :func:`stderr_set_aside`.
* ``kernels.get_registered_kernels_for_op(op)`` returns the KernelDefs, whose
  ``host_memory_arg`` says which arguments a GPU kernel keeps in host memory
  (``.HostMemory("shape")`` in the REGISTER_KERNEL_BUILDER call). The matching
  KernelDef is chosen as ``FindKernelRegistration`` does
  (framework/op_kernel.cc): same device type, same ``_kernel`` label, every
  type constraint satisfied, highest ``priority`` wins; when none matches,
  the ``DEFAULT`` device registrations are tried the same way.

Results are cached per (op, label, type attrs): a ResNet50 training step has
14,000 nodes but a few hundred distinct keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.quiet_stderr import stderr_set_aside

__all__ = ["GpuKernel", "KernelRegistry", "op_def"]


@dataclass(frozen=True)
class GpuKernel:
    """What TensorFlow would run on a GPU for one node, or why nothing."""

    class_name: str  # "" when no GPU kernel matches
    host_memory_args: frozenset[str]  # arg names (op_def input/output arg names)
    op_has_gpu_kernels: bool  # some GPU kernel exists for the op, for other dtypes

    @property
    def exists(self) -> bool:
        return bool(self.class_name)


_NOISE_PREFIXES = (
    b"\t (OpKernel was found",
    b"\t.  Registered:",
    b"  device='",
    b"  <no registered kernels>",
)


def _is_registry_noise(line: bytes) -> bool:
    # The block starts with TF's LOG(WARNING) from kernel_registry.cc ("Op [AsString]:
    # NOT_FOUND: No registered 'AsString' OpKernel for GPU devices ..."), then lists kernels.
    return line.startswith(_NOISE_PREFIXES) or b"kernel_registry.cc" in line


_OP_DEFS: dict[str, Any] = {}


def op_def(op_type: str) -> Any | None:
    """The registered OpDef proto for an op type, or None (a function name)."""
    try:
        return _OP_DEFS[op_type]
    except KeyError:
        from tensorflow.python.framework import op_def_registry

        definition = _OP_DEFS[op_type] = op_def_registry.get(op_type)
        return definition


_TYPE_ATTR_SPECS: dict[str, tuple] = {}


def _type_attr_specs(op_type: str, definition: Any) -> tuple:
    """(name, is_list, default) for each type attr of an op, read from its OpDef once."""
    specs = _TYPE_ATTR_SPECS.get(op_type)
    if specs is None:
        found = []
        for attr in definition.attr:
            if attr.type not in ("type", "list(type)"):
                continue
            is_list = attr.type == "list(type)"
            default = None
            if attr.HasField("default_value"):
                default = (
                    tuple(attr.default_value.list.type) if is_list else attr.default_value.type
                )
            found.append((attr.name, is_list, default))
        specs = _TYPE_ATTR_SPECS[op_type] = tuple(found)
    return specs


def _type_attrs(node_def: Any, definition: Any) -> tuple:
    """The attrs kernel constraints can test: every type and type-list attr."""
    values = []
    attrs = node_def.attr
    for name, is_list, default in _type_attr_specs(node_def.op, definition):
        if name in attrs:
            value = attrs[name]
            values.append((name, tuple(value.list.type) if is_list else value.type))
        elif default is not None:
            values.append((name, default))
    return tuple(values)


class KernelRegistry:
    """Cached GPU kernel lookups; one instance per audit is enough."""

    def __init__(self, device: str = "/device:GPU:0") -> None:
        self.device = device
        self.device_type = device.rsplit(":", 2)[-2].upper() if ":" in device else device.upper()
        self._cache: dict[tuple, GpuKernel] = {}
        self._kernel_defs: dict[str, list] = {}

    @staticmethod
    def key(node_def: Any) -> tuple | None:
        """Cache key for a NodeDef, None for ops that are not registered (functions)."""
        definition = op_def(node_def.op)
        if definition is None:
            return None
        label = node_def.attr["_kernel"].s if "_kernel" in node_def.attr else b""
        return (node_def.op, label, _type_attrs(node_def, definition))

    def lookup_many(self, node_defs: dict[tuple, Any]) -> None:
        """Look up every key not yet cached, in one quiet batch.

        ``node_defs`` maps a key (from :meth:`key`) to one NodeDef having it.
        """
        missing = {k: nd for k, nd in node_defs.items() if k not in self._cache}
        if not missing:
            return
        from tensorflow.core.framework import node_def_pb2
        from tensorflow.python.util import _pywrap_kernel_registry

        found: dict[tuple, bytes] = {}
        requests = []
        for key, node_def in missing.items():
            request = node_def_pb2.NodeDef()
            request.name = "gpuwhy_lookup"
            request.op = node_def.op
            for name, value in node_def.attr.items():
                request.attr[name].CopyFrom(value)
            request.device = self.device
            requests.append((key, request.SerializeToString()))
        with stderr_set_aside(_is_registry_noise):
            for key, serialized in requests:
                found[key] = _pywrap_kernel_registry.TryFindKernelClass(serialized)
        for key, class_name in found.items():
            self._cache[key] = self._describe(key, class_name)

    def lookup(self, node_def: Any) -> GpuKernel | None:
        """The GPU kernel for one NodeDef (None when the op is not registered)."""
        key = self.key(node_def)
        if key is None:
            return None
        if key not in self._cache:
            self.lookup_many({key: node_def})
        return self._cache[key]

    def cached(self, key: tuple) -> GpuKernel:
        return self._cache[key]

    def _describe(self, key: tuple, class_name: bytes) -> GpuKernel:
        op_type, label, type_attrs = key
        defs = self._defs_for(op_type)
        gpu_defs = [k for k in defs if k.device_type == self.device_type]
        default_defs = [k for k in defs if k.device_type == "DEFAULT"]
        host_args: frozenset[str] = frozenset()
        if class_name:
            attrs = dict(type_attrs)
            # FindKernelRegistration: the device's own registrations first, then
            # DEVICE_DEFAULT ones (how int32 Const gets its HostMemory output).
            for candidates in (gpu_defs, default_defs):
                best = None
                for kernel in candidates:
                    if kernel.label.encode() != label or not _satisfies(kernel, attrs):
                        continue
                    if best is None or kernel.priority > best.priority:
                        best = kernel
                if best is not None:
                    host_args = frozenset(best.host_memory_arg)
                    break
        return GpuKernel(
            class_name=class_name.decode(errors="replace"),
            host_memory_args=host_args,
            op_has_gpu_kernels=bool(gpu_defs or default_defs),
        )

    def _defs_for(self, op_type: str) -> list:
        if op_type not in self._kernel_defs:
            from tensorflow.python.framework import kernels

            self._kernel_defs[op_type] = list(kernels.get_registered_kernels_for_op(op_type).kernel)
        return self._kernel_defs[op_type]


def _satisfies(kernel: Any, attrs: dict) -> bool:
    for constraint in kernel.constraint:
        allowed = set(constraint.allowed_values.list.type)
        value = attrs.get(constraint.name)
        if value is None:
            return False
        values = value if isinstance(value, tuple) else (value,)
        if any(v not in allowed for v in values):
            return False
    return True
