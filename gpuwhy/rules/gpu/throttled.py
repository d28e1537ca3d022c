"""gpu.throttled: the GPU ran below its maximum clock while busy, for a reason NVML names."""

from __future__ import annotations

from typing import Any

from gpuwhy.derived.gpu_activity import busy_span
from gpuwhy.facts import ClockReasonSeries, Facts, GpuSeries
from gpuwhy.finding import Finding
from gpuwhy.formatting import run_time
from gpuwhy.rules.base import Rule
from gpuwhy.rules.gpu.common import each_program_gpu

CHECK = "nvidia-smi -q -d PERFORMANCE,POWER,TEMPERATURE,CLOCK   # the reasons now, limits, clocks"
FIXES = {
    "sw_power_cap": """\
# The driver lowers the clocks to keep the board under its enforced power limit.
{check}
nvidia-smi -q -d POWER | grep -i limit   # Current / Default / Max Power Limit
sudo nvidia-smi -i {gpu} -pl <watts>        # back to the default limit if it was lowered
# At the default limit already: this is the board's design point. A heavier load per
# watt (mixed precision) or a board with a higher limit is the way out.""",
    "hw_slowdown": """\
# The board's hardware cut the clocks (factor of 2 or more): over-temperature, an
# external power brake, or a power draw spike that tripped its fast protection.
{check}
nvidia-smi -q -d PERFORMANCE   # "HW Slowdown", "HW Thermal", "HW Power Brake" lines
# Check the power supply cabling (8-pin / 12VHPWR fully seated) and the cooling; a GPU
# that keeps asserting it with sane temperature and power wants an RMA.""",
    "sw_thermal_slowdown": """\
# The GPU (or its memory) is above its maximum operating temperature: the driver slows it.
{check}
nvidia-smi -q -d TEMPERATURE   # current vs "GPU Slowdown Temp" / "GPU Target Temperature"
# Improve the airflow: fans and filters, blanking panels, the chassis fan profile, the
# room's inlet temperature; passively cooled cards (T4, A2, L4) need the server's fans.""",
    "hw_thermal_slowdown": """\
# The GPU reached its hardware thermal limit: the board cuts the clocks hard.
{check}
nvidia-smi -q -d TEMPERATURE   # "GPU Shutdown Temp", "GPU Slowdown Temp", current
# Cooling: fans, heatsink contact, airflow through the chassis (passively cooled cards
# depend on the server's fans at full speed), the room's inlet temperature.""",
    "hw_power_brake_slowdown": """\
# The system asserted the external power-brake signal (its power supply is overloaded or
# failing): the board drops to its lowest clocks.
{check}
# Check the server's PSUs (redundancy lost, one failed) and the BMC's power events.""",
    "sync_boost": """\
# Sync boost holds every GPU of a sync-boost group at the clock of the slowest one: this
# GPU is pulled down by another.
{check}
nvidia-smi -q -d PERFORMANCE   # which GPUs throttle for their own reasons
# Fix the slowest GPU's own reason (its cooling, its power), or leave the group.""",
    "board_limit": """\
# The board's own limit holds the clocks down.
{check}""",
    "reliability": """\
# The board lowers its clocks for reliability (a voltage or current limit).
{check}""",
}


