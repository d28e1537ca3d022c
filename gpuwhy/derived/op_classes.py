"""Classes of ops the rules, the report and the projection name alike: compression
codec ops (CPU-only by design), Python ops (py_function, numpy_function), and Keras'
own train functions (the step ``fit`` compiles).

The Python ops and the Keras train function names are kept with the facts
(gpuwhy.facts.placement), where the collectors that record them read them too; the
codec ops are the rules' only. One place to ask whichever class an op is in."""

from __future__ import annotations

from gpuwhy.facts.placement import KERAS_TRAIN_FUNCTIONS, PYTHON_OPS

__all__ = ["CODEC_OPS", "KERAS_TRAIN_FUNCTIONS", "PYTHON_OPS", "is_codec", "is_keras_step"]


CODEC_OPS = frozenset(
    {
        "DecodeJpeg",
        "DecodeAndCropJpeg",
        "DecodePng",
        "DecodeGif",
        "DecodeBmp",
        "DecodeImage",
        "DecodeWebP",
        "EncodeJpeg",
        "EncodeJpegVariableQuality",
        "EncodePng",
        "DecodeCompressed",
        "DecodeWav",
        "EncodeWav",
    }
)


# tensorflow-compression's entropy coders (its custom op library).
_CODEC_PREFIXES = ("RangeEncode", "RangeDecode", "EntropyEncode", "EntropyDecode", "RunLength")


def is_codec(op: str) -> bool:
    return op in CODEC_OPS or op.startswith(_CODEC_PREFIXES)


def is_keras_step(name: str | None) -> bool:
    """Whether the step function named (``name (file:line)`` less its place) is Keras':
    its fix is then a ``compile`` argument, not a decorator on the user's function.
    Unknown (None) is taken as Keras, whose steps are the common case."""
    return (
        name is None
        or name in KERAS_TRAIN_FUNCTIONS
        or name.endswith((".train_step", ".test_step", ".predict_step"))
    )
