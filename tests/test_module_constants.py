"""Each module-level name of gpuwhy is bound once: a second binding further down a module
silently changes what the code above it reads (the report's row cap of 3 pipelines once
rebound the collector's cap of 64, and every pipeline after the third went unseen)."""

import ast
from collections import Counter
from pathlib import Path

import gpuwhy

PACKAGE = Path(gpuwhy.__file__).parent


def _bound_at_top(tree: ast.Module) -> list[str]:
    names = []
    for node in tree.body:
        targets = (
            node.targets
            if isinstance(node, ast.Assign)
            else [node.target]
            if isinstance(node, ast.AnnAssign) and node.value is not None
            else []
        )
        for target in targets:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    names.append(name.id)
    return names


def test_no_module_binds_a_name_twice_at_its_top_level():
    twice = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        counts = Counter(_bound_at_top(ast.parse(path.read_text(encoding="utf-8"))))
        repeated = sorted(name for name, n in counts.items() if n > 1)
        if repeated:
            twice[str(path.relative_to(PACKAGE))] = repeated
    assert twice == {}