class GpuThrottled(Rule):
    """The GPU ran below its maximum clock while busy, held down by a power, thermal or
    board limit that NVML names.

    ## What it detects
    NVML's clock-event reasons (`nvmlDeviceGetCurrentClocksEventReasons`, the bitmask
    dcgm-exporter publishes as `DCGM_FI_DEV_CLOCKS_EVENT_REASONS`), read with every
    sample, on the busy samples of a GPU the program used (utilisation >= 50%): at least
    `min_busy_samples` of them, and at least `min_share` with a slowdown reason (SW power
    cap, HW slowdown, SW or HW thermal slowdown, HW power brake, sync boost, board limit,
    reliability), with their SM clock at most `max_clock_ratio` of the GPU's maximum.
    The "GPU idle", "applications clocks" and "display clocks" bits are not slowdowns:
    they never fire it. The finding names the main reason in words (the power limit it
    hit, the temperature it reached), the stretch of the run it held (from when, to when
    if it stopped), the clock during it against the maximum, and the fix for that reason.
    High when the busy time lost, at most, reaches `high_loss`; a power cap at the
    board's default limit (a full load at its design power, no limit lowered) is one step
    lower: low, medium from `high_loss`.

    ## Why is this slow?
    A compute-bound kernel runs in proportion to the SM clock: at 1155 of 1410 MHz it
    takes up to 22% longer. The clock ratio is an upper bound of the cost: memory-bound
    kernels slow less, since the memory clock is not lowered as much. The GPU still reads
    100% utilisation, which is why nvidia-smi's usual view shows nothing wrong. Power caps
    come from a limit set low (`nvidia-smi -pl`) or a load at the board's design power;
    thermal slowdowns from airflow; sync boost from another GPU of the group.

    ## Example
    ```console
    $ nvidia-smi -q -d PERFORMANCE
        Clocks Event Reasons
            SW Power Cap                      : Active
    ```

    Use instead:
    ```console
    $ nvidia-smi -q -d POWER | grep -i limit    # was it lowered?
    $ sudo nvidia-smi -pl 300                   # the board's default limit
    ```

    ## Options
    - `min_busy_samples`: busy samples (utilisation >= 50%) a GPU needs before it is
      judged (30: 3 s at 10 Hz).
    - `min_share`: share of those samples with a slowdown reason from which it fires
      (0.10).
    - `max_clock_ratio`: the throttled samples' mean SM clock over the GPU's maximum at
      or above which a slowdown costs too little to report (0.95); where NVML gives no
      maximum the clock is not judged.
    - `high_loss`: the upper bound of busy time lost (share throttled x clock lost) from
      which the finding is high, medium for a power cap at the default limit (0.10).
    """

    id = "gpu.throttled"
    measured_thresholds = {"min_share": "floor"}
    severity = "medium"
    status = "preview"
    since = "0.4.0"
    needs = ("gpu_samples",)
    options = {
        "min_busy_samples": 30,
        "min_share": 0.10,
        "max_clock_ratio": 0.95,
        "high_loss": 0.10,
    }
    question = "Why is the GPU busy but slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        return each_program_gpu(facts, lambda series: self._judge(series, options))

    def _judge(self, series: GpuSeries, options: dict[str, Any]) -> Finding | None:
        busy = series.known("throttled_busy")
        throttled = series.total("throttled_busy") or 0.0
        if busy < options["min_busy_samples"] or throttled / busy < options["min_share"]:
            return None
        reasons = sorted(
            (r for r in series.clock_reasons if r.slowdown and r.busy_samples),
            key=lambda r: -r.busy_samples,
        )
        if not reasons:
            return None
        share = throttled / busy
        clock = series.mean("sm_clock_throttled_mhz")
        top = series.max_sm_clock_mhz
        ratio = clock / top if clock is not None and top else None
        if ratio is not None and ratio >= options["max_clock_ratio"]:
            return None
        span = busy_span(series, "throttled_busy")
        first, last = span if span is not None else (0, len(series.t) - 1)
        inside = [first <= k <= last for k in range(len(series.t))]
        start, end = series.t[first], series.ends()[last]
        stopped = last < len(series.t) - 1 and _busy_after(series, last)
        temperature = _highest(series, "temperature_c", first, last)
        limit = _lowest(series, "power_limit_w", first, last)
        power = series.mean("power_w", inside)
        main = reasons[0]
        words = _in_words(main, limit, power, temperature, series.power_default_limit_w)
        loss = share * (1 - ratio) if ratio is not None else None
        when = f"from {run_time(start)}" + (f" to {run_time(end)}" if stopped else "")
        clocks = (
            f"{clock:.0f} of its {top:.0f} MHz"
            if clock is not None and top
            else f"{clock:.0f} MHz"
            if clock is not None
            else "a lower clock"
        )
        cost = (
            f", up to {1 / ratio - 1:.0%} longer per compute-bound kernel then"
            if ratio is not None and ratio > 0
            else ""
        )
        return self.finding(
            f"GPU {series.index} ({series.name}) is throttled {when}: {words}; "
            f"{clocks} in {share:.0%} of its busy samples{cost}",
            severity=_severity(main, loss, limit, series.power_default_limit_w, options),
            evidence={
                "gpu": series.index,
                "reason": main.name,
                "reasons": {
                    r.name: {"busy_samples": r.busy_samples, "seconds": r.seconds} for r in reasons
                },
                "busy_samples": busy,
                "throttled_share": round(share, 3),
                "from_s": round(start, 1),
                "to_s": round(end, 1) if stopped else None,
                "sm_clock_throttled_mhz": None if clock is None else round(clock),
                "sm_clock_busy_mhz": _rounded(series.mean("sm_clock_busy_mhz")),
                "max_sm_clock_mhz": None if top is None else round(top),
                "clock_ratio": None if ratio is None else round(ratio, 3),
                "temperature_max_c": temperature,
                "power_w": None if power is None else round(power),
                "power_limit_w": limit,
                "power_default_limit_w": series.power_default_limit_w,
            },
            fix=FIXES[main.name].format(check=CHECK, gpu=series.index),
            gain_value=None if loss is None else round(loss, 3),
            estimated_gain=(
                f"up to {loss:.0%} of the busy time (an upper bound: the clock's share; "
                "memory-bound kernels lose less)"
                if loss is not None
                else None
            ),
        )


