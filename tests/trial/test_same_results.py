"""What a program reports, compared between an original and a variant."""

import json

from gpuwhy.trial.same_results import Values, compare, printed_values, read_values

ORIGINAL = """Epoch 1/2
epoch 0 loss 0.6931 took 1.23 s
step 12 accuracy 0.51 (3.2ms/step)
epoch 1 loss 0.5012 took 1.19 s
"""


def test_printed_numbers_are_keyed_by_their_line_and_timings_are_left_out():
    values = dict(printed_values(ORIGINAL))
    assert values["epoch # loss # took # s|0|1"] == 0.6931
    assert values["epoch # loss # took # s|1|1"] == 0.5012
    assert all(v not in (1.23, 1.19, 3.2) for v in values.values())


BAR = "\x1b[1m1/1\x1b[0m \x1b[32m━━━━━━━━━━━━━━━━━━━━\x1b[0m\x1b[37m\x1b[0m \x1b[1m0s\x1b[0m 20ms/step\n"
FIT_BAR = "\x1b[1m55/55\x1b[0m \x1b[32m━━━━\x1b[0m \x1b[1m4s\x1b[0m 42ms/step - loss: 388.6104\n"


def test_a_keras_progress_bar_s_counter_is_no_result():
    """keras-io's VAE draws 64 points with predict() (a "1/1" bar each) after its fit:
    its fix, predict_on_batch(), prints no bars, and the counters of the fit's bars
    after them must not be met by the predict bars' (6 against 7, "changed the
    results"). The losses on the fit's bars still count; tf.keras 2's bars too."""
    original = printed_values(FIT_BAR + BAR * 3 + FIT_BAR.replace("388.6104", "380.1"))
    fixed = printed_values(FIT_BAR + FIT_BAR.replace("388.6104", "380.1"))
    assert original == fixed and [v for _, v in fixed] == [388.6104, 380.1]
    old = "1/1 [==============================] - 0s 20ms/step\n3/55 [>.....] - loss: 2.5\n"
    assert [v for _, v in printed_values(old)] == [2.5]


def test_the_same_values_within_tolerance_are_the_same():
    a = Values("printed output", tuple(printed_values(ORIGINAL)))
    b = Values("printed output", tuple(printed_values(ORIGINAL.replace("0.5012", "0.5015"))))
    result = compare([a, a], b)
    assert result.same is True and result.compared == 8


def test_values_the_same_within_tolerance_say_which_moved_furthest():
    """A fix that held still says how far its values moved: float32 against float64
    moves a loss in its third digit, and a reader must see it, not a bare "yes"."""
    a = Values("Keras' logs", (("epoch 0 loss", 0.6931), ("epoch 1 loss", 0.5012)))
    b = Values("Keras' logs", (("epoch 0 loss", 0.6931), ("epoch 1 loss", 0.5015)))
    result = compare([a], b)
    assert result.same is True
    assert result.largest_difference == "epoch 1 loss: 0.5015 against 0.5012, 0.06%"
    assert compare([a], a).largest_difference is None  # exactly the same
    by_mean = compare([a], b, rtol=0.1, by_mean=True)
    assert by_mean.same is True and (by_mean.largest_difference or "").startswith(
        "mean epoch loss: 0.5973 against 0.59715, "
    )


def test_a_changed_loss_is_a_difference_with_its_place():
    a = Values("printed output", tuple(printed_values(ORIGINAL)))
    b = Values("printed output", tuple(printed_values(ORIGINAL.replace("0.5012", "0.0000"))))
    result = compare([a], b)
    assert result.same is False
    assert "0 against 0.5012" in (result.first_difference or "")


def test_values_that_differ_between_runs_of_the_original_are_not_results():
    a = Values("printed output", (("elapsed|0|0", 10.0), ("loss|0|0", 0.5)))
    a2 = Values("printed output", (("elapsed|0|0", 14.0), ("loss|0|0", 0.5)))
    b = Values("printed output", (("elapsed|0|0", 3.0), ("loss|0|0", 0.5)))
    result = compare([a, a2], b)
    assert result.same is True and result.compared == 1 and "left out" in result.how


