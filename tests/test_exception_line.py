"""The one line a report gives of a script's exception is its cause, in the message
shapes TensorFlow and Keras raise (real messages, shortened)."""

from __future__ import annotations

import pytest

from gpuwhy.modes.run.script import exception_line

KERAS_CALL = """Exception encountered when calling Sequential.call().

Cannot take the length of shape with unknown rank.

Arguments received by Sequential.call():
  • args=('<KerasTensor shape=<unknown>, dtype=float32, sparse=False, name=keras_tensor>',)
  • kwargs=<class 'inspect._empty'>"""

GRAPH_ROOTS = """Graph execution error:

Detected at node cond/Placeholder defined at (most recent call last):
  File "train.py", line 40, in <module>

2 root error(s) found.
  (0) INVALID_ARGUMENT:  You must feed a value for placeholder tensor 'cond/Placeholder' with dtype float
   [[{{node cond/Placeholder}}]]
  (1) CANCELLED:  Function was cancelled before it was started
0 successful operations.
0 derived errors ignored. [Op:__inference_fn_with_cond_2754]"""

GRAPH_ONE = """Graph execution error:

Detected at node sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits defined at:
  File "train.py", line 12, in <module>

Received a label value of 10 which is outside the valid range of [0, 10).  Label values: 3 10
   [[{{node sparse_categorical_crossentropy/SparseSoftmaxCrossEntropyWithLogits}}]] [Op:__inference_one_step_on_iterator_842]"""

TENSOR_DUMP = """Incompatible shapes at component 0: expected [?,32] but got [64,28,28]. Value: tf.Tensor(
[[[0.         0.1        0.46666667]
  [0.2        0.5764706  0.3       ]]], shape=(64, 28, 28), dtype=float32)>"""

IN_USER_CODE = """in user code:

    File "gan.py", line 61, in train_step  *
        smooth = 0.1 / (1 + epoch)

    TypeError: Expected int64, but got 0.1 of type 'float'."""


@pytest.mark.parametrize(
    "error, line",
    [
        (ValueError(KERAS_CALL), "ValueError: Cannot take the length of shape with unknown rank."),
        (
            RuntimeError(GRAPH_ROOTS),
            "RuntimeError: INVALID_ARGUMENT:  You must feed a value for placeholder tensor "
            "'cond/Placeholder' with dtype float",
        ),
        (
            RuntimeError(GRAPH_ONE),
            "RuntimeError: Received a label value of 10 which is outside the valid range of "
            "[0, 10).  Label values: 3 10",
        ),
        (
            TypeError(TENSOR_DUMP),
            "TypeError: Incompatible shapes at component 0: expected [?,32] but got [64,28,28]. "
            "Value: tf.Tensor(",
        ),
        (
            TypeError(IN_USER_CODE),
            "TypeError: Expected int64, but got 0.1 of type 'float'.",
        ),
        (
            ValueError(
                "{{function_node __wrapped__IteratorGetNext_output_types_2_device_/job:"
                "localhost/replica:0/task:0/device:CPU:0}} Input to reshape is a tensor with "
                "2048 values, but the requested shape has 16 [Op:IteratorGetNext]"
            ),
            "ValueError: Input to reshape is a tensor with 2048 values, but the requested "
            "shape has 16 [Op:IteratorGetNext]",
        ),
        (ValueError("boom"), "ValueError: boom"),
        (KeyboardInterrupt(), "KeyboardInterrupt"),
    ],
)
def test_the_cause_is_the_line_reported(error, line):
    assert exception_line(error) == line


def test_the_program_s_own_line_nearest_the_raise_follows_and_colours_are_dropped(tmp_path):
    """keras-io's VAE under mixed precision: Keras raises from its own frames, coloured,
    for a Sampling layer's call in the program's file. The report names that line."""
    script = tmp_path / "vae.py"
    script.write_text(
        "def call(z):\n"
        "    raise TypeError(\"\\x1b[1mInput 'y' of 'Mul' Op has type float32\\x1b[0m\")\n"
        "call(1)\n"
    )
    try:
        exec(compile(script.read_text(), str(script), "exec"), {})
    except TypeError as e:
        line = exception_line(e)
    assert line.startswith("TypeError: Input 'y' of 'Mul' Op has type float32; raised at ")
    assert line.endswith("vae.py:2") and "\x1b" not in line
