"""Does this CPU compute bf16 in hardware? bf16 against float32 matmuls at the default model's shapes, interleaved.

    python benchmarks/bf16_matmul.py [--threads N] [--reps R]

Prints GFLOP/s of each dtype and the time ratio per shape, and what `auto` (rollout.dtype, train.autocast) picks
here (rlvr.machine). On a CPU with AVX512-BF16 or AMX bf16 is the faster one; on an AVX2-only CPU torch emulates it.
"""

from __future__ import annotations

import argparse
import time

import torch

from rlvr.machine import auto_dtype, native_bf16

# (rows, in, out): a micro-batch through an MLP projection, a longer one, and a decode step's output head
SHAPES = [(64, 576, 1536), (512, 576, 1536), (8, 576, 49152)]


def seconds(a: torch.Tensor, b: torch.Tensor, n: int) -> float:
    a @ b  # warm
    t0 = time.perf_counter()
    for _ in range(n):
        a @ b
    return (time.perf_counter() - t0) / n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=torch.get_num_threads())
    ap.add_argument("--reps", type=int, default=5, help="interleaved rounds; the fastest of each dtype is kept")
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    print(f"threads {args.threads}; bf16 in hardware: {native_bf16()}; auto -> {auto_dtype('auto', 'float32')}")
    for m, k, n in SHAPES:
        best = {torch.float32: float("inf"), torch.bfloat16: float("inf")}
        for _ in range(args.reps):  # interleaved, so a busy moment costs both dtypes alike
            for dt in best:
                a, b = torch.randn(m, k, dtype=dt), torch.randn(k, n, dtype=dt)
                best[dt] = min(best[dt], seconds(a, b, 5))
        flop = 2 * m * k * n
        f32, bf16 = best[torch.float32], best[torch.bfloat16]
        print(
            f"{m}x{k}x{n}: float32 {flop / f32 / 1e9:.1f} GFLOP/s, bf16 {flop / bf16 / 1e9:.1f} GFLOP/s, "
            f"bf16 time / float32 time {bf16 / f32:.2f}"
        )


if __name__ == "__main__":
    main()