def test_nothing_reproducible_is_not_called_the_same():
    a = Values("printed output", (("x|0|0", 10.0),))
    a2 = Values("printed output", (("x|0|0", 30.0),))
    assert compare([a, a2], a).same is None
    assert compare([Values("none", ())], a).same is None


def test_a_shorter_variant_is_compared_on_what_both_reached():
    a = Values("Keras' logs", (("batch 0 loss", 1.0), ("batch 1 loss", 0.9), ("epoch 0 loss", 0.8)))
    b = Values("Keras' logs", (("batch 0 loss", 1.0), ("batch 1 loss", 0.9)))
    assert compare([a], b).same is True
    assert compare([a], b, rtol=0.1).compared == 2


def test_a_precision_change_is_judged_on_each_quantitys_mean():
    a = Values(
        "Keras' logs", (("batch 0 loss", 1008.0), ("batch 1 loss", 900.0), ("epoch 0 loss", 3.07))
    )
    b = Values(
        "Keras' logs", (("batch 0 loss", 989.0), ("batch 1 loss", 920.0), ("epoch 0 loss", 2.95))
    )
    assert compare([a], b, rtol=0.1).same is True
    assert compare([a], b, rtol=0.01).same is False
    zeroed = Values(
        "Keras' logs", (("batch 0 loss", 1008.0), ("batch 1 loss", 0.0), ("epoch 0 loss", 0.0))
    )
    result = compare([a], zeroed, rtol=0.1, by_mean=True)
    assert result.same is False and "mean batch loss" in (result.first_difference or "")


def test_a_loss_that_became_nan_is_a_difference():
    a = Values("Keras' logs", (("epoch 0 loss", 0.5),))
    b = Values("Keras' logs", (("epoch 0 loss", float("nan")),))
    assert compare([a], b).same is False
    assert compare([a], b, rtol=0.1, by_mean=True).same is False


def test_a_variable_element_near_zero_is_judged_against_the_variables_own_size():
    from gpuwhy.trial.same_results import Values, compare

    def run(bias0: float, kernel0: float) -> Values:
        return Values(
            "the trained variables",
            (
                ("variables 5 dense/bias:0[2]#0", bias0),
                ("variables 5 dense/bias:0[2]#1", 0.02),
                ("variables 5 dense/kernel:0[2, 2]#0", kernel0),
            ),
        )

    originals = [run(0.00005, 0.5), run(0.00005, 0.5)]
    # 0.00005 -> 0.00025: five times, but a hundredth of the bias's 0.02
    assert compare(originals, run(0.00025, 0.5), rtol=0.1).same is True
    assert compare(originals, run(0.01, 0.5), rtol=0.1).same is False
    assert compare(originals, run(0.00005, 0.6), rtol=0.1).same is False


def test_a_variable_near_zero_throughout_is_judged_against_the_models_weights():
    """A batch norm's beta and a bias, every element near zero after a few steps (each
    moved by about the learning rate), under a precision change: judged against a tenth
    of the model's typical variable, not their own drift; the kernels still by theirs."""

    def run(beta: float, bias: float, kernel: float) -> Values:
        return Values(
            "the trained variables",
            (
                ("variables 8 batch_normalization/beta:0[64]#3", beta),
                ("variables 8 conv2d/bias:0[64]#7", bias),
                ("variables 8 conv2d/kernel:0[5, 5, 1, 64]#11", kernel),
                ("variables 8 dense/kernel:0[64, 1]#2", 0.2),
            ),
        )

    originals = [run(0.000287, -0.0002, 0.3), run(0.000287, -0.0002, 0.3)]
    mixed = run(-0.0000109, -0.0000074, 0.29)
    assert compare(originals, mixed, rtol=0.1, by_mean=True).same is True
    # a kernel that moved by a third is still a difference
    assert compare(originals, run(0.000287, -0.0002, 0.2), rtol=0.1, by_mean=True).same is False
    # and a beta that ran off to the kernels' size
    assert compare(originals, run(0.05, -0.0002, 0.3), rtol=0.1, by_mean=True).same is False


