"""The statements of a loop's body that issue a step's ops, as a function of their own.

An eager training loop rarely moves into a ``tf.function`` whole: around the tape, the
gradients and ``apply_gradients`` it keeps Python's own bookkeeping, a loss summed into a
Python float that a ``print`` after the loop reads, a batch sliced from NumPy arrays.
Those lines cannot run in a graph as written (a Python float added to in a traced
function is added to once, at the trace), and they need not: only the statements that
issue the ops are the step. Here they are the smallest run of the body's statements
holding every line the ops came from, lifted out as the "extract function" refactoring
does it:

- its parameters are the names it reads before it assigns them that the loop binds (its
  target, the statements before it, or a previous pass);
- it returns the names it assigns that are read outside it (the statements after it, a
  later pass, the code after the loop) and those it also takes (a value carried from
  one pass to the next);
- the statements become one call, ``loss = train_step(xb, yb)``.

The statements are the run of neighbours that issues the most ops, each of them issuing
ops and reading no tensor's value into Python: a line between them such as
``epoch_loss += loss.numpy()`` or ``norms.append(float(tf.linalg.global_norm(grads)))``
ends it.

Not lifted where they jump (``break``, ``continue``, ``return``, ``yield``, ``global``),
span more than ``MAX_LINES`` lines or hold no op line. What a graph changes beyond that
(a ``print`` run only at the trace, a Python value that retraces) is for ``gpuwhy fix``'s
runs to show: it compares the results and the speed before it keeps a fix.
"""

from __future__ import annotations

import ast
import textwrap
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

MAX_LINES = 15
NAME = "train_step"
_JUMPS = (ast.Break, ast.Continue, ast.Return, ast.Yield, ast.YieldFrom, ast.Global, ast.Nonlocal)
_NESTED = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda, ast.ClassDef)


@dataclass(frozen=True)
class LiftedStep:
    """The statements ``first``..``last`` (lines) of a loop's body as a function."""

    first: int
    last: int
    params: tuple[str, ...]
    returns: tuple[str, ...]
    body: tuple[str, ...]  # dedented, its ``return`` line included
    name: str = NAME  # a name the program does not use already (free_name)

    @property
    def signature(self) -> str:
        return f"def {self.name}({', '.join(self.params)}):"

    @property
    def call(self) -> str:
        """``loss = train_step(xb, yb)``: what the statements become."""
        called = f"{self.name}({', '.join(self.params)})"
        return f"{', '.join(self.returns)} = {called}" if self.returns else called


def lifted_step(
    source_lines: list[str],
    scope: ast.AST,
    loop: ast.For | ast.AsyncFor | ast.While,
    op_lines: Mapping[int, int],
    names: Sequence[str] | None = None,
) -> LiftedStep | None:
    """The statements of ``loop``'s body that issue the ops (``op_lines``: line -> ops
    counted there) as a function, or None where they cannot be lifted. ``scope``: the
    module or function the loop is in; ``source_lines``: the file's lines.

    The statements are the run of neighbours issuing ops that issues the most of them: a
    statement with none, or one reading a tensor's value (``epoch_loss += loss.numpy()``),
    ends a run, and the other runs (a per-step accuracy's few ops) stay eager, since
    Python that reads a tensor's value cannot run in a graph."""
    weights = [
        0 if reads_values(s) else sum(count for line, count in op_lines.items() if _spans(s, line))
        for s in loop.body
    ]
    runs: list[tuple[int, int]] = []  # (first, last) statement of each run with ops
    for i, weight in enumerate(weights):
        if weight and runs and runs[-1][1] == i - 1:
            runs[-1] = (runs[-1][0], i)
        elif weight:
            runs.append((i, i))
    if not runs:
        return None
    start, end = max(runs, key=lambda r: (sum(weights[r[0] : r[1] + 1]), -r[0]))
    start = _with_its_context(loop.body, start, end)
    core = loop.body[start : end + 1]
    if any(reads_values(s) for s in core):
        return None  # a tape's block reaches back past Python that reads a value
    first, last = core[0].lineno, core[-1].end_lineno or core[-1].lineno
    if _code_lines(source_lines, first, last) > MAX_LINES or any(
        isinstance(node, _JUMPS) for statement in core for node in _walk_scope(statement)
    ):
        return None
    if mutates_outside(core):
        return None  # Python state changed once, at the trace: not the same program
    target = loop.target if not isinstance(loop, ast.While) else None  # a while: none
    bound = (_stored(target) if target else set()) | {n for s in loop.body for n in _stored(s)}
    bound |= rebound_around(scope, loop)  # an outer loop's batch: new on each of its passes
    taken, assigned = reads_before_assigned(core)
    # the loop's own names first, in its target's order (``for x, y in ...``), then the
    # others in the order the statements read them
    targets = (
        [
            n.id
            for n in sorted(ast.walk(target), key=lambda n: getattr(n, "col_offset", 0))
            if isinstance(n, ast.Name)
        ]
        if target is not None
        else []
    )
    params = tuple(
        [name for name in targets if name in taken]
        + [name for name in taken if name in bound and name not in targets]
    )
    read_outside = _read_outside(scope, core, loop)
    returns = tuple(name for name in assigned if name in read_outside or name in params)
    text = textwrap.dedent("".join(line + "\n" for line in source_lines[first - 1 : last]))
    body = text.splitlines()
    if returns:
        body.append(f"return {', '.join(returns)}")
    return LiftedStep(first, last, params, returns, tuple(body), free_name(scope, names))


