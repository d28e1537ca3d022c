"""One flat list of nodes for a function and every function body it runs.

TensorFlow does not place a tf.function's nested bodies separately: before
placement, ``LowerFunctionalOpsPass`` lowers If/While/Case to
Switch/Merge/Enter/Exit and inlines PartitionedCall bodies
(common_runtime/lower_functional_ops.cc, lower_function_call_op.cc), so the
placer sees a single graph. This module builds that view: each call site gets
its own copy of the body, body arguments become the caller's input tensors,
and the call's outputs become the body's return values.

Like TF's function instantiation (``PruneFunctionBody``), nodes that reach
neither an output nor a stateful op are pruned: an unused op is never placed.

Known approximations: an If/Case call's outputs are taken from its last
branch (every branch is walked and placed), and a While body's outputs are
not fed back to its arguments, so a copy on the loop's back edge is missed.
Functions run by tf.data ops (the ``f`` of MapDataset, ReduceDataset: what
``for x in dataset`` inside a tf.function becomes) run in the input pipeline's
runtime, not in the step; they are listed as not audited.

The walk reads protos only (``FuncGraph.as_graph_def()`` once; the nested
FunctionDefs come with it in ``library``): touching Python ``Operation``
objects for 14,000 nodes costs more than the whole budget. Source locations
and static shapes are fetched later, only for the nodes a report names.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from gpuwhy.tfapi.kernel_registry import op_def

__all__ = ["CALL_OPS", "FlatGraph", "Node", "flatten"]

# op type -> (attrs naming the bodies, number of leading inputs that are not body arguments)
CALL_OPS: dict[str, tuple[tuple[str, ...], int]] = {
    "PartitionedCall": (("f",), 0),
    "StatefulPartitionedCall": (("f",), 0),
    "If": (("then_branch", "else_branch"), 1),
    "StatelessIf": (("then_branch", "else_branch"), 1),
    "Case": (("branches",), 1),
    "StatelessCase": (("branches",), 1),
    "While": (("cond", "body"), 0),
    "StatelessWhile": (("cond", "body"), 0),
}
_LOOPS = {"While", "StatelessWhile"}
MAX_NODES = 2_000_000  # a runaway recursion guard, far above real programs
DT_RESOURCE = 20


@dataclass
class Node:
    """One node as the placer sees it after inlining."""

    id: int
    name: str  # as in its own function body
    op: str
    node_def: Any
    function: str  # "" for the audited function itself, else the body's FunctionDef name
    requested: str  # "CPU", "GPU", other device type, or "" for none
    role: str  # "op", "arg" (function input), "call" (inlined away), "pruned" (unused)
    loop_depth: int
    jit: bool = False  # inside a function XLA compiles (jit_compile=True)
    in_types: list[int] = field(default_factory=list)
    out_types: list[int] = field(default_factory=list)
    in_args: list[str] = field(default_factory=list)  # op_def arg name of each input
    out_args: list[str] = field(default_factory=list)
    # (node id, output index); None where the producer was not found
    inputs: list[tuple[int, int] | None] = field(default_factory=list)
    controls: list[int] = field(default_factory=list)  # control-input node ids
    colocate_with: list[str] = field(default_factory=list)  # node names from "_class" attr
    call_chain: tuple[str, ...] = ()  # call-site names from the audited function down


@dataclass
class FlatGraph:
    """The audited function, its bodies inlined."""

    name: str
    nodes: list[Node]
    graphs: dict[str, Any]  # function name ("" = top) -> FuncGraph, for locations and shapes
    captured: set[str]  # names of top-level args that are captures (variables, tables, tensors)
    unaudited: list[str] = field(default_factory=list)  # bodies run elsewhere (tf.data)


class _Signature:
    """Input/output dtypes and arg names of one node, from its op's definition."""

    __slots__ = ("in_types", "in_args", "out_types", "out_args", "out_offsets")

    def __init__(self, args_in, args_out) -> None:
        self.in_types, self.in_args, _ = _expand(args_in)
        self.out_types, self.out_args, self.out_offsets = _expand(args_out)


