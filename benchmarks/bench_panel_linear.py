"""The float32 sampler's weight matmuls, layer by layer: rlvr's panel kernel (rlvr.sampling.native's panel_linear, on
weights packed in panels of 16 columns) against oneDNN's pre-packed inner product (what the sampler used before) and
F.linear (MKL), at the rows a decode step has and at a prefill's, on the default model's shapes.

Each cell is the median of --reps calls, in ms, with the weights' read rate in GB/s beside it (the layer's float32
bytes over the time: the memory's rate is the ceiling at few rows, the matmul probe's past a few dozen). The whole
step's figures (the linear floor, decode against its roofline) are bench_decode_floor.py's. Prints figures; asserts
nothing.

Usage: PYTHONPATH=src:benchmarks python benchmarks/bench_panel_linear.py [--rows 1,8,32,400] [--reps 30]
    [--threads N]
"""

import argparse
import os
from functools import partial

# (name, N out, K in) of the default model (SmolLM2-135M: hidden 576, 9 query heads and 3 key/value heads of 64,
# MLP 1,536, vocabulary 49,152), as the sampler fuses them
LAYERS = 30
SHAPES = [("q|k|v", 960, 576), ("o", 576, 576), ("gate|up", 3072, 576), ("down", 576, 1536), ("head", 49152, 576)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", default="1,4,8,16,32,64,400", help="comma-separated row counts")
    parser.add_argument("--reps", type=int, default=30)
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()

    import torch
    import torch.nn.functional as F

    from rlvr.sampling import llama
    from rlvr.sampling.native import decode_ops
    from rlvr_bench.parent import median_ms

    torch.set_num_threads(args.threads)
    kernels = decode_ops()
    if kernels is None or not kernels.panel_linear_available():
        raise SystemExit("the panel kernel is not available here (no compiler, or no AVX2 and FMA)")
    sides = {
        "panel": llama.packed_linear(torch.float32, 32, kernels),
        "oneDNN": llama.packed_linear(torch.float32, 32),
        "F.linear": ((lambda w: w), F.linear),
    }
    rows = [int(r) for r in args.rows.split(",")]
    print(f"{args.threads} threads; float32; median of {args.reps} calls; ms (GB/s of weights read)")
    print(f"{'layer':>8} {'rows':>5} " + " ".join(f"{s:>16}" for s in sides) + f" {'panel / oneDNN':>15}")
    step = {(s, m): 0.0 for s in sides for m in rows}  # 30 layers of the first four shapes, then the head once
    for name, N, K in SHAPES:
        w = torch.randn(N, K) / K**0.5
        packed = {s: pack(w) for s, (pack, _) in sides.items()}
        for m in rows:
            x = torch.randn(m, K)
            ms = {s: median_ms(partial(linear, x, packed[s]), args.reps) for s, (_, linear) in sides.items()}
            for s in sides:
                step[s, m] += ms[s] * (1 if name == "head" else LAYERS)
            cells = " ".join(f"{ms[s]:>8.2f} ({N * K * 4 / ms[s] / 1e6:>5.1f})" for s in sides)
            print(f"{name:>8} {m:>5} {cells} {ms['panel'] / ms['oneDNN']:>15.2f}")
    print(f"\na step's weight matmuls ({LAYERS} layers and the head), ms:")
    for m in rows:
        print(f"  {m:>4} rows: " + ", ".join(f"{s} {step[s, m]:.1f}" for s in sides))


if __name__ == "__main__":
    main()