def _read_outside(scope: ast.AST, core: list[ast.stmt], loop: ast.stmt) -> set[str]:
    """The names the scope reads outside ``core`` that may see what ``core`` assigned:
    a read after the loop where the name was bound anew in between does not (keras-io's
    guide trains a second model in a second loop of the same module, its own ``with
    tf.GradientTape() as tape`` before its ``tape.gradient``: the first loop's step then
    returned its tape, which no tf.function can)."""
    inside = {id(node) for statement in core for node in ast.walk(statement)}
    names = [node for node in _walk_scope(scope) if isinstance(node, ast.Name)]
    end = loop.end_lineno or loop.lineno
    stores: dict[str, list[int]] = {}
    for node in names:
        if isinstance(node.ctx, ast.Store) and node.lineno > end:
            stores.setdefault(node.id, []).append(node.lineno)
    return {
        node.id
        for node in names
        if isinstance(node.ctx, ast.Load)
        and id(node) not in inside
        and not (
            node.lineno > end and any(end < at < node.lineno for at in stores.get(node.id, ()))
        )
    }


def _code_lines(source_lines: list[str], first: int, last: int) -> int:
    """Lines of code from ``first`` to ``last`` (1-based), comments and blank lines not
    counted: keras-io's guide comments each statement of its step (four lines over the
    model's call), and its five statements read as seventeen lines, too long to lift."""
    return sum(
        1
        for line in source_lines[first - 1 : last]
        if line.strip() and not line.lstrip().startswith("#")
    )


def _with_its_context(body: list[ast.stmt], start: int, end: int) -> int:
    """``start`` moved back to the ``with`` statement that binds a name the statements
    ``start``..``end`` read (``with tf.GradientTape() as tape:`` before ``grads =
    tape.gradient(...)``): a tape passed into a function from outside records nothing
    of what runs in it, so ``tape.gradient`` there finds no gradients (TF raises "No
    gradients provided for any variable"). The tape moves in with the gradients, its
    block with it, and so does any ``with`` whose bound name the block reads in turn."""
    moved = True
    while moved:
        moved = False
        taken, _ = reads_before_assigned(body[start : end + 1])
        for i in range(start - 1, -1, -1):
            statement = body[i]
            if not isinstance(statement, (ast.With, ast.AsyncWith)):
                continue
            bound = {
                name
                for item in statement.items
                if item.optional_vars is not None
                for name in _stored(item.optional_vars)
            }
            if bound & set(taken):
                start, moved = i, True
                break
    return start


# the names a lifted step may take, the first the program does not use already: a step
# named as one of its own functions would replace it (``train_step`` called three lines on)
NAMES = (NAME, "loop_step", "graph_step", "ops_step", "gpuwhy_step")
# list, dict, set and deque methods that change the object in place
_MUTATORS = frozenset(
    {"append", "extend", "insert", "pop", "remove", "clear", "update", "add", "discard",
     "setdefault", "popitem", "appendleft", "extendleft", "sort", "reverse"}
)  # fmt: skip


def free_name(tree: ast.AST, names: Sequence[str] | None = None) -> str:
    """The first of ``names`` (``NAMES``: a training step's) that nothing in ``tree``
    binds or reads."""
    used = used_names(tree)
    names = NAMES if names is None else names
    return next((name for name in names if name not in used), f"{names[0]}_{len(used)}")


def used_names(tree: ast.AST) -> set[str]:
    """Every name ``tree`` binds or reads: its variables, functions, classes, imports."""
    used = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    used |= {
        n.name
        for n in ast.walk(tree)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    used |= {
        a.asname or a.name.split(".")[0]
        for n in ast.walk(tree)
        if isinstance(n, (ast.Import, ast.ImportFrom))
        for a in n.names
    }
    return used


def mutates_outside(statements: list[ast.stmt]) -> bool:
    """Whether the statements change a Python object they did not make: an item or an
    attribute assigned (``class_loss[label] += ...``, ``self.total = ...``) or a method
    that changes it in place (``losses.append(...)``). In a ``tf.function`` that runs
    once, when it is traced, and never at the steps after: the program would compute
    something else."""
    made = {n for s in statements for n in _stored(s)}

    def outside(node: ast.AST) -> bool:
        while isinstance(node, (ast.Subscript, ast.Attribute)):
            node = node.value
        return isinstance(node, ast.Name) and node.id not in made

    for statement in statements:
        for node in _walk_scope(statement):
            targets: list[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            if any(isinstance(t, (ast.Subscript, ast.Attribute)) and outside(t) for t in targets):
                return True
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in _MUTATORS
                and outside(node.func.value)
            ):
                return True
    return False


def rebound_around(scope: ast.AST, loop: ast.stmt) -> set[str]:
    """The names the loops of ``scope`` around ``loop`` bind (their targets, their
    bodies): a batch ``y`` of ``for x, y in dataset`` is a new value on each pass of
    that loop, so a function made for ``loop``'s body takes it as an argument (a
    ``tf.function`` reads a name it closes over once, at the trace)."""
    names: set[str] = set()
    end = loop.end_lineno or loop.lineno
    for node in _walk_scope(scope):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)) or node is loop:
            continue
        if node.lineno <= loop.lineno and (node.end_lineno or node.lineno) >= end:
            if not isinstance(node, ast.While):
                names |= _stored(node.target)
            names |= {n for s in node.body for n in _stored(s)}
    return names