def _expand(args: list[tuple[str, list[int]]]):
    types: list[int] = []
    names: list[str] = []
    offsets: dict[str, int] = {}
    for name, arg_types in args:
        offsets[name] = len(types)
        types.extend(arg_types)
        names.extend([name] * len(arg_types))
    return types, names, offsets


def _arg_types(arg: Any, attrs: Any) -> list[int]:
    if arg.type_list_attr:
        return list(attrs[arg.type_list_attr].list.type) if arg.type_list_attr in attrs else []
    dtype = arg.type
    if arg.type_attr:
        dtype = attrs[arg.type_attr].type if arg.type_attr in attrs else 0
    count = 1
    if arg.number_attr:
        count = attrs[arg.number_attr].i if arg.number_attr in attrs else 0
    return [dtype] * count


class _Signatures:
    """Per-node signatures, cached by the attrs that shape them."""

    def __init__(self, library: dict[str, Any]) -> None:
        self.library = library
        self._cache: dict[tuple, _Signature] = {}

    def of(self, node_def: Any) -> _Signature:
        definition = op_def(node_def.op)
        attrs = node_def.attr
        if definition is None:
            function = self.library.get(node_def.op)
            if function is None:
                return _Signature([], [])
            signature = function.signature
            return _Signature(
                [(a.name, [a.type]) for a in signature.input_arg],
                [(a.name, [a.type]) for a in signature.output_arg],
            )
        key_parts = [node_def.op]
        for attr in definition.attr:
            if attr.type in ("type", "list(type)", "int") and attr.name in attrs:
                value = attrs[attr.name]
                key_parts.append(
                    value.type
                    if attr.type == "type"
                    else value.i
                    if attr.type == "int"
                    else tuple(value.list.type)
                )
            else:
                key_parts.append(None)
        key = tuple(key_parts)
        cached = self._cache.get(key)
        if cached is None:
            cached = _Signature(
                [(a.name, _arg_types(a, attrs)) for a in definition.input_arg],
                [(a.name, _arg_types(a, attrs)) for a in definition.output_arg],
            )
            self._cache[key] = cached
        return cached


def _canonical(device: str) -> str:
    """ "/job:w/replica:0/task:0/device:CPU:1" and "/job:w/replica:0/task:0/cpu:1" alike."""
    return device.strip().lower().replace("/device:", "/")


def device_type(device: str) -> str:
    """ "/job:x/replica:0/task:0/device:GPU:1", "/GPU:0", "gpu" -> "GPU"; "" -> ""."""
    if not device:
        return ""
    for part in reversed(device.split("/")):
        if not part:
            continue
        if part.startswith("device:"):
            part = part[len("device:") :]
        if part.startswith(("job:", "replica:", "task:")):
            continue
        return part.split(":")[0].upper()
    return ""


