"""compression.cpu-codec from small placement facts."""

import pytest

from gpuwhy.fixes.op_groups import PREDICTION_NOTE
from gpuwhy.rules.compression.cpu_codec import CpuCodec
from tests import builders as b


def run(facts, **options):
    return CpuCodec().check(facts, {**CpuCodec.options, **options})


def codec(op, in_dtypes=("string",), out_dtypes=("uint8",), **kw):
    return b.op_group(op, "no-gpu-kernel", in_dtypes=in_dtypes, out_dtypes=out_dtypes, **kw)


def test_jpeg_decode_in_the_step():
    group = codec("DecodeJpeg", locations=("data.py:12",), examples=("train_step/decode_jpeg",))
    facts = b.placement_facts(groups=[b.op_group("MatMul"), group])
    (finding,) = run(facts)
    assert finding.id == "compression.cpu-codec"
    assert finding.severity == "medium"
    assert finding.title == (
        "1 compression/codec op runs on the CPU inside the step: "
        "DecodeJpeg (string, uint8) at data.py:12"
    )
    assert finding.location == "data.py:12"
    assert finding.evidence["codec_ops_in_step"] == 1
    assert finding.evidence["why_cpu"] == "TensorFlow registers no GPU kernel for these ops"
    assert finding.evidence["placement"] == PREDICTION_NOTE
    assert finding.evidence["ops"] == [
        {
            "op": "DecodeJpeg",
            "dtypes": "string, uint8",
            "count": 1,
            "reason": "no-gpu-kernel",
            "examples": ["train_step/decode_jpeg"],
            "locations": ["data.py:12"],
        }
    ]
    assert "<your decode function>, num_parallel_calls=tf.data.AUTOTUNE" in finding.fix
    assert "tf.image.decode_and_crop_jpeg" in finding.fix
    assert "fn.decoders.image(device='mixed')" in finding.fix


@pytest.mark.parametrize(
    "op, in_dtypes, out_dtypes",
    [
        ("DecodePng", ("string",), ("uint8",)),
        ("DecodeCompressed", ("string",), ("string",)),
        ("EncodePng", ("uint8",), ("string",)),
        ("DecodeAndCropJpeg", ("string", "int32"), ("uint8",)),
        (
            "RangeEncodeWithIndexes",
            ("int32", "int32", "int32", "int32"),
            ("string",),
        ),  # tensorflow-compression
        ("RangeDecodeWithIndexes", ("string", "int32"), ("int32",)),
        ("EntropyDecodeIndex", ("variant", "int32"), ("int32",)),
        ("RunLengthGammaEncode", ("int32",), ("string",)),
    ],
)
def test_codec_ops_fire(op, in_dtypes, out_dtypes):
    (finding,) = run(b.placement_facts(groups=[codec(op, in_dtypes, out_dtypes)]))
    assert finding.evidence["ops"][0]["op"] == op
    assert f": {op} (" in finding.title


def test_encoders_only_get_no_decoder_advice():
    (finding,) = run(b.placement_facts(groups=[codec("EncodePng", ("uint8",), ("string",))]))
    assert ".batch(<batch size>).prefetch(tf.data.AUTOTUNE)" in finding.fix
    assert "decode_and_crop_jpeg" not in finding.fix
    assert "DALI" not in finding.fix


def test_several_codec_ops_are_counted_and_sorted():
    groups = [
        codec("DecodePng", count=2, locations=("a.py:1",)),
        codec("DecodeCompressed", count=5, out_dtypes=("string",), locations=("b.py:2",)),
        b.op_group("PyFunc", "no-gpu-kernel"),
    ]
    (finding,) = run(b.placement_facts(groups=groups))
    assert finding.evidence["codec_ops_in_step"] == 7
    assert [row["op"] for row in finding.evidence["ops"]] == ["DecodeCompressed", "DecodePng"]
    assert finding.title.startswith(
        "7 compression/codec ops run on the CPU inside the step: DecodeCompressed"
    )
    assert finding.location == "b.py:2"


@pytest.mark.parametrize(
    "op",
    [
        "DecodeRaw",
        "DecodeCSV",
        "ParseExampleV2",
        "StringToNumber",
        "PyFunc",
        "EncodeBase64",
        "Range",
        "RangeDataset",
    ],
)
def test_other_host_ops_are_not_codecs(op):
    assert (
        run(b.placement_facts(groups=[b.op_group(op, "no-gpu-kernel", in_dtypes=("string",))]))
        == []
    )


def test_clean_step_is_quiet():
    groups = [
        b.op_group("MatMul", count=3),
        b.op_group("Conv2D", count=2),
        b.op_group("IteratorGetNext", "input", in_dtypes=("resource",)),
    ]
    assert run(b.placement_facts(groups=groups)) == []
    assert run(b.placement_facts()) == []
