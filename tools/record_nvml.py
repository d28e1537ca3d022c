"""Record REAL NVML fixtures for tests/data/nvml/ on a machine with an NVIDIA GPU.

The sampler's conversions are tested on recordings; until this runs, the only ones are
hand-constructed (``constructed_*.jsonl``). This script runs small programs under
``gpuwhy watch`` with the live NVML source recording (``record_path``), one per scenario
and installed framework, and writes ``real_<framework>_<scenario>_<gpu>.jsonl`` with a
header that says what ran:

- ``busy``: large matmuls back to back (utilisation near 100%, GPM SM activity high);
- ``idle``: memory allocated, then nothing (0% with memory held);
- ``starved``: a small matmul per step and 50 ms of "input" on the host between steps;
- ``transfer``: host -> GPU copies of 256 MiB in a loop (PCIe counters).

It also writes ``real_peaks_<gpu>.jsonl``: what NVML reports of each GPU model that the
projection derives peaks from when its table lacks the GPU (clocks, cores, memory bus).

Usage (from the repository root, in the environment that has the frameworks)::

    python tools/record_nvml.py                       # every installed framework, 8 s each
    python tools/record_nvml.py --frameworks torch --seconds 5 --scenarios busy idle
    python tools/record_nvml.py --out /tmp/nvml      # somewhere else

It prints, per recording, the GPU's mean utilisation, its clock-event reasons and PCIe
link, and the live cost of one tick (``read_s``: the NVML calls of one tick), which is
the number to report.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import re
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PROGRAMS = {
    "torch": {
        "setup": "import time, torch\nd = torch.device('cuda')\n",
        "busy": "a = torch.randn(8192, 8192, device=d)\nend = time.time() + {s}\n"
        "while time.time() < end:\n    a = (a @ a).clamp_(-1, 1)\n    torch.cuda.synchronize()\n",
        "idle": "x = torch.empty(4 << 30, dtype=torch.uint8, device=d)\ntime.sleep({s})\n",
        "starved": "a = torch.randn(1024, 1024, device=d)\nend = time.time() + {s}\n"
        "while time.time() < end:\n    time.sleep(0.05)\n    a = (a @ a).clamp_(-1, 1)\n"
        "    torch.cuda.synchronize()\n",
        "transfer": "h = torch.empty(256 << 20, dtype=torch.uint8).pin_memory()\nend = time.time() + {s}\n"
        "while time.time() < end:\n    g = h.to(d, non_blocking=True)\n    torch.cuda.synchronize()\n",
    },
    "jax": {
        "setup": "import time, jax, jax.numpy as jnp, numpy as np\n"
        "f = jax.jit(lambda a: jnp.clip(a @ a, -1, 1))\n",
        "busy": "a = jnp.ones((8192, 8192))\nend = time.time() + {s}\n"
        "while time.time() < end:\n    a = f(a).block_until_ready()\n",
        "idle": "x = jnp.zeros((1 << 30,), jnp.float32).block_until_ready()\ntime.sleep({s})\n",
        "starved": "a = jnp.ones((1024, 1024))\nend = time.time() + {s}\n"
        "while time.time() < end:\n    time.sleep(0.05)\n    a = f(a).block_until_ready()\n",
        "transfer": "h = np.ones(64 << 20, np.float32)\nend = time.time() + {s}\n"
        "while time.time() < end:\n    jax.device_put(h).block_until_ready()\n",
    },
    "tensorflow": {
        "setup": "import os, time\nos.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')\n"
        "import tensorflow as tf, numpy as np\n"
        "f = tf.function(lambda a: tf.clip_by_value(a @ a, -1.0, 1.0))\n",
        "busy": "a = tf.ones((8192, 8192))\nend = time.time() + {s}\n"
        "while time.time() < end:\n    a = f(a); _ = a[0, 0].numpy()\n",
        "idle": "x = tf.zeros((1 << 30,))\n_ = x[0].numpy()\ntime.sleep({s})\n",
        "starved": "a = tf.ones((1024, 1024))\nend = time.time() + {s}\n"
        "while time.time() < end:\n    time.sleep(0.05)\n    a = f(a); _ = a[0, 0].numpy()\n",
        "transfer": "h = np.ones(64 << 20, np.float32)\nend = time.time() + {s}\n"
        "while time.time() < end:\n    g = tf.identity(tf.constant(h)); _ = g[0].numpy()\n",
    },
}
DESCRIPTIONS = {
    "busy": "large matmuls back to back",
    "idle": "GPU memory allocated, then nothing for the whole run",
    "starved": "a 1024x1024 matmul per step, 50 ms of host work (input) between steps",
    "transfer": "host -> GPU copies in a loop (PCIe)",
}


def installed(framework: str) -> bool:
    return importlib.util.find_spec(framework) is not None


def slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def record(framework: str, scenario: str, seconds: float, hz: float, out: Path) -> Path:
    from gpuwhy.modes.watch import watch

    program = PROGRAMS[framework]["setup"] + PROGRAMS[framework][scenario].format(s=seconds)
    path = out / f"real_{framework}_{scenario}.jsonl.tmp"
    record_, code = watch([sys.executable, "-c", program], hz=hz, record_path=path)
    lines = path.read_text(encoding="utf-8").splitlines()
    header = json.loads(lines[0])
    gpu = slug(header["devices"][0]["name"]) if header.get("devices") else "no-gpu"
    header.update(
        {
            "constructed": False,
            "description": f"REAL recording: {framework}, {DESCRIPTIONS[scenario]}, {seconds:g} s "
            f"(tools/record_nvml.py); program exit code {code}",
            "scenario": scenario,
            "framework": framework,
            "program": program,
        }
    )
    final = out / f"real_{framework}_{scenario}_{gpu}.jsonl"
    final.write_text("\n".join([json.dumps(header)] + lines[1:]) + "\n", encoding="utf-8")
    path.unlink()
    summarise(final, record_)
    return final


def summarise(path: Path, record_) -> None:
    ticks = [json.loads(line) for line in path.read_text().splitlines()[1:]]
    reads = [t["read_s"] for t in ticks if "read_s" in t]
    samples = record_.facts.gpu_samples
    print(f"{path.name}: {len(ticks)} ticks, error={samples.error}, gpm={samples.gpm}")
    if reads:
        print(
            f"  one tick's NVML calls: median {1e3 * statistics.median(reads):.2f} ms, "
            f"max {1e3 * max(reads):.2f} ms"
        )
    for g in samples.gpus:
        util = [u for u in g.utilization if u is not None]
        own = [m for m in g.own_memory_bytes if m is not None]
        print(
            f"  GPU {g.index} {g.name}: mean util {statistics.mean(util) if util else float('nan'):.0%}, "
            f"own memory max {max(own, default=0) / 2**30:.1f} GiB"
        )
        reasons = ", ".join(f"{r.name} x{r.samples}" for r in g.clock_reasons) or "none"
        print(
            f"  clock-event reasons: {reasons}; max SM clock {g.max_sm_clock_mhz} MHz; "
            f"link busy min Gen{g.low('pcie_gen_busy')} x{g.low('pcie_width_busy')} of "
            f"Gen{g.pcie_max_gen} x{g.pcie_max_width} (GPU Gen{g.gpu_pcie_max_gen}); "
            f"replays {g.total('pcie_replays')}; temperature max {g.peak('temperature_c')} C"
        )
    for f in record_.findings:
        print(f"  finding {f.id}: {f.title}")


def record_peaks(out: Path) -> list[Path]:
    """What the projection derives an unknown GPU's peaks from (collect.nvml.peaks_reading),
    one file per GPU model here, beside the table's name for it: the derivation is tested
    against these (tests/projection/test_derive.py)."""
    from gpuwhy.collect.nvml import PEAKS_FORMAT, peaks_reading, snapshot
    from gpuwhy.gpu_specs import UnknownGpuError, find_gpu

    written = []
    for device in snapshot().get("devices", []):
        reading = peaks_reading(device.index)
        if reading is None:
            continue
        try:
            table = find_gpu(reading["name"]).name
        except UnknownGpuError:
            table = None
        header = {"kind": "header", "format": PEAKS_FORMAT, "version": 1}
        header["description"] = f"RECORDED by tools/record_nvml.py: {reading['name']}"
        path = out / f"real_peaks_{slug(reading['name'])}.jsonl"
        lines = [header, {"kind": "reading", "table": table, "reading": reading}]
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
        print(f"{path.name}: {reading}")
        written.append(path)
    return written


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--frameworks", nargs="*", default=list(PROGRAMS))
    parser.add_argument("--scenarios", nargs="*", default=list(DESCRIPTIONS))
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--hz", type=float, default=10.0)
    parser.add_argument("--out", type=Path, default=ROOT / "tests" / "data" / "nvml")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    record_peaks(args.out)
    done = 0
    for framework in args.frameworks:
        if not installed(framework):
            print(f"skipping {framework}: not installed")
            continue
        for scenario in args.scenarios:
            record(framework, scenario, args.seconds, args.hz, args.out)
            done += 1
    return 0 if done else 1


if __name__ == "__main__":
    sys.exit(main())
