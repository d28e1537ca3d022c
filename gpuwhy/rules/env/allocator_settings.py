"""env.allocator-settings: GPU memory settings that TensorFlow rejects or ignores."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule

# gpu_bfc_allocator.cc GetAllowGrowthValue: exactly "true" or "false", case-sensitive.
ALLOW_GROWTH_VALUES = ("true", "false")
# gpu_process_state.cc GetGPUAllocator: exact matches; anything else silently means BFC.
ALLOCATORS = ("cuda_malloc", "cuda_malloc_async", "memory_guard")


class AllocatorSettings(Rule):
    """A GPU memory setting in the environment that TensorFlow rejects or silently ignores.

    ## What it detects
    `TF_FORCE_GPU_ALLOW_GROWTH` set to anything but the exact strings `true` or `false`
    (TF logs an error and keeps the default: `1` and `True` do nothing), an unknown
    `TF_GPU_ALLOCATOR` (silently ignored: the default BFC allocator is used), and
    `TF_FORCE_GPU_ALLOW_GROWTH=true` together with `TF_GPU_ALLOCATOR=cuda_malloc` or
    `cuda_malloc_async`, where growth no longer applies because the BFC allocator it
    configures is not used.

    ## Why is this slow?
    The user believes memory grows on demand or comes from the async allocator; in fact
    TensorFlow maps nearly all free GPU memory at start. A second process on the same
    GPU then runs out of memory, and fragmentation-bound models keep the allocator they
    meant to leave. Nothing says so except one log line at start-up.

    ## Example
    ```console
    $ export TF_FORCE_GPU_ALLOW_GROWTH=1      # rejected: "could not be parsed"
    $ export TF_GPU_ALLOCATOR=cuda_async      # ignored: not a known allocator
    ```

    Use instead:
    ```console
    $ export TF_FORCE_GPU_ALLOW_GROWTH=true
    $ export TF_GPU_ALLOCATOR=cuda_malloc_async
    ```

    ## Options
    None.
    """

    id = "env.allocator-settings"
    severity = "low"
    status = "stable"
    needs = ("environment",)
    options = {}
    question = "Why does TensorFlow take all GPU memory?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        env_vars = facts.environment.env_vars if facts.environment else {}
        growth = env_vars.get("TF_FORCE_GPU_ALLOW_GROWTH")
        allocator = env_vars.get("TF_GPU_ALLOCATOR")
        problems: list[tuple[str, str, str, str]] = []
        if growth is not None and growth not in ALLOW_GROWTH_VALUES:
            fixed = "true" if growth.strip().lower() in ("1", "true", "yes", "on") else "false"
            problems.append(
                (
                    "TF_FORCE_GPU_ALLOW_GROWTH",
                    f"TF_FORCE_GPU_ALLOW_GROWTH={growth!r} is rejected by TensorFlow",
                    'only the exact strings "true" and "false" are accepted; '
                    "the default (no growth) is used",
                    f"export TF_FORCE_GPU_ALLOW_GROWTH={fixed}",
                )
            )
        if allocator is not None and allocator not in ALLOCATORS:
            problems.append(
                (
                    "TF_GPU_ALLOCATOR",
                    f"TF_GPU_ALLOCATOR={allocator!r} is silently ignored",
                    f"known values: {', '.join(ALLOCATORS)}; the default BFC allocator is used",
                    "export TF_GPU_ALLOCATOR=cuda_malloc_async",
                )
            )
        if growth == "true" and allocator in ("cuda_malloc", "cuda_malloc_async"):
            problems.append(
                (
                    "TF_FORCE_GPU_ALLOW_GROWTH",
                    "TF_FORCE_GPU_ALLOW_GROWTH=true has no effect with "
                    f"TF_GPU_ALLOCATOR={allocator}",
                    "growth configures the BFC allocator, which this allocator replaces",
                    "unset TF_FORCE_GPU_ALLOW_GROWTH   # cuda_malloc_async already "
                    "allocates on demand",
                )
            )
        return [
            self.finding(
                title, evidence={"variable": var, "value": env_vars[var], "why": why}, fix=fix
            )
            for var, title, why, fix in problems
        ]
