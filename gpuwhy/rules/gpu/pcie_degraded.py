"""gpu.pcie-degraded: under load, the GPU's PCIe link ran below what link and GPU support."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import busy_span
from gpuwhy.facts import Facts, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.formatting import run_time
from gpuwhy.gpu_specs import PCIE_GENERATIONS, pcie_gb_s
from gpuwhy.rules.base import Rule
from gpuwhy.rules.gpu.common import each_program_gpu

FIX = """\
nvidia-smi -q -d PCIE -i {gpu}     # PCIe Generation Max/Current, Link Width Max/Current, Replays
sudo lspci -vv -s {bus} | grep -E 'LnkCap|LnkSta'   # LnkSta below LnkCap: "(downgraded)"
# Judge it under load: an idle link downshifts by design. Then reseat the card (and its
# riser or cable), try another slot, set the slot's PCIe speed to Auto/Gen{gen} in the BIOS
# and update the BIOS; a replay counter that keeps growing points at the slot, the riser
# or the card itself."""


class PcieDegraded(Rule):
    """The GPU's PCIe link ran below the generation or width that both the link and the
    GPU support, while the GPU was busy.

    ## What it detects
    NVML's current link generation and width (`nvmlDeviceGetCurrPcieLinkGeneration` /
    `Width`, dcgm-exporter's `DCGM_FI_DEV_PCIE_LINK_GEN` / `_WIDTH`), read with every
    sample, against the link's maximum (`nvmlDeviceGetMaxPcieLinkGeneration` / `Width`:
    what both the GPU and its slot support), on the busy samples of a GPU the program
    used only (utilisation >= 50%): a link downshifts when idle to save power, so an
    idle Gen1 is normal. It fires when at least `min_busy_samples` busy samples were
    read and at least `min_share` of them ran below the maximum. The finding gives the
    link under load and the one possible, in GB/s per direction, and NVML's PCIe replay
    counter over the run (`nvmlDeviceGetPcieReplayCounter`): replays that keep growing
    are link errors, the usual companion of a bad seat or riser.

    ## Why is this slow?
    Every host-to-device copy (the input batches, `.numpy()` of the results, variables
    on the host) crosses this link. A Gen4 x16 link carries 31.5 GB/s each way; trained
    at Gen2 x16 it carries 8, at Gen4 x4 also 8: copies take four times longer, and a
    step that waits for its input batch waits that much longer. GPU utilisation still
    reads 100% when the kernels wait for their data, so nothing else shows it. A link
    trains down when the card, its riser or its slot makes poor contact, when the BIOS
    caps the slot's speed, or when errors (the replays) make it fall back.

    ## Example
    ```console
    $ nvidia-smi -q -d PCIE
        PCIe Generation
            Max                       : 4
            Current                   : 2
    ```

    Use instead:
    ```console
    $ sudo lspci -vv -s 01:00.0 | grep -E 'LnkCap|LnkSta'
    LnkCap: Port #0, Speed 16GT/s, Width x16
    LnkSta: Speed 16GT/s, Width x16        # after reseating the card
    ```

    ## Options
    - `min_busy_samples`: busy samples (utilisation >= 50%) with the link read that a GPU
      needs before it is judged (30: 3 s at 10 Hz).
    - `min_share`: share of those samples below the link's maximum from which it fires
      (0.25).
    - `high_ratio`: the bandwidth under load over the possible one at or below which the
      finding is high (0.5).
    """

    id = "gpu.pcie-degraded"
    measured_thresholds = {"min_share": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("gpu_samples",)
    options = {"min_busy_samples": 30, "min_share": 0.25, "high_ratio": 0.5}
    question = "Why are copies to the GPU slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        return each_program_gpu(facts, lambda series: self._judge(series, options))

    def _judge(self, series: GpuSeries, options: dict[str, Any]) -> Finding | None:
        busy = series.known("pcie_degraded_busy")
        degraded = series.total("pcie_degraded_busy") or 0.0
        if busy < options["min_busy_samples"] or degraded / busy < options["min_share"]:
            return None
        gen, width = _int(series.low("pcie_gen_busy")), _int(series.low("pcie_width_busy"))
        top_gen, top_width = series.pcie_max_gen, series.pcie_max_width
        now, possible = pcie_gb_s(gen, width), pcie_gb_s(top_gen, top_width)
        ratio = now / possible if now and possible else None
        span = busy_span(series, "pcie_degraded_busy")
        first = span[0] if span is not None else 0
        start = series.t[first]
        judged = series.column("pcie_degraded_busy").known
        whole = not any(judged[:first])  # from the first busy sample on
        replays = series.total("pcie_replays")
        inside = [v is not None for v in series.pcie_gen_busy]
        to_gpu = series.mean("pcie_rx_bytes_per_s", inside)
        from_gpu = series.mean("pcie_tx_bytes_per_s", inside)
        link = _link(gen, width)
        best = _link(top_gen, top_width)
        rates = f" ({now:g} GB/s per direction instead of {possible:g})" if now and possible else ""
        errors = f", {replays:.0f} PCIe replays (link errors)" if replays else ""
        when = "whenever busy" if whole else f"under load from {run_time(start)}"
        fastest = max((r for r in (to_gpu, from_gpu) if r is not None), default=None)
        full = (
            f"; copies reached {fastest / 1e9:.1f} GB/s, {fastest / 1e9 / now:.0%} of what it carries"
            if fastest is not None and now and fastest / 1e9 >= 0.5 * now
            else ""
        )
        bus = series.pci_bus_id
        return self.finding(
            f"GPU {series.index} ({series.name}) ran its PCIe link at {link} {when}, where "
            f"{best} is possible{rates}{errors}{full}",
            severity="high" if ratio is not None and ratio <= options["high_ratio"] else "medium",
            evidence={
                "gpu": series.index,
                "busy_samples": busy,
                "degraded_share": round(degraded / busy, 3),
                "from_s": round(start, 1),
                "pcie_gen_busy_min": gen,
                "pcie_width_busy_min": width,
                "pcie_gen_busy_mean": _rounded(series.mean("pcie_gen_busy"), 2),
                "pcie_max_gen": top_gen,
                "pcie_max_width": top_width,
                "gpu_pcie_max_gen": series.gpu_pcie_max_gen,
                "link_gb_s": now,
                "possible_gb_s": possible,
                "per_lane": _lanes(gen, top_gen),
                "pcie_replays": None if replays is None else round(replays),
                "to_gpu_gb_s": _rounded(None if to_gpu is None else to_gpu / 1e9, 2),
                "from_gpu_gb_s": _rounded(None if from_gpu is None else from_gpu / 1e9, 2),
                "pci_bus_id": bus,
            },
            fix=FIX.format(gpu=series.index, bus=_lspci(bus), gen=top_gen or "N"),
            gain_value=None if ratio is None else round(1 - ratio, 3),
            estimated_gain=(f"host<->GPU copies up to {1 / ratio:.0f}x faster" if ratio else None),
        )


def _link(gen: int | None, width: int | None) -> str:
    return f"Gen{gen if gen is not None else '?'} x{width if width is not None else '?'}"


def _lanes(gen: int | None, top: int | None) -> str | None:
    """Each generation's lane rate with its coding: '5 GT/s (8b/10b) vs 16 GT/s (128b/130b)'."""
    specs = [PCIE_GENERATIONS.get(g or 0) for g in (gen, top)]
    if None in specs:
        return None
    return " vs ".join(f"{s.gt_s:g} GT/s ({s.coding})" for s in specs if s is not None)


def _lspci(bus: str | None) -> str:
    """NVML's bus id (``00000000:01:00.0``) as lspci takes it (``0000:01:00.0``)."""
    if not bus or bus.count(":") != 2:
        return "<bus id: nvidia-smi --query-gpu=pci.bus_id --format=csv>"
    domain, rest = bus.split(":", 1)
    return f"{domain[-4:]}:{rest}"


def _int(value: float | None) -> int | None:
    return None if value is None else int(value)


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)
