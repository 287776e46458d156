"""Native kernels of the fast sampler, compiled on first use for this machine (torch's C++ extension builder;
a C++ compiler and ninja needed) and cached per source, torch version, flags and CPU under $RLVR_CACHE/native
(~/.cache/rlvr/native; $RLVR_NATIVE_CACHE moves it alone).

Only where a fused kernel replaces several small torch ops and keeps the numerics (float32 arithmetic over bf16 or
float32 inputs, one rounding to the compute dtype, or the trainer's roundings where it rounds more): `decode_ops()`
holds one decode step's cascade attention for a layer (in a sliding window where the layer has one), RMSNorm, RoPE of
q and k (alone, or after a per-head RMSNorm of each: Qwen3's and Gemma 3's q/k norms), silu(gate) * up and
gelu_tanh(gate) * up (decode.cpp), each in bf16 or float32, and float32's weight
matmul for a decode step's few rows on weights packed in panels (`panel_linear`, where AVX2 and FMA are);
`deltanet_ops()` holds the decode step of Qwen3.5's linear-attention layers: the gated delta rule's (float32, its
state read once and updated in place) and a layer's whole token mixer around it in one call (deltanet.cpp). Where the
build fails (no compiler, say) the sampler keeps its torch path (oneDNN's packed weights for the matmuls), with one
warning saying why; RLVR_NATIVE=0 turns the kernels off.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import platform
import shutil
import warnings
from contextlib import contextmanager
from functools import cache
from pathlib import Path

HERE = Path(__file__).resolve().parent


def _cpu_key() -> str:
    """What -march=native compiles for: the CPU's model and feature flags (a cached build must not move to
    another CPU)."""
    try:
        info = Path("/proc/cpuinfo").read_text()
        lines = [ln for ln in info.splitlines() if ln.startswith(("flags", "model name"))][:2]
        return "\n".join(lines)
    except OSError:
        return platform.processor() or platform.machine()


CFLAGS = ["-O3", "-march=native", "-fno-math-errno", "-fopenmp"]  # at::parallel_for runs serially without OpenMP


def _build_dir(source: Path) -> tuple[str, Path]:
    import torch

    key = hashlib.sha256(
        source.read_bytes() + torch.__version__.encode() + _cpu_key().encode() + " ".join(CFLAGS).encode()
    ).hexdigest()[:12]
    from rlvr.policy.load import cache_dir

    root = Path(os.environ.get("RLVR_NATIVE_CACHE", "") or cache_dir() / "native")  # beside the converted models
    folder = root / f"{source.stem}-{key}"
    folder.mkdir(parents=True, exist_ok=True)
    return f"rlvr_{source.stem}_{key}", folder


@contextmanager
def _exclusive(folder: Path):
    """One build per cache folder at a time, under a lock the kernel releases when its holder dies. torch's own
    build lock (a `lock` file it deletes when done) outlives a process killed mid-build, and every later run would
    wait for it forever; under this lock no other rlvr build is running, so a `lock` file left there is stale."""
    with open(folder / "rlvr.flock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            (folder / "lock").unlink(missing_ok=True)
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


@cache
def _load(stem: str):
    if os.environ.get("RLVR_NATIVE", "1") == "0":
        return None
    source = HERE / f"{stem}.cpp"
    try:
        from torch.utils.cpp_extension import load

        name, folder = _build_dir(source)
        with _exclusive(folder):
            # built from a copy inside its own folder: torch's build file names the source's path, so two checkouts
            # of the same source (a worktree, a clean clone) would otherwise rebuild it each time they alternate
            local = folder / source.name
            if not local.exists() or local.read_bytes() != source.read_bytes():
                shutil.copyfile(source, local)
            return load(
                name=name,
                sources=[str(local)],
                build_directory=str(folder),
                verbose=False,
                extra_cflags=CFLAGS,
                extra_ldflags=["-fopenmp"],
            )
    except Exception as e:  # noqa: BLE001  (any build failure: keep the torch path)
        warnings.warn(
            f"rlvr's native {stem} kernel could not be built ({type(e).__name__}: {str(e)[-300:]}); the "
            "fast sampler uses its torch path (set RLVR_NATIVE=0 to skip the build)",
            RuntimeWarning,
            stacklevel=3,
        )
        return None


def decode_ops():
    """The compiled module (decode_attend, rms_norm, rope, head_norm_rope, silu_mul, gelu_tanh_mul, panel_linear), or None
    where it cannot be built."""
    return _load("decode")


def deltanet_ops():
    """The compiled module (recurrent_step: rlvr.sampling.deltanet's, fused; delta_step: a delta-net layer's decode
    step from its input projection to its gated norm), or None where it cannot be built."""
    return _load("deltanet")


__all__ = ["decode_ops", "deltanet_ops"]
