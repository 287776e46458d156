"""What this machine computes natively, read once from the CPU's flags (no torch import: config resolution stays fast).

bf16 matmuls are fast only where the CPU has them in hardware: x86's AVX512-BF16 or AMX-BF16, Arm's BF16 extension.
Elsewhere (an AVX2-only x86, say) torch emulates them, 27-57 times slower than float32 at the default model's
matmuls on one such CPU (docs/performance.md), so `auto` in rollout.dtype and train.autocast picks by this.
"""

from __future__ import annotations

import os
from functools import cache
from pathlib import Path

# x86 flags ("flags" lines) and Arm features ("Features" lines) that mean bf16 arithmetic in hardware
BF16_FLAGS = frozenset({"avx512_bf16", "amx_bf16", "bf16"})


def cpu_flags(cpuinfo: str) -> frozenset[str]:
    """The feature flags of a /proc/cpuinfo text (its first `flags` or `Features` line)."""
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            return frozenset(value.split())
    return frozenset()


@cache
def native_bf16() -> bool:
    """Whether this CPU computes bf16 in hardware. $RLVR_NATIVE_BF16=0/1 overrides (a machine whose /proc/cpuinfo
    does not say, or a test); a CPU that cannot be read counts as native, the choice rlvr made before it looked."""
    forced = os.environ.get("RLVR_NATIVE_BF16", "")
    if forced in ("0", "1"):
        return forced == "1"
    try:
        flags = cpu_flags(Path("/proc/cpuinfo").read_text())
    except OSError:
        return True
    return bool(flags & BF16_FLAGS) if flags else True


def auto_dtype(value: str, otherwise: str) -> str:
    """`value` with "auto" made concrete: "bfloat16" where this CPU computes it natively, else `otherwise` ("float32"
    for sampling, "none" for autocast)."""
    if value != "auto":
        return value
    return "bfloat16" if native_bf16() else otherwise


def auto_dtypes(cfg: dict) -> dict:
    """cfg with `auto` in rollout.dtype and train.autocast made concrete for this machine (auto_dtype), so the run
    directory's config.yaml records what ran."""
    if "dtype" in cfg.get("rollout", {}):
        cfg["rollout"]["dtype"] = auto_dtype(cfg["rollout"]["dtype"], "float32")
    if "autocast" in cfg.get("train", {}):
        cfg["train"]["autocast"] = auto_dtype(cfg["train"]["autocast"], "none")
    return cfg


def emulates_bf16(dtype: str, on_cpu: bool) -> bool:
    """Whether computing in `dtype` (a resolved rollout.dtype or train.autocast) on the CPU (`on_cpu`: not on a GPU,
    which has its own bf16) is torch's emulation of bf16: the one rule the start-up warnings and a run's record
    (RUN/contention.json's emulated_bf16) follow."""
    return dtype == "bfloat16" and on_cpu and not native_bf16()


EMULATED_BF16 = (
    "{what}=bfloat16 on a CPU without bf16 in hardware (no avx512_bf16 or amx_bf16 in its flags): torch emulates it, "
    "tens of times slower than float32 (benchmarks/bf16_matmul.py); `{what}=auto` picks float32 on such a machine"
)


__all__ = ["BF16_FLAGS", "EMULATED_BF16", "cpu_flags", "native_bf16", "auto_dtype", "auto_dtypes", "emulates_bf16"]
