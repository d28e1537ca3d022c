"""A finding's evidence in words for the HTML card: each machine key as a sentence with
its unit, read from the key's own suffix."""

import pytest

from gpuwhy.report.locations import nowrap_locations
from gpuwhy.report.run.evidence_text import cell, is_log, is_table, sentence, words


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("input_wait_mean_ms", 59.56, "Input wait mean: 59.6 ms."),
        ("input_wait_fraction", 0.665, "Input wait fraction: 66%."),
        ("share_of_time_issuing_them", 0.004, "Share of time issuing them: 0.4%."),
        ("bottleneck_ms_per_element", 84.94, "Bottleneck per element: 84.9 ms."),
        ("median_gap_between_eager_ops_us", 18.2, "Median gap between eager ops: 18.2 µs."),
        ("trace_seconds", 12.5, "Trace: 12.5 s."),
        ("bytes_copied_per_step", 2 * 1024 * 1024, "Bytes copied per step: 2.0 MiB."),
        ("tf32_enabled", False, "TF32 enabled: no."),
        ("tf_function_objects", 3, "TF function objects: 3."),
        ("changed_arguments", ["learning_rate", "x"], "Changed arguments: learning_rate, x."),
        ("measured_by", "next() timing", "Measured by: next() timing."),
    ],
)
def test_each_field_reads_as_a_sentence_with_its_unit(key, value, expected):
    assert sentence(key, value) == expected


def test_fields_that_say_nothing_are_left_out():
    assert sentence("first_traces", None) is None
    assert sentence("sites", []) is None


def test_words_keep_proper_names():
    assert words("gpu_busy_share") == "GPU busy share"
    assert words("cudnn_version") == "cuDNN version"


def test_tables_and_logs_are_told_apart_from_sentences():
    assert is_table([{"op": "Exp"}]) and not is_table(["Exp"])
    assert is_log("tensorflow_log", ["line"]) and not is_log("ops", ["Exp"])
    assert cell("share_of_pipeline_time", 0.997) == "100%"
    assert cell("ms_per_element", 0.3) == "300.0 µs"
    assert cell("threads", None) == "-"


def test_locations_are_kept_whole_and_the_rest_escaped():
    html = str(nowrap_locations("Exp at train.py:12, <b> at lib/x.py:3:4"))
    assert html == (
        'Exp at <span class="loc">train.py:12</span>, &lt;b&gt; at '
        '<span class="loc">lib/x.py:3:4</span>'
    )


def test_rates_clocks_and_power_read_in_their_units():
    from gpuwhy.report.run.evidence_text import column_title, sentence

    assert sentence("pcie_to_gpu_mb_s", 80.4) == "PCIe to GPU: 80.4 MB/s."
    assert sentence("sm_clock_mhz", 1980) == "SM clock: 1,980 MHz."
    assert sentence("power_w", 163) == "Power: 163 W."
    # a column's header leaves its unit to the cells: never "Ms per element"
    assert column_title("ms_per_element") == "Per element"
    assert column_title("at_s") == "At"


def test_a_field_that_is_a_sentence_is_said_without_its_label():
    assert sentence("why", "TF runs Python one element at a time") == (
        "TF runs Python one element at a time."
    )
    assert sentence("counted", "counted on thread 'MainThread' only") == (
        "Counted on thread 'MainThread' only."
    )
    assert sentence("counted_s", 1.25) == "Counted: 1,250.0 ms."  # a number keeps its label


def test_a_percent_reads_with_its_sign():
    assert sentence("sm_activity_percent", 10.7) == "SM activity: 10.7%."
    assert sentence("utilization_percent", 26) == "Utilization: 26%."
