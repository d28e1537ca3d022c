"""env.ptx-jit: the GPU runs this build only through PTX just-in-time compilation."""

from __future__ import annotations

from typing import Any

from gpuwhy.facts import Facts
from gpuwhy.finding import Finding
from gpuwhy.rules.base import Rule
from gpuwhy.rules.env.cuda_compat import arch_support, driver_supports


class PtxJit(Rule):
    """The build has no machine code for this GPU; the driver JIT-compiles PTX at start.

    ## What it detects
    A GPU whose compute capability has no matching cubin among the build's
    `cuda_compute_capabilities` (`sm_XY` or `compute_XY` of the same major, minor not
    above the GPU's; in TF builds `compute_XY` carries SASS as well as PTX), only the PTX
    of an older architecture's `compute_XY`; or TensorFlow itself logs that it "was not
    built with CUDA kernel binaries compatible with compute capability X.Y". TensorFlow uses it, but every kernel is
    compiled by the driver on first use. High when the driver only supports the build's
    CUDA major through minor-version compatibility, where PTX JIT of newer PTX fails.

    ## Why is this slow?
    TensorFlow has thousands of kernels; the driver compiles each one the first time it
    runs, which can take many minutes at start-up ("the first epoch is stuck"), and the
    result is cached in `~/.nv/ComputeCache`, whose default size is too small to hold
    TensorFlow's kernels, so the cost comes back on the next run. PTX compiled for an
    older architecture also misses the newer GPU's instructions.

    ## Example
    ```console
    $ python -c "import tensorflow as tf; print(tf.sysconfig.get_build_info()['cuda_compute_capabilities'])"
    ['sm_60', 'sm_70', 'sm_80', 'sm_89', 'compute_90']      # on a compute capability 10.0 GPU
    ```

    Use instead:
    ```console
    $ pip install --upgrade "tensorflow[and-cuda]"    # a build with sm_100 code, when one exists
    $ export CUDA_CACHE_MAXSIZE=4294967296            # meanwhile: keep the JIT results (4 GiB)
    ```

    ## Options
    None.
    """

    id = "env.ptx-jit"
    severity = "medium"
    status = "stable"
    needs = ("environment", "devices")
    options = {}
    question = "Why is the first step so slow?"

    def check(self, facts: Facts, options: dict[str, Any]) -> list[Finding]:
        env = facts.environment
        assert env is not None  # in `needs`: never run without it
        tf = env.tensorflow
        if tf is None:
            return []
        archs = (tf.build or {}).get("cuda_compute_capabilities")
        if not archs:
            return []
        findings = []
        logged = [ln for ln in tf.log_lines if "not built with CUDA kernel binaries" in ln]
        for dev in facts.devices or ():
            if not dev.compute_capability:
                continue
            kind, arch = arch_support(dev.compute_capability, archs)
            if kind != "ptx" and not any(
                f"capability {dev.compute_capability}" in ln for ln in logged
            ):
                continue
            compat = driver_supports(
                env.driver.cuda_driver_version if env.driver else None, tf.build.get("cuda_version")
            )
            severity = "high" if compat == "minor-compat" else self.severity
            findings.append(
                self.finding(
                    f"GPU {dev.index} ({dev.name}, compute capability {dev.compute_capability}) "
                    f"runs TensorFlow's kernels only via PTX JIT from {arch}",
                    severity=severity,
                    evidence={
                        "gpu": dev.index,
                        "compute_capability": dev.compute_capability,
                        "build_archs": list(archs),
                        "ptx_used": arch,
                        "driver_cuda": env.driver.cuda_driver_version if env.driver else None,
                        "cuda_cache_maxsize": env.env_vars.get("CUDA_CACHE_MAXSIZE"),
                        "tensorflow_log": logged[:1],
                    },
                    fix='pip install --upgrade "tensorflow[and-cuda]"   # a build with native code\n'
                    "export CUDA_CACHE_MAXSIZE=4294967296            # keep JIT results between runs",
                    estimated_gain="minutes of start-up per run",
                )
            )
        return findings
