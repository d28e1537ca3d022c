"""What a tf.data function runs, judged once for ``gpuwhy run`` and ``gpuwhy fix``.

A dataset function (``map``'s, ``filter``'s, ``interleave``'s ...) is a traced graph with a
library of nested functions. Whether it runs Python (``py_function``, ``numpy_function``,
``from_generator``), random ops, ops with state, or image/audio codecs is read from its
ops here, with one list of each; statefulness follows TF's own rule
(``function_utils::IsFunctionStateful`` in grappler/optimizers/data/function_utils.cc,
the one map_parallelization uses).
"""

from __future__ import annotations

import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from gpuwhy.tfapi.callables import function_site, is_bound_method, unwrapped
from gpuwhy.tfapi.graph_ops import PYTHON_OPS

GENERATOR_OP = "GeneratorDataset"  # from_generator inside a function: Python too
CODEC_OPS = frozenset(
    {
        "DecodeJpeg",
        "DecodeAndCropJpeg",
        "DecodePng",
        "DecodeImage",
        "DecodeBmp",
        "DecodeGif",
        "DecodeWebP",
        "DecodeWav",
        "EncodeJpeg",
        "EncodeJpegVariableQuality",
        "EncodePng",
        "EncodeWav",
        "DecodeCompressed",
    }
)
_READER_OPS = {
    "TFRecordDataset": 1,
    "TFRecordDatasetV2": 1,
    "TextLineDataset": 1,
    "FixedLengthRecordDataset": 4,
    "FixedLengthRecordDatasetV2": 4,
}  # compression input

# Markers of ops whose output is random (stateless random ops included: ``StatelessRandom
# Uniform`` is random too, but the same every pass for the same seed).
_RANDOM_MARKERS = (
    "Random",
    "Multinomial",
    "TruncatedNormal",
    "Rng",
    "StatefulUniform",
    "StatefulStandardNormal",
    "StatefulTruncatedNormal",
    "Binomial",
    "SampleDistortedBoundingBox",
    "SeedGenerator",
    "ShuffleDataset",
    "ShuffleAndRepeatDataset",
    "NonDeterministicInts",
)


def runs_python(op: str) -> bool:
    return op in PYTHON_OPS or op == GENERATOR_OP


def is_random_op(op: str) -> bool:
    return any(marker in op for marker in _RANDOM_MARKERS)


# Stateful ops whose result for one element does not depend on the order of calls or
# on other elements: reading a table or a variable, asserting, printing (prints may
# come out in another order, the elements do not change).
_READ_ONLY_STATEFUL = frozenset(
    {
        "LookupTableFindV2",
        "LookupTableSizeV2",
        "LookupTableExportV2",
        "ReadVariableOp",
        "VarHandleOp",
        "Assert",
        "PrintV2",
        "Print",
        "NoOp",
    }
)


def order_dependent(stateful_ops: Iterable[str]) -> bool:
    """Whether a function with these stateful ops (TF's IsFunctionStateful's) may give
    an element another result when calls run in parallel or in another order: a random
    draw, Python not declared pure, an op that writes state. Reading a lookup table or a
    variable does not (``TextVectorization``'s vocabulary lookup, a ``StringLookup``),
    though it keeps TF's map_parallelization off."""
    return any(_may_change_elements(op) for op in stateful_ops)


def _may_change_elements(op: str) -> bool:
    """A stateful op whose result for an element may depend on other calls: not a read,
    not a holder of other functions, not a dataset's description."""
    return (
        op not in _READ_ONLY_STATEFUL
        and op not in _CONTAINERS
        and not op.endswith(_DATASET_SUFFIXES)
    )


# Ops that only hold other functions: judged by the functions of the library instead.
_CONTAINERS = frozenset(
    {
        "StatefulPartitionedCall",
        "PartitionedCall",
        "If",
        "StatelessIf",
        "While",
        "StatelessWhile",
        "Case",
        "StatelessCase",
        "For",
        "RemoteCall",
    }
)
# Dataset-creating ops inside a function (interleave's TFRecordDataset) are stateful in
# the op registry but only describe a dataset; the random and Python ones are caught
# by the lists above first.
_DATASET_SUFFIXES = ("Dataset", "DatasetV2", "DatasetV3", "DatasetV4")