# Python that turns a tensor into a Python value: in a traced function the tensor has none
# (``'SymbolicTensor' object has no attribute 'numpy'``)
_VALUE_METHODS = frozenset({"numpy", "item", "tolist"})
_VALUE_BUILTINS = frozenset({"float", "int", "bool", "complex"})


def reads_values(statement: ast.stmt) -> bool:
    """Whether ``statement`` reads a tensor's value into Python (``loss.numpy()``,
    ``float(norm)``, ``.item()``): it cannot run in a graph as written."""
    for node in _walk_scope(statement):
        if not isinstance(node, ast.Call):
            continue
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr in _VALUE_METHODS:
            return True
        if isinstance(func, ast.Name) and func.id in _VALUE_BUILTINS and node.args:
            return True
    return False


def _spans(node: ast.stmt, line: int) -> bool:
    return node.lineno <= line <= (node.end_lineno or node.lineno)


def _walk_scope(node: ast.AST) -> Iterator[ast.AST]:
    """``node`` and what it holds, outside the functions, lambdas and classes it defines
    (their names, and a ``return`` in them, are their own)."""
    todo = [node]
    while todo:
        current = todo.pop()
        yield current
        if current is node or not isinstance(current, _NESTED):
            todo.extend(ast.iter_child_nodes(current))


def _stored(node: ast.AST) -> set[str]:
    """The names ``node`` binds in its scope (a comprehension's own variables are its
    own; a ``def`` or ``class`` binds its name)."""
    nodes = list(_walk_scope(node))
    own = {id(n) for c in nodes if isinstance(c, ast.comprehension) for n in ast.walk(c.target)}
    names = {
        n.id
        for n in nodes
        if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store) and id(n) not in own
    }
    names |= {
        n.name
        for n in nodes
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    }
    return names


def _loaded(node: ast.AST) -> list[str]:
    """The names ``node`` reads, in the order they are written: inside its lambdas,
    comprehensions and nested functions too (``opt.minimize(lambda: loss(xb), ...)``
    reads ``xb`` when it runs), less the names those bind for themselves."""
    own = set()
    for inner in ast.walk(node):
        if isinstance(inner, (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef)):
            own |= {a.arg for a in ast.walk(inner.args) if isinstance(a, ast.arg)}
        elif isinstance(inner, ast.comprehension):
            own |= {n.id for n in ast.walk(inner.target) if isinstance(n, ast.Name)}
    found = sorted(
        (
            n
            for n in ast.walk(node)
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id not in own
        ),
        key=lambda n: (n.lineno, n.col_offset),
    )
    return list(dict.fromkeys(n.id for n in found))


def reads_before_assigned(statements: list[ast.stmt]) -> tuple[list[str], list[str]]:
    """(the names read before they are assigned, the names assigned), each in the order
    the statements first do it; a compound statement's header before its blocks, and a
    statement's reads before its own assignment (``x += 1`` reads ``x``)."""
    taken: dict[str, None] = {}
    assigned: dict[str, None] = {}

    def read(names: Iterable[str]) -> None:
        for name in names:
            if name not in assigned:
                taken.setdefault(name)

    def visit(block: list[ast.stmt]) -> None:
        for statement in block:
            if isinstance(statement, _NESTED):  # a def or class: its name, bound here
                assigned.setdefault(statement.name)
                continue
            blocks = [
                [s for s in getattr(statement, f) if isinstance(s, ast.stmt)]
                + [
                    s
                    for h in getattr(statement, f)
                    if isinstance(h, ast.ExceptHandler)
                    for s in h.body
                ]
                for f in ("body", "orelse", "handlers", "finalbody")
                if isinstance(getattr(statement, f, None), list)
            ]
            if blocks:
                for field, child in ast.iter_fields(statement):
                    if field in ("body", "orelse", "handlers", "finalbody"):
                        continue
                    for node in child if isinstance(child, list) else [child]:
                        if isinstance(node, ast.AST):
                            read(_loaded(node))
                            assigned.update(dict.fromkeys(_stored(node)))
                for inner in blocks:
                    visit(inner)
                continue
            if isinstance(statement, ast.AugAssign) and isinstance(statement.target, ast.Name):
                read([statement.target.id])
            read(_loaded(statement))
            assigned.update(dict.fromkeys(_stored(statement)))

    visit(statements)
    return list(taken), list(assigned)
