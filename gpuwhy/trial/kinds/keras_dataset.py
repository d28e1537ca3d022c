"""A Keras fit fed by the program's own ``keras.utils.PyDataset`` (``Sequence``): its
batches made by worker threads, ahead of the step.

Keras reads a PyDataset one batch at a time on the training thread unless the dataset
asks for workers (``PyDataset.__init__(workers=1, use_multiprocessing=False,
max_queue_size=10)``, keras/src/trainers/data_adapters/py_dataset_adapter.py): with
``workers=4`` a thread pool calls ``__getitem__`` ahead of the step and a queue of ten
batches waits for it. Threads, not processes: a batch that reads files, decodes images
or calls NumPy releases the GIL and overlaps, a forked process would copy the program's
TensorFlow, and a pure-Python ``__getitem__`` that holds the GIL gains nothing, which
the trial's runs show.

The edit: where a call of the class in the program's files passes ``workers=`` (a
literal under 4), that argument raised to 4 where it is written; else the class's
``super().__init__(...)`` given ``workers=4`` where it calls it (beside its
``**kwargs``, unless a call of the class passes a ``**`` mapping that may hold them),
else that call added as the first line of its ``__init__`` (the printed fix's
``**kwargs`` that the class may not take is not needed). A class without an
``__init__`` of its own is left alone.
"""

from __future__ import annotations

import ast

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.trial.candidate import FixCandidate, NotTried, SourceFiles
from gpuwhy.trial.kinds.float64 import program_sources
from gpuwhy.trial.source_edits import Edit, expr_name, indent_of, set_keywords

WORKERS = 4
BASES = ("PyDataset", "Sequence")


def workers(
    finding: Finding, facts: Facts, files: SourceFiles
) -> tuple[list[FixCandidate], list[NotTried]]:
    if not _fit_reads_python(facts):
        return [], []
    out: list[FixCandidate] = []
    program = program_sources(facts, files)
    for path, source, lines, tree in program:
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            if not any(expr_name(b) in BASES for b in cls.bases):
                continue
            made = _calls_of(program, cls.name)
            if any(k.arg == "workers" for _, _, _, call, _ in made for k in call.keywords):
                edits = _raised_workers(made)  # where the program already passes them
            else:
                edits = _with_workers(source, lines, path, cls, made)
            if edits:
                out.append(
                    FixCandidate(
                        finding.id,
                        f"{cls.name}'s batches made by {WORKERS} worker threads "
                        f"(PyDataset workers={WORKERS})",
                        tuple(edits),
                        location=f"{path}:{cls.lineno}",
                        note="threads overlap where __getitem__ releases the GIL (files, "
                        "decoding, NumPy); they must be safe to call at once",
                    )
                )
    if not out:
        return [], [NotTried(finding.id, _why_none(facts))]
    return out, []


def _why_none(facts: Facts) -> str:
    """Why no class got workers: fit reads the program's generator (named where the
    collector found it below Keras' wrapper), or no PyDataset class with an __init__."""
    assert facts.tfdata is not None  # _fit_reads_python
    generator = next(
        (
            s
            for p in facts.tfdata.pipelines
            if p.consumer == "keras-fit"
            for s in p.stages
            if s.kind == "generator" and s.function_location and "." not in (s.function or ".")
        ),
        None,
    )
    if generator is not None:
        return (
            f"fit reads the generator {generator.function} ({generator.function_location}), "
            "which makes one batch after the other: no edit gpuwhy can make runs it on "
            "several threads with the same batches (a keras.utils.PyDataset whose "
            "__getitem__(index) makes batch index would)"
        )
    return (
        "fit reads a Python data source, but no keras.utils.PyDataset (Sequence) "
        "class with its own __init__ was found in the program's files, or its calls "
        "pass a ** mapping that may already hold workers"
    )


def _fit_reads_python(facts: Facts) -> bool:
    """A fit's pipeline that Keras built around a Python source (its data adapter's
    generator): what fit was given is read in Python, one batch at a time."""
    if facts.tfdata is None:
        return False
    return any(
        p.consumer == "keras-fit"
        and p.stages
        and all(s.by_library for s in p.stages)
        and any(s.kind == "generator" or s.python for s in p.stages)
        for p in facts.tfdata.pipelines
    )


# a call of a class in one of the program's files: (path, source, lines, the call)
Made = tuple[str, str, list[str], ast.Call, ast.Module]  # path, source, lines, call, its file


