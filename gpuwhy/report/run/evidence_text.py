"""A finding's evidence in words for the HTML card: each recorded field as a short
sentence with its unit ("Input wait, mean: 59.6 ms."), where the record keeps it as a
machine key and a bare number (``input_wait_mean_ms: 59.56``).

The record's keys stay the contract (JSON, SARIF, `gpuwhy diff` pair findings by them),
so this module only reads them: the unit comes from the key's suffix (``_ms``, ``_s``,
``_bytes``, ``fraction``, ``share``), the words from the rest of it. The card shows
these sentences; the raw keys stay one click away, in a collapsed block.
"""

from __future__ import annotations

from typing import Any

from gpuwhy.formatting import byte_size, duration

# words that read wrong in lower case
PROPER = {
    "tf": "TF",
    "tensorflow": "TensorFlow",
    "gpu": "GPU",
    "gpus": "GPUs",
    "cpu": "CPU",
    "cpus": "CPUs",
    "cuda": "CUDA",
    "cudnn": "cuDNN",
    "xla": "XLA",
    "tf32": "TF32",
    "nvml": "NVML",
    "pcie": "PCIe",
    "rss": "RSS",
    "gc": "GC",
    "io": "I/O",
    "id": "ID",
    "ids": "IDs",
    "ps": "PS",
    "sm": "SM",
    "os": "OS",
    "api": "API",
}
# a key's last word that is its unit, and how a value in it is written
TIME_UNITS = {"ms": 1e-3, "us": 1e-6, "s": 1.0, "seconds": 1.0, "sec": 1.0}
SHARE_WORDS = ("fraction", "share", "ratio_of", "percent_of")
SIZE_WORDS = ("bytes",)
SIZE_UNITS = {"kib": 1024, "mib": 1024**2, "gib": 1024**3}
# a key's last word that is a unit written after the number as it is (``sm_clock_mhz``)
PLAIN_UNITS = {"mhz": "MHz", "w": "W", "mb": "MB", "gb": "GB", "c": "°C"}
# fields whose text is a sentence of its own: said without a label
SELF_SAID = frozenset({"why", "what", "projected", "note", "because"})
RATE_SIZES = {"kb": "KB", "mb": "MB", "gb": "GB"}  # ``pcie_tx_mb_s``: MB a second


def words(key: str) -> str:
    """A machine key as words: ``tf_function_objects`` -> ``TF function objects``."""
    parts = [PROPER.get(p, p) for p in key.split("_") if p]
    if not parts:
        return key
    first = parts[0] if parts[0] in PROPER.values() else parts[0][:1].upper() + parts[0][1:]
    return " ".join([first, *parts[1:]])


def sentence(key: str, value: Any) -> str | None:
    """One evidence field as a sentence with its unit; None for a field that says
    nothing (no value, an empty list). A field that is itself a sentence ("why", "what",
    or text that begins with its own label: ``counted: "counted on thread ..."``) is
    said as it is, without its label."""
    if value is None or value == [] or value == {}:
        return None
    label, text = _label_and_value(key, value)
    end = "" if text.endswith((".", "?", "!", ")")) else "."
    if isinstance(value, str) and (
        key in SELF_SAID or text.lower().startswith(label.lower() + " ")
    ):
        return text[:1].upper() + text[1:] + end
    return f"{label}: {text}" + end


def cell(column: str, value: Any) -> str:
    """A table cell of the card's evidence tables, in the column's unit."""
    return "-" if value is None else _label_and_value(column, value)[1]


def column_title(column: str) -> str:
    """A table's column header, its unit left to the cells (``ms_per_element`` ->
    "Per element" over cells of "84.6 ms", never "Ms per element")."""
    return _label_and_value(column, 1.0)[0]


def _label_and_value(key: str, value: Any) -> tuple[str, str]:
    parts = key.split("_")
    last = parts[-1].lower()
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and last == "s" and len(parts) > 2 and parts[-2].lower() in RATE_SIZES:
        return words("_".join(parts[:-2])), f"{_plain(value)} {RATE_SIZES[parts[-2].lower()]}/s"
    if number and last == "percent" and len(parts) > 1:  # ``sm_activity_percent: 10.7``
        return words("_".join(parts[:-1])), f"{_plain(value)}%"
    if number and last in PLAIN_UNITS and len(parts) > 1:
        return words("_".join(parts[:-1])), f"{_plain(value)} {PLAIN_UNITS[last]}"
    if number and last in TIME_UNITS and len(parts) > 1:
        seconds = value * TIME_UNITS[last]
        return words("_".join(parts[:-1])), _time(seconds)
    # a unit then "per ..." (``ms_per_element``): the label keeps the "per"
    per = next(
        (i for i, p in enumerate(parts[:-1]) if p in TIME_UNITS and parts[i + 1] == "per"), None
    )
    if number and per is not None:
        label = " ".join(x for x in (words("_".join(parts[:per])), "_".join(parts[per + 1 :])) if x)
        return words(label.replace(" ", "_")), _time(value * TIME_UNITS[parts[per]])
    if number and last in SIZE_UNITS and len(parts) > 1:
        return words("_".join(parts[:-1])), byte_size(value * SIZE_UNITS[last])
    if number and any(w in parts for w in SIZE_WORDS):
        return words(key), byte_size(value)
    if number and any(w in key for w in SHARE_WORDS) and -0.0001 <= value <= 10:
        return words(key), f"{value:.0%}" if value >= 0.01 or value == 0 else f"{value:.1%}"
    if number and last == "us" and len(parts) == 1:
        return words(key), _time(value * 1e-6)
    return words(key), _plain(value)


def _time(seconds: float) -> str:
    if seconds < 0.001:
        return f"{seconds * 1e6:,.1f} µs"
    return duration(seconds)


def _plain(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:,.1f}" if abs(value) >= 100 else f"{value:.3g}"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, list):
        return ", ".join(_plain(v) for v in value)
    if isinstance(value, dict):
        return "; ".join(f"{words(str(k)).lower()} {_plain(v)}" for k, v in value.items())
    return str(value)


def is_table(value: Any) -> bool:
    """A list of records (ops, stages, sites): drawn as a table, not a sentence."""
    return isinstance(value, list) and bool(value) and all(isinstance(v, dict) for v in value)


def is_log(key: str, value: Any) -> bool:
    """Lines of a log or of long text: folded away, never a sentence."""
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(v, str) for v in value)
        and (key.endswith("log") or any(len(v) > 80 for v in value))
    )
