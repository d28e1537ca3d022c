"""The package's layering, as docs/layout.md draws it, checked on the real
import graph: every ``import`` of a gpuwhy module, at the top of a file or inside a
function (only ``if TYPE_CHECKING:`` blocks are left out: they never run).

A module may import its own layer and the layers below it; an import that points up, or a
cycle between modules, is a design error this test names with the file and line. An
import inside a function hides a dependency: it is kept only where it defers TensorFlow
(or a heavy optional library) that the module imported would load, and in the package
root, which Python imports before every gpuwhy module and so must import none."""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import gpuwhy

PACKAGE = Path(gpuwhy.__file__).parent

# Bottom to top. A name is a module or a package (all of its modules).
LAYERS: tuple[tuple[str, ...], ...] = (
    (
        "gpuwhy.version",
        "gpuwhy.report_stream",
        "gpuwhy.forked",
        "gpuwhy.gpu_specs",
        "gpuwhy.redact",
        "gpuwhy.json_input",
        "gpuwhy.library_files",
        "gpuwhy.lazy_names",
        "gpuwhy.line_numbers",
    ),
    ("gpuwhy.facts", "gpuwhy.schema"),
    ("gpuwhy.finding",),
    ("gpuwhy.formatting",),
    ("gpuwhy.source_step",),
    ("gpuwhy.source_calls", "gpuwhy.source_generator", "gpuwhy.source_epochs"),
    ("gpuwhy.tfapi",),
    ("gpuwhy.derived",),
    ("gpuwhy.projection",),
    # the derivation stage binds the parts below (derived/*, projection/*) to the facts;
    # above it, what reads its result for the rules and the fixes
    ("gpuwhy.derived.stage",),
    ("gpuwhy.derived.drift", "gpuwhy.derived.steps_input"),
    ("gpuwhy.fixes",),
    # beside each other: neither imports the other (test below)
    ("gpuwhy.collect", "gpuwhy.rules"),
    ("gpuwhy.verdict",),
    ("gpuwhy.record",),
    ("gpuwhy.comparison",),
    ("gpuwhy.report",),
    ("gpuwhy.export",),
    ("gpuwhy.optimize",),
    ("gpuwhy.trial",),
    ("gpuwhy.modes",),
    ("gpuwhy.commands",),
    ("gpuwhy.cli", "gpuwhy.__main__", "gpuwhy.notebook"),
    ("gpuwhy",),
)


# Libraries a gpuwhy module may defer with an import inside a function: TensorFlow (never
# imported before the program does) and the heavy optional ones.
DEFERRED = ("tensorflow", "keras", "tf_keras", "numpy", "plotly", "jinja2", "opentelemetry")


@dataclass(frozen=True)
class Import:
    source: str
    target: str
    line: int
    in_function: bool = False