def _calls_of(program: list[tuple[str, str, list[str], ast.Module]], name: str) -> list[Made]:
    """Every call of the class ``name`` in the program's files (the class in
    my_classes.py, made in train.py)."""
    return [
        (path, source, lines, node, tree)
        for path, source, lines, tree in program
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and expr_name(node.func) == name
    ]


def _raised_workers(made: list[Made]) -> list[Edit]:
    """Each call that passes a literal ``workers=`` under ``WORKERS`` raised to it where
    it is written (one more ``workers=`` in the class's ``super().__init__`` beside the
    ``**kwargs`` they pass through would be a TypeError). A name or expression is the
    program's own choice, left as it is."""
    edits: list[Edit] = []
    for path, source, lines, call, _ in made:
        given = next((k.value for k in call.keywords if k.arg == "workers"), None)
        if isinstance(given, ast.Constant) and type(given.value) is int and given.value < WORKERS:
            edits += set_keywords(source, lines, path, call, workers=str(WORKERS))
    return edits


def _with_workers(
    source: str, lines: list[str], path: str, cls: ast.ClassDef, made: list[Made]
) -> list[Edit]:
    init = next(
        (n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"), None
    )
    if init is None:
        return []
    for node in ast.walk(init):
        if _super_init(node):
            assert isinstance(node, ast.Call)
            if any(k.arg == "workers" for k in node.keywords):
                return []  # workers given already
            if any(k.arg is None for k in node.keywords) and _built_with_mapping(made):
                return []  # passed through **kwargs by a call whose mapping may give them
            return set_keywords(source, lines, path, node, workers=str(WORKERS))
    first = init.body[0]
    if (
        isinstance(first, ast.Expr)
        and isinstance(first.value, ast.Constant)
        and isinstance(first.value.value, str)
        and len(init.body) > 1
    ):
        first = init.body[1]  # after the docstring
    indent = indent_of(lines[first.lineno - 1])
    text = f"{indent}super().__init__(workers={WORKERS})\n"
    return [Edit(path, first.lineno, 0, first.lineno, 0, text)]


def _built_with_mapping(made: list[Made]) -> bool:
    """A call of the class passes a ``**`` mapping that may hold ``workers``: its
    ``__init__`` passes them to PyDataset through ``**kwargs``, and one more
    ``workers=`` in that call would be a TypeError. A dict written in the file with
    string keys and no ``workers`` (``params = {'dim': ..., 'batch_size': 32}``, as
    afshinea's keras-data-generator passes it) cannot."""
    return any(
        k.arg is None and _may_hold_workers(tree, k.value)
        for _, _, _, call, tree in made
        for k in call.keywords
    )


def _may_hold_workers(tree: ast.Module, mapping: ast.expr) -> bool:
    """Whether ``**mapping`` may pass ``workers``: unless it is, or is a name assigned
    once in the file (``tree``) and never changed in place (``params["workers"] = 4``,
    ``params.update(...)``), to a dict literal of string keys without it."""
    if isinstance(mapping, ast.Name):
        name = mapping.id
        assigned = [
            node.value
            for node in ast.walk(tree)
            if isinstance(node, ast.Assign)
            and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        ]
        if len(assigned) != 1 or _changed_in_place(tree, name):
            return True
        mapping = assigned[0]
    if not isinstance(mapping, ast.Dict):
        return True
    keys = [k.value if isinstance(k, ast.Constant) else None for k in mapping.keys]
    return not all(isinstance(k, str) for k in keys) or "workers" in keys


def _changed_in_place(tree: ast.Module, name: str) -> bool:
    """``name[...] = ...``, ``name |= ...`` or ``name.update(...)`` (``setdefault``)
    somewhere in the file: what a dict literal holds is then not what it passes."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store):
            target = node.value
        elif isinstance(node, ast.AugAssign):
            target = node.target
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("update", "setdefault")
        ):
            target = node.func.value
        else:
            continue
        if isinstance(target, ast.Name) and target.id == name:
            return True
    return False


def _super_init(node: ast.AST) -> bool:
    """``super().__init__(...)`` or ``Base.__init__(self, ...)``."""
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
        return False
    if node.func.attr != "__init__":
        return False
    owner = node.func.value
    if isinstance(owner, ast.Call) and isinstance(owner.func, ast.Name):
        return owner.func.id == "super"
    return expr_name(owner) in BASES
