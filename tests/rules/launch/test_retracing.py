"""launch.retracing from small hand-built tracing facts."""

from __future__ import annotations

from dataclasses import replace

from gpuwhy.facts import (
    Facts,
    ProgramFacts,
    StepFacts,
    TracedFunction,
    TraceSignature,
    TracingFacts,
)
from gpuwhy.rules import run_rules
from gpuwhy.rules.launch.retracing import Retracing


def run(facts, **options):
    return Retracing().check(facts, {**Retracing.options, **options})


def signature(at_s, seconds=0.05, caller="train.py:30", **args):
    return TraceSignature(at_s=at_s, args=tuple(args.items()), seconds=seconds, caller=caller)


def traced(name="train_step", traces=1, **changes) -> TracedFunction:
    base = dict(
        name=name,
        location="train.py:12",
        calls=100,
        call_s=2.0,
        traces=traces,
        trace_s=0.05 * traces,
    )
    return TracedFunction(**{**base, **changes})


def facts(*functions, run_s=None) -> Facts:
    program = ProgramFacts(command=("train.py",), seconds=run_s) if run_s else None
    return Facts(tracing=TracingFacts(functions=functions), program=program)


def test_a_function_traced_once_is_fine():
    assert run(facts(traced(traces=1), traced("eval_step", traces=2))) == []


def test_max_traces_is_the_limit():
    assert run(facts(traced(traces=5))) == []
    assert len(run(facts(traced(traces=6)))) == 1
    assert run(facts(traced(traces=6)), max_traces=10) == []


def test_a_python_scalar_argument_is_named_with_the_fix():
    sigs = tuple(
        signature(1.0 + i, x="float32[32,784]", lr=f"{0.1 / (i + 1)!r} (float)") for i in range(5)
    )
    fn = traced(traces=40, trace_s=4.0, call_s=6.0, changed_args=("lr",), signatures=sigs)
    (finding,) = run(facts(fn, run_s=20.0))
    assert (
        finding.title == "train_step (train.py:12) was traced 40 times (lr: a Python value changed)"
    )
    assert finding.location == "train.py:30"  # the call that passes the Python value
    assert finding.evidence["changed_arguments"] == {"lr": "a Python value"}
    assert finding.evidence["tracing_share_of_call_time"] == round(4.0 / 6.0, 3)
    assert finding.evidence["first_traces"][0] == {
        "at_s": 1.0,
        "trace_ms": 50.0,
        "arguments": "x: float32[32,784], lr: 0.1 (float)",
        "called_from": "train.py:30",
    }
    assert "train_step(..., lr=tf.constant(lr, tf.float32))" in finding.fix
    assert "pass it as a tensor where train_step is called (train.py:30)" in finding.fix
    # every trace but one could be avoided: 4.0 * 39/40 s of a 20 s run
    assert finding.gain_value == 4.0 * 39 / 40 / 20.0
    assert finding.severity == "high"


def test_changing_shapes_suggest_input_signature_or_reduce_retracing():
    sigs = tuple(
        signature(float(i), x=f"float32[{n},128]") for i, n in enumerate((7, 9, 12, 5, 31))
    )
    fn = traced(traces=30, changed_args=("x",), signatures=sigs)
    (finding,) = run(facts(fn))
    assert finding.evidence["changed_arguments"] == {"x": "the tensor shape"}
    assert "input_signature" in finding.fix and "reduce_retracing=True" in finding.fix
    assert finding.severity == "medium"  # the run's length is unknown
    assert finding.gain_value is None


def test_reduce_retracing_already_on_is_not_suggested_again():
    sigs = (
        signature(0.0, x="float32[7,128]"),
        signature(1.0, x="float32[None,None]"),
        signature(2.0, x="float64[None,None]"),
    )
    fn = traced(traces=9, changed_args=("x",), signatures=sigs, reduce_retracing=True)
    (finding,) = run(facts(fn))
    assert finding.evidence["changed_arguments"] == {"x": "the tensor dtype"}
    assert "reduce_retracing=True" not in finding.fix and "tf.cast" in finding.fix


def test_new_python_objects_are_keyed_by_identity():
    sigs = tuple(signature(float(i), cfg="<Config object> (by identity)") for i in range(5))
    (finding,) = run(facts(traced(traces=8, changed_args=("cfg",), signatures=sigs)))
    assert finding.evidence["changed_arguments"] == {"cfg": "a Python object (keyed by identity)"}
    assert "new Python objects" in finding.fix