class _Builder:
    def __init__(
        self,
        graph_def: Any,
        ignored_devices: frozenset[str] = frozenset(),
        xla_bodies: tuple[str, ...] = (),
    ) -> None:
        self.ignored_devices = frozenset(_canonical(d) for d in ignored_devices)
        # FunctionDef names TF gives the traces of these Python functions
        # ("__inference_one_step_on_data_1894"): compiled by XLA where they run
        self.xla_prefixes = tuple(f"__inference_{name}_" for name in xla_bodies)
        self.library = {f.signature.name: f for f in graph_def.library.function}
        self.signatures = _Signatures(self.library)
        self.nodes: list[Node] = []
        self.alias: dict[tuple[int, int], tuple[int, int]] = {}
        self.body_returns: list[tuple[int, int]] = []
        self.unaudited: dict[str, None] = {}

    def requested(self, device: str) -> str:
        """The device type a node asks for; none where the request is one of the
        ignored devices (a strategy's replicas, placed by the strategy, not the user)."""
        return "" if _canonical(device) in self.ignored_devices else device_type(device)

    def new_node(
        self,
        node_def: Any,
        function: str,
        requested: str,
        role: str,
        depth: int,
        chain,
        jit: bool = False,
    ) -> Node:
        if len(self.nodes) >= MAX_NODES:
            raise RecursionError("function bodies nest without end")
        signature = self.signatures.of(node_def)
        node = Node(
            id=len(self.nodes),
            name=node_def.name,
            op=node_def.op,
            node_def=node_def,
            function=function,
            requested=requested,
            role=role,
            loop_depth=depth,
            jit=jit,
            in_types=signature.in_types,
            out_types=signature.out_types,
            in_args=signature.in_args,
            out_args=signature.out_args,
            call_chain=chain,
        )
        if "_class" in node_def.attr:
            node.colocate_with = [
                v.decode()[len("loc:@") :]
                for v in node_def.attr["_class"].list.s
                if v.startswith(b"loc:@")
            ]
        self.nodes.append(node)
        if role == "op":
            self.note_unaudited(node_def)
        return node

    def note_unaudited(self, node_def: Any) -> None:
        """Functions an ordinary op runs (tf.data's map/reduce functions) are not walked."""
        if "Dataset" not in node_def.op:
            return
        for value in node_def.attr.values():
            names = (
                [value.func.name] if value.HasField("func") else [f.name for f in value.list.func]
            )
            for name in names:
                if name:
                    self.unaudited[f"{name} (run by {node_def.op} inside tf.data, on the CPU)"] = (
                        None
                    )

    def body_nodes(
        self, function_name: str, caller_device: str, arg_refs: list, depth: int, chain, jit: bool
    ):
        """Add one inlined copy of a FunctionDef; return refs of its outputs."""
        function = self.library.get(function_name)
        if function is None:
            return None
        args = {a.name: ref for a, ref in zip(function.signature.input_arg, arg_refs)}
        jit = jit or _must_compile(function.attr) or function_name.startswith(self.xla_prefixes)
        by_name: dict[str, Node] = {}
        created = []
        for node_def in function.node_def:
            requested = self.requested(node_def.device) or caller_device
            role = "call" if _is_call(node_def, self.library) else "op"
            node = self.new_node(node_def, function_name, requested, role, depth, chain, jit)
            by_name[node_def.name] = node
            created.append(node)
        for node in created:
            refs = []
            for text in node.node_def.input:
                if not _is_control(text, node, by_name):
                    refs.append(self._function_ref(text, by_name, args))
            node.inputs = refs
            if node.role == "call":
                self.inline(node, refs, depth, chain + (node.name,), jit)
        outputs = []
        for out in function.signature.output_arg:
            text = function.ret.get(out.name, "")
            outputs.append(self._function_ref(text, by_name, args) if text else None)
        self.body_returns.extend(ref for ref in outputs if ref is not None)
        for name in function.control_ret.values():
            if name in by_name:
                self.body_returns.append((by_name[name].id, -1))
        return outputs

    def _function_ref(self, text: str, by_name: dict, args: dict):
        parts = text.split(":")
        if len(parts) == 1:
            return args.get(parts[0])
        node = by_name.get(parts[0])
        if node is None:
            return None
        signature = self.signatures.of(node.node_def)
        start = signature.out_offsets.get(parts[1], 0)
        index = int(parts[2]) if len(parts) > 2 else 0
        return (node.id, start + index)

    def inline(self, call: Node, refs: list, depth: int, chain, jit: bool) -> None:
        attrs, skip = CALL_OPS.get(call.op, (None, 0))
        node_def = call.node_def
        if attrs is None:  # a direct call: the op type is the function's name
            bodies = [node_def.op]
        else:
            bodies = []
            for attr in attrs:
                value = node_def.attr[attr]
                if value.HasField("func"):
                    bodies.append(value.func.name)
                else:
                    bodies.extend(f.name for f in value.list.func)
        inner_depth = depth + (1 if call.op in _LOOPS else 0)
        results = []
        for body in bodies:
            outs = self.body_nodes(body, call.requested, refs[skip:], inner_depth, chain, jit)
            if outs is not None:
                results.append((body, outs))
        # The call's outputs are the values the (last-named) body returns: for While
        # that is "body", for If the else branch; both branches are walked anyway.
        if results:
            _, outs = results[-1]
            for index, ref in enumerate(outs):
                if ref is not None:
                    self.alias[(call.id, index)] = ref

    def resolve(self, ref):
        seen = 0
        while ref is not None and ref in self.alias and seen < 10_000:
            ref = self.alias[ref]
            seen += 1
        return ref