@dataclass(frozen=True)
class FunctionInfo:
    """What one dataset function runs, read from its traced graph and its library."""

    name: str  # the user's function ("parse", "<lambda>")
    location: str | None = None  # file:line where it is defined
    ops: tuple[str, ...] = ()  # op types, sorted, library included
    random: tuple[str, ...] = ()  # stateful random ops (RandomUniform, ...)
    python: tuple[str, ...] = ()  # EagerPyFunc / PyFunc / GeneratorDataset
    unsafe_stateful: tuple[str, ...] = ()  # other stateful ops: writes, queues, unknown
    tf_parallelises: bool = False  # TF's map_parallelization would run it in parallel
    readable: bool = True  # False: the graph could not be read (treat as unsafe)
    method: bool = False  # a bound method (written ``obj.name``)

    @property
    def stateless_enough(self) -> bool:
        """Parallel calls give the same elements: no random, Python or writing ops."""
        return self.readable and not (self.random or self.python or self.unsafe_stateful)

    @property
    def python_declared_pure(self) -> bool:
        """Only ``numpy_function(stateful=False)``: the user declared it pure."""
        return set(self.python) <= {"PyFuncStateless"}


def function_info(wrapper: Any) -> FunctionInfo:
    """Judge a ``StructuredFunctionWrapper`` by the ops of its traced function.

    The same walk as TF's ``function_utils::IsFunctionStateful`` (grappler/optimizers/
    data/function_utils.cc, used by map_parallelization.cc): every node of the function
    and of the functions it calls, stateful per the op registry, ``Assert`` excepted.
    """
    try:
        cached = _INFO_CACHE.get(wrapper)
    except TypeError:
        cached = None
    if cached is not None:
        return cached
    info = _read_function_info(wrapper)
    try:
        _INFO_CACHE[wrapper] = info
    except TypeError:
        pass
    return info


_INFO_CACHE: weakref.WeakKeyDictionary[Any, FunctionInfo] = weakref.WeakKeyDictionary()


def _read_function_info(wrapper: Any) -> FunctionInfo:
    from tensorflow.python.framework import op_def_registry

    func = getattr(wrapper, "_func", None)
    name, location = user_function_site(func)
    method = is_bound_method(func)
    try:
        graph_def = wrapper.function.graph.as_graph_def()
    except Exception:  # noqa: BLE001 - a legacy Defun or something new: unknown
        return FunctionInfo(name, location, readable=False, method=method)
    op_types: set[str] = {n.op for n in graph_def.node}
    for fdef in graph_def.library.function:
        op_types.update(n.op for n in fdef.node_def)
    random, python, unsafe = set(), set(), set()
    tf_stateful = False
    for op in op_types:
        op_def = op_def_registry.get(op)
        stateful = op_def is None or op_def.is_stateful
        if runs_python(op):
            python.add(op)
        if op_def is not None and stateful and is_random_op(op):
            random.add(op)
        if stateful and op not in _CONTAINERS and op != "Assert":
            tf_stateful = True
        if stateful and not runs_python(op) and op not in random and _may_change_elements(op):
            unsafe.add(op)
    try:  # TF's own judgement (If/While with stateless branches are stateless)
        top = wrapper.function.function_def
        library = {f.signature.name: f for f in graph_def.library.function}
        library.setdefault(top.signature.name, top)
        tf_stateful = _function_stateful(top, library)
    except Exception:  # noqa: BLE001 - no FunctionDef: the op list's answer stands
        pass
    return FunctionInfo(
        name=name,
        location=location,
        ops=tuple(sorted(op_types)),
        random=tuple(sorted(random)),
        python=tuple(sorted(python)),
        unsafe_stateful=tuple(sorted(unsafe)),
        tf_parallelises=not tf_stateful,
        method=method,
    )


def user_function_site(func: Any) -> tuple[str, str | None]:
    """The user's function behind tf.function, functools.partial and gpuwhy's replay;
    its file:line only when it is the user's own (not ``table.lookup`` inside TF)."""
    name, location = function_site(func)
    return name or type(unwrapped(func)).__name__, location


