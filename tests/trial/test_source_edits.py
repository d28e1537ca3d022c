"""Source edits: each changes its span and nothing else, and the result is valid Python."""

import ast

import pytest

from gpuwhy.trial.source_edits import (
    Edit,
    EditError,
    add_decorator,
    apply,
    calls_at,
    function_at,
    import_tensorflow,
    set_keywords,
    unwrap_with,
    wrap_node,
)

SOURCE = '''"""doc"""
import numpy as np


class Trainer:
    @staticmethod
    def train_step(x, y):  # the step
        with tf.device("/CPU:0"):
            z = x * 2
            z = z + 1
        return z


model.compile(optimizer="adam", loss="mse")  # compiled
model.compile()
step(batch, lr)
'''


def parts(source=SOURCE):
    return source, source.splitlines(keepends=True), ast.parse(source)


def test_decorator_goes_above_the_existing_ones_at_their_indent():
    source, lines, tree = parts()
    fn = function_at(tree, 7)
    assert fn is not None and fn.name == "train_step"
    out = apply(source, [add_decorator("f.py", lines, fn, "tf.function")])
    assert "    @tf.function\n    @staticmethod\n    def train_step(x, y):  # the step\n" in out
    ast.parse(out)


def test_keywords_are_added_after_the_last_argument_or_replaced_where_written():
    source, lines, tree = parts()
    (call,) = calls_at(tree, 14, "compile")
    out = apply(
        source, set_keywords(source, lines, "f.py", call, steps_per_execution="32", loss='"mae"')
    )
    assert 'model.compile(optimizer="adam", loss="mae", steps_per_execution=32)  # compiled' in out
    (empty,) = calls_at(tree, 15, "compile")
    out = apply(source, set_keywords(source, lines, "f.py", empty, jit_compile="True"))
    assert "model.compile(jit_compile=True)\n" in out


def test_an_argument_is_wrapped_in_place():
    source, lines, tree = parts()
    (call,) = calls_at(tree, 16, "step")
    out = apply(source, wrap_node("f.py", lines, call.args[1], "tf.constant(", ", tf.float32)"))
    assert "step(batch, tf.constant(lr, tf.float32))\n" in out


def test_a_single_device_block_is_unwrapped_and_its_body_dedented():
    source, lines, tree = parts()
    node = next(n for n in ast.walk(tree) if isinstance(n, ast.With))
    out = apply(source, unwrap_with(source, lines, "f.py", node, 0))
    assert "        z = x * 2\n        z = z + 1\n        return z\n" in out
    assert "device" not in out
    ast.parse(out)


def test_one_of_several_context_managers_is_dropped():
    source = "with tf.device('/CPU:0'), tape:\n    y = f(x)\n"
    _, lines, tree = parts(source)
    node = tree.body[0]
    out = apply(source, unwrap_with(source, lines, "f.py", node, 0))
    assert out == "with tape:\n    y = f(x)\n"


def test_tensorflow_is_imported_after_the_docstring_where_missing():
    source, _, tree = parts()
    alias, edits = import_tensorflow(tree, "f.py")
    assert alias == "tf"
    out = apply(source, edits)
    assert out.startswith('"""doc"""\nimport tensorflow as tf\nimport numpy as np\n')
    alias, edits = import_tensorflow(ast.parse("import tensorflow as tensor\n"), "g.py")
    assert (alias, edits) == ("tensor", [])


def test_overlapping_edits_are_refused():
    with pytest.raises(EditError):
        apply("abcdef\n", [Edit("f", 1, 1, 1, 4, "x"), Edit("f", 1, 2, 1, 5, "y")])


def test_non_ascii_columns_are_characters():
    source = "print('é', step(a, lr))\n"
    _, lines, tree = parts(source)
    (call,) = calls_at(tree, 1, "step")
    out = apply(source, wrap_node("f.py", lines, call.args[1], "T(", ")"))
    assert out == "print('é', step(a, T(lr)))\n"


def test_fixes_whose_edits_touch_are_not_made_together():
    """A batch-first fix rewrites ``dataset.map(parse)`` into ``dataset.batch(16)``; a
    cache fix inserts ``.cache()`` at that call's end. Made together, the cache lands
    after batch(16), before the parse it was to keep: not compatible. An insertion
    elsewhere is."""
    from gpuwhy.trial.patch import compatible
    from gpuwhy.trial.source_edits import Edit

    batch_first = [Edit("t.py", 42, 10, 42, 28, "dataset.batch(16)")]
    cache = [Edit("t.py", 42, 28, 42, 28, ".cache()")]
    prefetch = [Edit("t.py", 43, 27, 43, 27, ".prefetch(2)")]
    assert compatible([batch_first, cache]) == [0]
    assert compatible([batch_first, prefetch, cache]) == [0, 1]
    assert not Edit("t.py", 1, 0, 1, 0, "a").touches(Edit("t.py", 1, 0, 1, 0, "b"))


def test_two_fixes_that_insert_lines_before_the_same_line_are_made_together():
    """A traced validation step defined before the epochs' loop and the run's one
    iterator made there: both stand, one after the other, in the patch; an insertion
    inside a line at the same place still conflicts."""
    from gpuwhy.trial.patch import compatible, merged
    from gpuwhy.trial.source_edits import Edit

    step = [Edit("t.py", 5, 0, 5, 0, "def eval_step(x):\n    return x\n")]
    iterator = [Edit("t.py", 5, 0, 5, 0, "batches = iter(ds.repeat())\n")]
    inline = [Edit("t.py", 5, 0, 5, 0, "x = ")]
    assert compatible([step, iterator]) == [0, 1]
    assert compatible([step, inline]) == [0]
    source = "".join(f"line{i}\n" for i in range(1, 7))
    out = apply(source, merged([step, iterator]))
    assert out.splitlines()[4:7] == [
        "def eval_step(x):",
        "    return x",
        "batches = iter(ds.repeat())",
    ]