def _is_control(text: str, node: Node, by_name: dict[str, Node]) -> bool:
    """A "^name" input: record it as a control dependency of ``node``."""
    if not text.startswith("^"):
        return False
    control = by_name.get(text[1:])
    if control is not None:
        node.controls.append(control.id)
    return True


def _is_call(node_def: Any, library: dict) -> bool:
    return node_def.op in CALL_OPS or node_def.op in library


def _must_compile(attrs: Any) -> bool:
    return "_XlaMustCompile" in attrs and attrs["_XlaMustCompile"].b


def _prune(builder: _Builder, roots: list[int]) -> None:
    """Mark the ops no output or stateful op depends on as "pruned"."""
    nodes = builder.nodes
    for node in nodes:
        if node.role == "op":
            definition = op_def(node.op)
            if definition is not None and definition.is_stateful:
                roots.append(node.id)
    live = [False] * len(nodes)
    stack = roots
    while stack:
        index = stack.pop()
        if live[index]:
            continue
        live[index] = True
        node = nodes[index]
        stack.extend(ref[0] for ref in node.inputs if ref is not None)
        stack.extend(node.controls)
    for node in nodes:
        if node.role == "op" and not live[node.id]:
            node.role = "pruned"


def flatten(
    name: str,
    graph: Any,
    jit: bool = False,
    ignored_devices: frozenset[str] = frozenset(),
    xla_bodies: tuple[str, ...] = (),
) -> FlatGraph:
    """Flatten a FuncGraph (a concrete function's ``.graph``) and its bodies.

    ``jit``: the function is compiled by XLA (``tf.function(jit_compile=True)``).
    ``ignored_devices``: device requests read as none (full device names).
    ``xla_bodies``: names of tf.functions whose bodies a GPU machine compiles with XLA
    though this trace does not say so (Keras' per-batch step under jit_compile="auto",
    traced here without a GPU).
    """
    graph_def = graph.as_graph_def()
    graphs = {"": graph}
    for function_name, atomic in getattr(graph, "_functions", {}).items():
        graphs[function_name] = atomic
    builder = _Builder(graph_def, ignored_devices, xla_bodies)
    arg_names = [t.op.name for t in graph.inputs]
    captured = {t.op.name for t in getattr(graph, "internal_captures", [])}
    arg_set = set(arg_names)
    by_name: dict[str, Node] = {}
    created = []
    for node_def in graph_def.node:
        if node_def.name in arg_set:
            role = "arg"
        elif _is_call(node_def, builder.library):
            role = "call"
        else:
            role = "op"
        node = builder.new_node(node_def, "", builder.requested(node_def.device), role, 0, (), jit)
        by_name[node_def.name] = node
        created.append(node)
    for node in created:
        refs = []
        for text in node.node_def.input:
            if _is_control(text, node, by_name):
                continue
            source, _, index = text.partition(":")
            src = by_name.get(source)
            refs.append((src.id, int(index or 0)) if src is not None else None)
        node.inputs = refs
        if node.role == "call":
            builder.inline(node, refs, 0, (node.name,), jit)
    for node in builder.nodes:
        node.inputs = [builder.resolve(ref) for ref in node.inputs]
    roots = [ref[0] for ref in map(builder.resolve, builder.body_returns) if ref is not None]
    for tensor in graph.outputs:
        src = by_name.get(tensor.op.name)
        if src is not None:
            ref = builder.resolve((src.id, tensor.value_index))
            if ref is not None:
                roots.append(ref[0])
    for op in getattr(graph, "control_outputs", ()):
        if op.name in by_name:
            roots.append(by_name[op.name].id)
    _prune(builder, roots)
    return FlatGraph(
        name=name,
        nodes=builder.nodes,
        graphs=graphs,
        captured=captured,
        unaudited=list(builder.unaudited),
    )