def module_names() -> dict[str, Path]:
    names = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("gpuwhy", *path.relative_to(PACKAGE).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        names[".".join(parts)] = path
    return names


def imports(modules: dict[str, Path], type_checking: bool = False) -> list[Import]:
    """Every import of a gpuwhy module that can run, resolved to the module it loads
    (``type_checking``: those under ``if TYPE_CHECKING:`` too)."""
    found = []
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        tree = ast.parse(path.read_text(), str(path))
        for node, in_function in _runnable_nodes(tree, type_checking):
            for target in _targets(node, package, modules):
                found.append(Import(name, target, node.lineno, in_function))
    return found


def _runnable_nodes(tree: ast.AST, type_checking: bool = False):
    """(import node, whether inside a function) anywhere in the file, except under
    ``if TYPE_CHECKING:`` unless ``type_checking``."""
    stack: list[tuple[ast.AST, bool]] = [(tree, False)]
    while stack:
        node, in_function = stack.pop()
        if (
            not type_checking
            and isinstance(node, ast.If)
            and "TYPE_CHECKING" in ast.unparse(node.test)
        ):
            stack.extend((child, in_function) for child in node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node, in_function
        inside = in_function or isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        stack.extend((child, inside) for child in ast.iter_child_nodes(node))


def _loads_deferred(module: str, modules: dict[str, Path], all_imports: list[Import]) -> bool:
    """Whether importing ``module`` (its top-level imports, followed) loads TensorFlow or
    another library of DEFERRED."""
    seen, todo = set(), [module]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        tree = ast.parse(modules[name].read_text())
        for node, in_function in _runnable_nodes(tree):
            if in_function:
                continue
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if node.level == 0
                else []
            )
            if any(n.split(".")[0] in DEFERRED for n in names):
                return True
        todo.extend(i.target for i in all_imports if i.source == name and not i.in_function)
    return False


def _targets(node: ast.Import | ast.ImportFrom, package: str, modules: dict[str, Path]):
    if isinstance(node, ast.Import):
        candidates = [alias.name for alias in node.names]
    else:
        base = node.module or ""
        if node.level:
            parts = package.split(".")
            parts = parts[: len(parts) - node.level + 1]
            base = ".".join([*parts, base] if base else parts)
        # ``from package import name`` runs the package's __init__ and reads the name from
        # it, submodule or not: an import of the package itself.
        candidates = [f"{base}.{alias.name}" for alias in node.names]
        candidates = [c for c in candidates if c in modules] + [base]
    for candidate in candidates:
        while candidate not in modules and "." in candidate:
            candidate = candidate.rpartition(".")[0]
        if candidate in modules:
            yield candidate


def layer_of(module: str) -> int:
    best, best_length = None, -1
    for index, names in enumerate(LAYERS):
        for name in names:
            if (module == name or module.startswith(name + ".")) and len(name) > best_length:
                best, best_length = index, len(name)
    assert best is not None, f"{module} is in no layer: add it to LAYERS and docs/layout.md"
    return best


def test_every_module_has_a_layer():
    for module in module_names():
        layer_of(module)


def test_no_import_points_up():
    modules = module_names()
    upward = [
        f"{modules[i.source].relative_to(PACKAGE.parent)}:{i.line} imports {i.target}"
        for i in imports(modules)
        if layer_of(i.target) > layer_of(i.source)
    ]
    assert upward == []


def test_collect_and_rules_stand_beside_each_other():
    """Collectors make facts, rules read them: a rule that asks a collector (or a
    collector that runs a rule) makes the facts no longer the contract between them."""
    modules = module_names()
    crossing = [
        f"{modules[i.source].relative_to(PACKAGE.parent)}:{i.line} imports {i.target}"
        for i in imports(modules, type_checking=True)
        for a, b in (("gpuwhy.collect", "gpuwhy.rules"), ("gpuwhy.rules", "gpuwhy.collect"))
        if _inside(i.source, a) and _inside(i.target, b)
    ]
    assert crossing == []


def _inside(module: str, package: str) -> bool:
    return module == package or module.startswith(package + ".")


def test_no_import_cycles():
    """Not even one that only the type checker follows: two modules that name each other
    are one module in two files."""
    modules = module_names()
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for i in imports(modules, type_checking=True):
        if i.target != i.source:
            graph[i.source].add(i.target)
    cycles = _cycles(graph)
    assert cycles == []


def test_no_module_imports_the_package_root():
    """The root is the public API: it imports its modes when called, so a module that
    imports it (``from gpuwhy import forked``) reads a half-made package."""
    modules = module_names()
    found = [
        f"{modules[i.source].relative_to(PACKAGE.parent)}:{i.line}"
        for i in imports(modules, type_checking=True)
        if i.target == "gpuwhy" and i.source != "gpuwhy"
    ]
    assert found == []


# What a rule may import besides its own group: the facts it reads, the analyses and the
# fix text shared by groups, and the few leaf modules below them. Never a collector, the
# projection or TensorFlow's API: facts -> derived -> rules, collect beside rules.
RULE_IMPORTS = (
    "gpuwhy.facts",
    "gpuwhy.derived",
    "gpuwhy.fixes",
    "gpuwhy.finding",
    "gpuwhy.formatting",
    "gpuwhy.gpu_specs",
    "gpuwhy.source_calls",
    "gpuwhy.rules.base",
)
# The registry and the grouping of findings by cause may import any rule.
RULE_REGISTRY = ("gpuwhy.rules", "gpuwhy.rules.grouping")


def _within(module: str, names: tuple[str, ...]) -> bool:
    return any(module == name or module.startswith(name + ".") for name in names)


def test_rules_import_only_facts_derived_fixes_and_their_group():
    """A rule of group ``gpuwhy.rules.<group>`` imports facts, derived analyses, shared
    fix text and its own group's helpers: analysis two groups need lives in derived/, the
    text they share in fixes/, so no group reads another's internals."""
    modules = module_names()
    found = []
    for i in imports(modules, type_checking=True):
        if not i.source.startswith("gpuwhy.rules.") or i.source in RULE_REGISTRY:
            continue
        if _within(i.target, RULE_IMPORTS):
            continue
        group = ".".join(i.source.split(".")[:3])
        if not _within(i.target, (group,)):
            found.append(
                f"{modules[i.source].relative_to(PACKAGE.parent)}:{i.line} imports {i.target}"
            )
    assert found == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_imports_inside_functions_only_defer_tensorflow():
    modules = module_names()
    found = imports(modules)
    hidden = [
        f"{modules[i.source].relative_to(PACKAGE.parent)}:{i.line} imports {i.target}"
        for i in found
        if i.in_function and i.source != "gpuwhy" and not _loads_deferred(i.target, modules, found)
    ]
    assert hidden == []