def test_a_precision_change_judges_a_bias_near_zero_against_the_model_s_weights():
    """DCGAN under bfloat16, 20 steps of Adam at 1e-4: one bias element went from
    -2.9e-4 to 1.4e-4 (each step moves it by about the learning rate, the sign of its
    16-bit gradient flipped), the weights are about 0.03: the same training. A training
    that did not move its weights at all is still a difference."""

    def run(bias: float, kernel: float) -> Values:
        return Values(
            "the trained variables",
            (
                ("variables 20 discriminator/conv2d/bias:0[64]#32", bias),
                ("variables 20 discriminator/conv2d/kernel:0[5, 5, 1, 64]#3", kernel),
                ("variables 20 generator/dense/kernel:0[100, 12544]#9", 0.03),
                ("variables 20 generator/batch_normalization/beta:0[256]#1", 0.0003),
            ),
        )

    originals = [run(-0.000290467, 0.031), run(-0.000290467, 0.031)]
    assert compare(originals, run(0.000139303, 0.0309), rtol=0.1, by_mean=True).same is True
    # element by element (not a precision change) a tenth of the weights still judges
    assert compare(originals, run(0.000139303, 0.0309), rtol=0.1).same is False
    untrained = run(-0.000290467, 0.025)  # its kernel where it started
    assert compare(originals, untrained, rtol=0.1, by_mean=True).same is False


def _logged(path, fits):
    """The child's rows for ``fits`` fits of two epochs each, each fit's losses ``loss``."""
    rows = [
        {"kind": "epoch", "index": epoch, "values": {"loss": loss}}
        for loss in fits
        for epoch in range(2)
    ]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return read_values(str(path), "")


def test_a_program_of_several_fits_is_compared_fit_by_fit_as_far_as_both_reached(tmp_path):
    """TF's time-series tutorial fits thirteen models; a run bounded in time reaches as
    many as its pace lets it. The original reached three fits, the faster fix five: each
    fit's epoch 0 meets its own, where the last fit each side reached met (another
    model: 'mean batch loss: 1.22468 against 1.077', a fix that works refused)."""
    original = _logged(tmp_path / "a.jsonl", [1.0, 0.5, 0.25])
    faster = _logged(tmp_path / "b.jsonl", [1.0, 0.5, 0.25, 2.0, 3.0])
    assert ("epoch 0 loss in fit 3", 0.25) in original.items
    sameness = compare([original], faster)
    assert sameness.same is True and sameness.compared == 6


def test_a_timing_written_against_its_unit_is_no_part_of_its_line_s_key():
    """helper-57's distributed tutorial prints "epoch 2 train 94 steps in 2.59s (27.6
    ms/step)": the "2.59s" stayed in the line's key, so a fix's third epoch that also
    took 2.59 s met the original's second ("3 against 2": changed the results)."""
    original = "epoch 1 train 94 steps in 2.62s\nepoch 2 train 94 steps in 2.59s\n"
    fixed = "epoch 1 train 94 steps in 4.94s\nepoch 2 train 94 steps in 2.10s\nepoch 3 in 2.59s\n"
    values = dict(printed_values(original))
    assert values == {
        "epoch # train # steps in #|0|0": 1.0,
        "epoch # train # steps in #|0|1": 94.0,
        "epoch # train # steps in #|1|0": 2.0,
        "epoch # train # steps in #|1|1": 94.0,
    }
    a = Values("printed output", tuple(printed_values(original)))
    b = Values("printed output", tuple(printed_values(fixed)))
    assert compare([a, a], b).same is True
    assert compare([a, a], b, by_mean=True).same is True
    assert [v for _, v in printed_values("took 1.5min, 12ms/step, 3e-3s; loss 0.5\n")] == [0.5]