def _severity(
    reason: ClockReasonSeries,
    loss: float | None,
    limit: float | None,
    default: float | None,
    options: dict[str, Any],
) -> str:
    """High from ``high_loss`` of the busy time; a power cap at the board's default limit
    is its design point (a full load draws that much), one step lower."""
    big = loss is not None and loss >= options["high_loss"]
    by_design = (
        reason.name == "sw_power_cap"
        and limit is not None
        and default is not None
        and limit >= default - 1
    )
    if by_design:
        return "medium" if big else "low"
    return "high" if big else "medium"


def _in_words(
    reason: ClockReasonSeries,
    limit: float | None,
    power: float | None,
    temperature: float | None,
    default: float | None,
) -> str:
    """The reason as a sentence, with the limit or temperature it came with."""
    heat = f" at {temperature:.0f} C" if temperature is not None else ""
    if reason.name == "sw_power_cap":
        if limit is None:
            return "SW power cap: the board hit its power limit"
        lowered = (
            f", lowered from the default {default:.0f} W"
            if default is not None and limit < default - 1
            else ""
        )
        drawn = f" ({power:.0f} W drawn)" if power is not None else ""
        return f"SW power cap: the board hit its {limit:.0f} W limit{lowered}{drawn}"
    return {
        "hw_slowdown": "HW slowdown: the board cut the clocks (heat, power brake or a power spike)",
        "sw_thermal_slowdown": f"SW thermal slowdown{heat}",
        "hw_thermal_slowdown": f"HW thermal slowdown{heat}",
        "hw_power_brake_slowdown": "HW power brake: the system's power supply asserted it",
        "sync_boost": "sync boost: held to the clock of the slowest GPU of its group",
        "board_limit": "the board's own limit",
        "reliability": "a reliability (voltage) limit",
    }.get(reason.name, reason.name)


def _busy_after(series: GpuSeries, last: int) -> bool:
    """Busy samples came after the stretch: the slowdown stopped while the load went on."""
    return any(series.column("throttled_busy").known[last + 1 :])


def _highest(series: GpuSeries, name: str, first: int, last: int) -> float | None:
    values = [v for v in series.column(name).high[first : last + 1] if v is not None]
    return max(values) if values else None


def _lowest(series: GpuSeries, name: str, first: int, last: int) -> float | None:
    values = [v for v in series.column(name).low[first : last + 1] if v is not None]
    return min(values) if values else None


def _rounded(value: float | None) -> int | None:
    return None if value is None else round(value)