def test_a_tf_function_re_created_in_a_loop():
    sigs = tuple(signature(float(i), x="float32[2]") for i in range(5))
    fn = traced("<lambda>", traces=50, instances=50, calls=50, signatures=sigs, trace_s=2.5)
    (finding,) = run(facts(fn, run_s=10.0))
    assert (
        finding.title
        == "<lambda> (train.py:12) is a new tf.function object each time: 50 objects, 50 traces"
    )
    assert finding.evidence["tf_function_objects"] == 50
    assert "outside the loop" in finding.fix
    assert finding.severity == "high"


def test_keras_step_functions_of_many_models_are_each_model_s_own():
    """A notebook that fits thirteen models (TF's time-series tutorial): each model's
    train and test function share Keras' def, two objects a model, none to reuse."""
    fn = traced(
        "one_step_on_data", traces=39, instances=26, calls=0, library=True, location="ts.py:365"
    )
    assert run(facts(replace(fn, models=13, most_per_model=2), run_s=37.0)) == []
    (finding,) = run(facts(replace(fn, models=0, most_per_model=0), run_s=37.0))
    assert "new tf.function object each time" in finding.title  # models unknown: as before


def test_a_model_compiled_again_in_a_loop_is_re_created_with_the_compile_fix():
    fn = traced(
        "one_step_on_data",
        traces=12,
        instances=12,
        calls=0,
        library=True,
        location="fit.py:40",
        models=1,
        most_per_model=12,
    )
    (finding,) = run(facts(fn, run_s=20.0))
    assert finding.title.startswith(
        "Keras' one_step_on_data (fit.py:40) is made anew at each compile: 12 objects for 1 model"
    )
    assert finding.evidence["keras_models"] == 1
    assert "compile each model once" in finding.fix
    assert "tf.function(step_fn)" not in finding.fix  # Keras' internals are no paste


def test_many_long_lived_objects_traced_once_each_are_fine():
    # a tf.function method on 20 layers: 20 objects, each called every step
    assert run(facts(traced("call", traces=20, instances=20, calls=2000))) == []


def test_per_object_traces_decide_for_several_objects():
    assert run(facts(traced("call", traces=12, instances=4, calls=400))) == []  # 3 each
    (finding,) = run(facts(traced("call", traces=24, instances=4, calls=400)))  # 6 each
    assert "traced 24 times" in finding.title


def test_keras_step_retracing_gets_the_keras_fix():
    sigs = (
        signature(0.0, iterator="iterator of (float32[None,10], int64[None])"),
        signature(5.0, iterator="iterator of (float64[None,10], int64[None])"),
    )
    fn = traced(
        "multi_step_on_iterator",
        traces=7,
        library=True,
        reduce_retracing=True,
        location="fit.py:40",
        changed_args=("iterator",),
        signatures=sigs,
    )
    (finding,) = run(facts(fn))
    assert finding.location == "fit.py:40"
    assert "same structure and dtypes" in finding.fix
    assert "defined_by" in finding.evidence


def test_small_tracing_cost_is_low_severity():
    fn = traced(traces=10, trace_s=0.05)
    run_s = 100.0
    (finding,) = run(
        Facts(
            tracing=TracingFacts(functions=(fn,)),
            steps=StepFacts(source="tf-function", marker="train_step", count=10, run_s=run_s),
        )
    )
    assert finding.severity == "low"
    assert finding.evidence["avoidable_tracing_share_of_run"] == round(0.05 * 9 / 10 / run_s, 3)


def test_the_most_costly_functions_come_first():
    cheap, costly = traced("a", traces=9, trace_s=0.1), traced("b", traces=9, trace_s=3.0)
    assert [f.evidence["function"] for f in run(facts(cheap, costly))] == ["b", "a"]


def test_the_registry_runs_it_with_tracing_facts_only():
    findings, not_checked = run_rules(facts(traced(traces=6)))
    assert "launch.retracing" not in not_checked
    assert [f.id for f in findings if f.id == "launch.retracing"] == ["launch.retracing"]


def test_an_xla_function_is_said_to_be_one_in_the_title():
    # every trace of a jit_compile=True function is also an XLA compilation
    (found,) = run(facts(traced(traces=6, jit_compile=True, signatures=(signature(1.0, step=1),))))
    assert found.title.startswith(
        "train_step (train.py:12), compiled with XLA (jit_compile=True), was traced 6 times"
    )
    assert found.evidence["jit_compile"] is True


