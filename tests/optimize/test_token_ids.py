"""tensorcore.unused's mixed-precision fix pasted into a text model fed token ids.

keras-io's "Text classification with Transformer" takes its ids through
``layers.Input(shape=(maxlen,))``: float32, Keras' default. Its custom
``TokenAndPositionEmbedding`` layer autocasts, so under ``mixed_float16`` the ids reach
the embedding as float16, exact up to 2048 only: rows above come out wrong (and an id
rounded past the table fails the lookup). Here the program, with a vocabulary of
20,000 and synthetic ids, runs under `gpuwhy run`; the finding's fix is pasted as its
reader would (the Input line replaced, the policy set before the model is built) and
the embeddings of ids above 2048 must be the float32 run's, to float16's precision.
Mixed precision pasted without the Input line gets other rows: that is why the fix
never offers it alone. A model whose Input is already int32 gets the plain fix.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from gpuwhy.rules.tensorcore.unused import CPU_ONLY_NOTE
from tests.test_run_tensorflow import ROOT, run

np = pytest.importorskip("numpy")
pytest.importorskip("tensorflow")

TRANSFORMER = textwrap.dedent(
    """
    import sys

    import numpy as np
    import tensorflow as tf
    import keras
    from keras import layers

    vocab_size, maxlen, embed_dim = 20000, 16, 8


    class TokenAndPositionEmbedding(layers.Layer):
        def __init__(self, maxlen, vocab_size, embed_dim):
            super().__init__()
            self.token_emb = layers.Embedding(input_dim=vocab_size, output_dim=embed_dim)
            self.pos_emb = layers.Embedding(input_dim=maxlen, output_dim=embed_dim)

        def call(self, x):
            positions = tf.range(start=0, limit=tf.shape(x)[-1], delta=1)
            return self.token_emb(x) + self.pos_emb(positions)


    keras.utils.set_random_seed(0)
    inputs = layers.Input(shape=(maxlen,))
    embedding_layer = TokenAndPositionEmbedding(maxlen, vocab_size, embed_dim)
    x = embedding_layer(inputs)
    x = layers.GlobalAveragePooling1D()(x)
    x = layers.Dense(64, activation="relu")(x)
    outputs = layers.Dense(2, activation="softmax")(x)
    model = keras.Model(inputs=inputs, outputs=outputs)
    probe = np.array([[1, 2047, 2049, 2051, 3001, 4097, 8191, 12345] * 2])
    embedded = keras.Model(inputs, embedding_layer.output)(probe)
    np.save(sys.argv[1], np.asarray(embedded, dtype=np.float32))

    model.compile(optimizer="adam", loss="sparse_categorical_crossentropy", metrics=["accuracy"])
    rs = np.random.RandomState(0)
    x_train = rs.randint(0, 2047, (512, maxlen))
    y_train = rs.randint(0, 2, 512)
    model.fit(x_train, y_train, batch_size=32, epochs=1, verbose=0)
    """
)
INT_INPUT = TRANSFORMER.replace(
    "inputs = layers.Input(shape=(maxlen,))",
    'inputs = layers.Input(shape=(maxlen,), dtype="int32")',
)
_IN_PLACE_OF = re.compile(r"^# (?P<file>[^:]+):(?P<line>\d+): in place of: (?P<old>.*)$")


def _tensorcore_fix(script: Path, tmp_path: Path) -> tuple[str, dict]:
    out = tmp_path / "run.json"
    result = run("--json", out, script, tmp_path / "run.npy", cwd=script.parent)
    assert result.returncode == 0, result.stderr[-2000:]
    findings = json.loads(out.read_text())["findings"]
    (finding,) = [f for f in findings if f["id"] == "tensorcore.unused"]
    return finding["fix"], finding["evidence"]


def paste(source: str, fix: str) -> str:
    """The fix's line in place of the one it names; its other code lines (the policy)
    after the imports, before the model is built."""
    lines = source.splitlines()
    fix_lines = fix.splitlines()
    for index, text in enumerate(fix_lines):
        marker = _IN_PLACE_OF.match(text)
        if marker:
            at = int(marker["line"]) - 1
            assert lines[at] == marker["old"], (lines[at], marker["old"])
            lines[at] = fix_lines[index + 1]
            fix_lines[index + 1] = "#"
    statements = [t for t in fix_lines if t.strip() and not t.startswith("#")]
    last_import = max(i for i, t in enumerate(lines) if t.startswith(("import ", "from ")))
    lines[last_import + 1 : last_import + 1] = statements
    return "\n".join(lines) + "\n"


def _embeddings(source: str, path: Path) -> tuple[np.ndarray, int]:
    path.write_text(source)
    saved = path.with_suffix(".npy")
    result = subprocess.run(
        [sys.executable, str(path), str(saved)],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=path.parent,
        env={"TF_CPP_MIN_LOG_LEVEL": "2", "PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT)},
    )
    return np.load(saved), result.returncode


def test_token_ids_through_a_float_input_are_made_int32_before_mixed_precision(tmp_path):
    script = tmp_path / "transformer.py"
    script.write_text(TRANSFORMER)
    fix, evidence = _tensorcore_fix(script, tmp_path)
    assert "# transformer.py:24: in place of: inputs = layers.Input(shape=(maxlen,))\n" in fix
    assert '\ninputs = layers.Input(shape=(maxlen,), dtype="int32")\n' in fix
    # the Input line comes before mixed precision is turned on
    assert fix.index('dtype="int32"') < fix.index("set_global_policy('mixed_float16')")
    assert evidence["float_token_ids"] == [
        "GatherV2 (transformer.py:20) reads ids that arrive as float32 through inputs "
        "(transformer.py:24)"
    ]
    original, code = _embeddings(TRANSFORMER, tmp_path / "original.py")
    assert code == 0
    pasted, code = _embeddings(paste(TRANSFORMER, fix), tmp_path / "pasted.py")
    assert code == 0
    assert np.allclose(pasted, original, rtol=2e-3, atol=1e-4)
    # mixed precision alone: ids above 2048 rounded to float16 read other rows
    bare = paste(TRANSFORMER, "keras.mixed_precision.set_global_policy('mixed_float16')")
    wrong, _ = _embeddings(bare, tmp_path / "bare.py")
    assert not np.allclose(wrong, original, rtol=2e-3, atol=1e-4)
    assert np.allclose(wrong[0, :2], original[0, :2], rtol=2e-3, atol=1e-4)  # ids 1, 2047


def test_int32_token_ids_get_the_plain_mixed_precision_fix(tmp_path):
    script = tmp_path / "transformer.py"
    script.write_text(INT_INPUT)
    fix, evidence = _tensorcore_fix(script, tmp_path)
    assert "token ids" not in fix and "float_token_ids" not in evidence
    assert fix.removeprefix(CPU_ONLY_NOTE).startswith(
        "keras.mixed_precision.set_global_policy('mixed_float16')"
    )
    original, _ = _embeddings(INT_INPUT, tmp_path / "original.py")
    pasted, code = _embeddings(paste(INT_INPUT, fix), tmp_path / "pasted.py")
    assert code == 0 and np.allclose(pasted, original, rtol=2e-3, atol=1e-4)
