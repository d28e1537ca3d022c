"""Writes ``duty_*.with_samples.nvml.jsonl``: each duty-loop recording with the driver's own
utilisation samples, taken beside it on the same H100 (``*.driver_samples.jsonl``, from
``nvml_samples.py``), put into its ticks as the recorder of issue #35 keeps them.

Nothing is made up: both files are real readings of the same run. A tick's NVML
timestamp (its PCIe counters' ``pcie_tx[2]``, µs, the clock the driver stamps its
samples with) says which samples the recorder would have read at that tick: those taken
after the previous tick's and up to its own. Samples from before the recording's first
tick are left out, as the recorder leaves them out. The point readings (``util``) stay
as recorded. Run ``python tests/data/nvml/h100/with_driver_samples.py`` to rewrite them.
"""

from __future__ import annotations

import json
from pathlib import Path

HERE = Path(__file__).parent


def driver_samples(path: Path) -> list[tuple[int, int]]:
    seen: dict[int, int] = {}
    for line in path.read_text().splitlines():
        row = json.loads(line)
        if isinstance(row["samples"], list):
            seen.update((int(ts), int(value)) for ts, value in row["samples"])
    return sorted(seen.items())


def merged(stem: str) -> list[dict]:
    lines = [json.loads(x) for x in (HERE / f"{stem}.nvml.jsonl").read_text().splitlines() if x]
    samples = driver_samples(HERE / f"{stem}.driver_samples.jsonl")
    header = dict(lines[0])
    header["description"] = (
        f"{stem}.nvml.jsonl (real, H100) with the driver's utilisation samples of the same run "
        f"({stem}.driver_samples.jsonl) placed in its ticks by NVML timestamp "
        "(with_driver_samples.py)"
    )
    out, previous_us = [header], None
    for line in lines[1:]:
        if line.get("kind") != "tick":
            out.append(line)
            continue
        tick = json.loads(json.dumps(line))
        for gpu in tick["gpus"]:
            stamp = (gpu.get("pcie_tx") or [None, None, None])[2]
            if stamp is None:
                continue
            if previous_us is not None:
                gpu["util_samples"] = [[ts, v] for ts, v in samples if previous_us < ts <= stamp]
            else:
                gpu["util_samples"] = []
            previous_us = stamp
        out.append(tick)
    return out


def main() -> None:
    for stem in ("duty_100_100", "duty_40_160"):
        path = HERE / f"{stem}.with_samples.nvml.jsonl"
        path.write_text("".join(json.dumps(x, separators=(",", ":")) + "\n" for x in merged(stem)))
        print(path)


if __name__ == "__main__":
    main()