@dataclass
class FunctionContents:
    python: bool = False
    python_functions: tuple = ()
    stateful_ops: tuple = ()
    random_ops: tuple = ()
    stateful_random: bool = False
    codec_ops: tuple = ()


def _op_def(name: str) -> Any:
    from tensorflow.python.framework import op_def_registry

    try:
        return op_def_registry.get(name)
    except Exception:  # noqa: BLE001
        return None


def _node_stateful(node: Any, library: dict, skip_assert: bool = True, depth: int = 0) -> bool:
    """``function_utils::IsNodeStateful`` (function_utils.cc)."""
    op_def = _op_def(node.op)
    if op_def is None:
        return True
    if not op_def.is_stateful:
        return False
    if skip_assert and node.op == "Assert":
        return False
    branches = {"If": ("then_branch", "else_branch"), "While": ("cond", "body")}.get(node.op)
    if branches and depth < 20:
        defs = [library.get(node.attr[a].func.name) for a in branches if a in node.attr]
        if len(defs) == 2 and all(
            d is not None and not _function_stateful(d, library, skip_assert, depth + 1)
            for d in defs
        ):
            return False
    return True


def _function_stateful(fdef: Any, library: dict, skip_assert: bool = True, depth: int = 0) -> bool:
    """``function_utils::IsFunctionStateful`` (function_utils.cc)."""
    if not fdef.signature.is_stateful:
        return False
    return any(_node_stateful(n, library, skip_assert, depth) for n in fdef.node_def)


def _compression(fdef: Any, node: Any) -> str | None:
    """The constant compression_type input of a reader op inside a function."""
    index = _READER_OPS.get(node.op)
    if index is None or len(node.input) <= index:
        return None
    source = node.input[index].split(":")[0].lstrip("^")
    for other in fdef.node_def:
        if other.name == source and other.op == "Const":
            values = other.attr["value"].tensor.string_val
            text = values[0].decode(errors="replace").upper() if values else ""
            return text if text in ("GZIP", "ZLIB") else None
    return None


def _python_function(token: bytes) -> str | None:
    from tensorflow.python.ops import script_ops

    try:
        registered = script_ops._py_funcs.get(token.decode())
    except Exception:  # noqa: BLE001
        return None
    if registered is None:
        return None
    function = getattr(registered, "_func", registered)  # EagerFunc wraps py_function's callable
    name, location = function_site(function)
    if location is None:
        return None  # TF's own (from_generator's helpers)
    return f"{name} ({location})"


def function_contents(concrete_functions: Iterable[Any]) -> FunctionContents:
    """What traced tf.data functions (ConcreteFunctions) and their nested ones contain."""
    contents = FunctionContents()
    python_functions: dict[str, None] = {}
    stateful_ops: dict[str, None] = {}
    random_ops: dict[str, None] = {}
    codecs: dict[str, None] = {}
    for concrete in concrete_functions:
        try:
            top = concrete.function_def
            library = {f.signature.name: f for f in concrete.graph.as_graph_def().library.function}
        except Exception:  # noqa: BLE001 - a function TF did not keep
            continue
        library.setdefault(top.signature.name, top)
        if _function_stateful(top, library):
            for node in top.node_def:
                if _node_stateful(node, library):
                    stateful_ops[node.op] = None
        for fdef in library.values():
            for node in fdef.node_def:
                op = node.op
                if runs_python(op):
                    contents.python = True
                    if "token" in node.attr:
                        described = _python_function(node.attr["token"].s)
                        if described:
                            python_functions[described] = None
                if is_random_op(op) and not op.endswith("Dataset"):
                    random_ops[op] = None
                    op_def = _op_def(op)
                    if op_def is not None and op_def.is_stateful:
                        contents.stateful_random = True
                if op in CODEC_OPS:
                    codecs[op] = None
                compression = _compression(fdef, node)
                if compression:
                    codecs[compression] = None
    contents.python_functions = tuple(python_functions)
    contents.stateful_ops = tuple(stateful_ops)
    contents.random_ops = tuple(random_ops)
    contents.codec_ops = tuple(codecs)
    return contents