def test_the_run_summary_marks_xla_functions():
    from gpuwhy.collect.inprocess.functions import tracing_line

    line = tracing_line(TracingFacts(functions=(traced(jit_compile=True), traced("eval_step"))))
    assert "train_step (train.py:12), XLA-compiled: 100 calls" in line
    assert "eval_step (train.py:12): 100 calls" in line


def test_a_heavy_step_retraced_on_each_new_epoch_number_is_found_below_max_traces():
    # pix2pix's train_step(input_image, target, epoch): 5 traces of 7.5 s in a 94 s run
    sigs = tuple(signature(1.0 + 20 * i, 7.5, x="float32[1,256,256,3]", epoch=f"{i} (int)")
                 for i in range(5))  # fmt: skip
    fn = traced(traces=5, calls=4, trace_s=37.4, call_s=45.0, changed_args=("epoch",),
                signatures=sigs)  # fmt: skip
    (finding,) = run(facts(fn, run_s=94.0))
    assert "epoch: a Python value changed" in finding.title and finding.severity == "high"
    # the same traces, a tenth of the run no longer: left to max_traces
    assert run(facts(fn, run_s=400.0)) == []
    # a shape that changed (a partial last batch, validation) is not a Python value
    shapes = tuple(signature(1.0 + i, 2.0, x=f"float32[{32 - i},784]") for i in range(3))
    keras = traced(traces=3, trace_s=6.0, changed_args=("x",), signatures=shapes)
    assert run(facts(keras, run_s=20.0)) == []


def test_the_input_signature_is_the_traces_own_dtypes_with_the_dims_that_changed_as_none():
    """Padded int32 token batches of a new length each call: the signature says int32,
    the length None (a float32 placeholder would not run), and the batch dim None too:
    an epoch's last batch, smaller, may come after the traces kept (a fixed 64 there
    fails the program)."""
    sigs = tuple(
        signature(float(i), xb=f"int32[64,{n}]", yb="float32[64]")
        for i, n in enumerate((17, 23, 40))
    )
    fn = traced(traces=16, changed_args=("xb",), signatures=sigs)
    (finding,) = run(facts(fn))
    assert (
        "@tf.function(input_signature=[tf.TensorSpec([None, None], tf.int32), "
        "tf.TensorSpec([None], tf.float32)])" in finding.fix
    )
    # a Python argument among them: no input_signature can hold it
    sigs = tuple(
        signature(float(i), xb=f"int32[64,{n}]", training="True (bool)")
        for i, n in enumerate((17, 23))
    )
    fn = traced(traces=16, changed_args=("xb",), signatures=sigs)
    (finding,) = run(facts(fn))
    assert "tf.TensorSpec([None, ...], tf.float32)])  # one per argument" in finding.fix


RETRACING_LOOP = """import tensorflow as tf

v = tf.Variable(0.0)


@tf.function
def train_step(x, lr, step):
    v.assign_add(x * lr + tf.cast(step, tf.float32))
    return v


global_step = 0
for epoch in range(2):
    for x in [1.0, 2.0, 3.0]:
        lr = 0.01 * (global_step + 1)
        train_step(tf.constant(x), lr, step=global_step)
        global_step += 1
print(train_step.experimental_get_tracing_count())
"""


def test_the_call_is_rewritten_in_the_program_s_own_names_and_pasted_it_traces_once(tmp_path):
    """The loop passes ``global_step`` as the parameter ``step``: the fix once wrote
    ``step=tf.constant(step, tf.int64)``, and pasted, the program raised NameError. It is
    now the program's call at its line, each changing scalar made a tensor; pasted, the
    program runs and traces once."""
    import subprocess
    import sys

    script = tmp_path / "train.py"
    script.write_text(RETRACING_LOOP)
    caller = f"{script}:16"
    sigs = tuple(
        signature(
            1.0 + i, caller=caller, x="float32[]", lr=f"{0.01 * (i + 1)!r} (float)",
            step=f"{i} (int)",
        )
        for i in range(5)
    )  # fmt: skip
    fn = traced(traces=6, trace_s=3.0, changed_args=("lr", "step"), signatures=sigs)
    (finding,) = run(facts(fn, run_s=20.0))
    written = "train_step(tf.constant(x), lr, step=global_step)"
    changed = (
        "train_step(tf.constant(x), tf.constant(lr, tf.float32), "
        "step=tf.constant(global_step, tf.int64))"
    )
    assert f"# {caller}: in place of: {written}\n{changed}\n" in finding.fix
    script.write_text(RETRACING_LOOP.replace(written, changed))
    out = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "1"
