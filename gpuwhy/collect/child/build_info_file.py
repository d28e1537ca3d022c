"""Read TensorFlow's build info without importing TensorFlow.

``tensorflow/python/platform/build_info.py`` is generated at build time and holds one
``build_info = collections.OrderedDict([...])`` literal (checked on TF 2.16-2.21). Reading
it with ``ast`` gives the CUDA/cuDNN versions the build needs even when ``import
tensorflow`` crashes or hangs, which is exactly when the user needs them.
"""

import ast
import importlib.util
import os


def tensorflow_location():
    """Directory of the ``tensorflow`` package, or None when it is not installed."""
    try:
        spec = importlib.util.find_spec("tensorflow")
    except (ImportError, ValueError):
        return None
    if spec is None:
        return None
    if spec.submodule_search_locations:
        return list(spec.submodule_search_locations)[0]
    return os.path.dirname(spec.origin) if spec.origin else None


def read_build_info(package_dir):
    """The build info dict from the generated file, or {} when it cannot be read."""
    path = os.path.join(package_dir, "python", "platform", "build_info.py")
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read(), path)
    except (OSError, SyntaxError, ValueError):
        return {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "build_info" for t in node.targets
        ):
            return _literal_dict(node.value)
    return {}


def _literal_dict(value):
    # OrderedDict([(k, v), ...]) or a plain {k: v} literal.
    try:
        if isinstance(value, ast.Call) and value.args:
            return dict(ast.literal_eval(value.args[0]))
        return dict(ast.literal_eval(value))
    except (ValueError, TypeError, SyntaxError):
        return {}
