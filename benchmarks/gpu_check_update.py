"""The policy update with every collective through a real process group, against the single-process update.

    RLVR_DIST_BACKEND=nccl python -m torch.distributed.run --standalone --nproc_per_node 1 \\
        benchmarks/gpu_check_update.py

One GPU cannot hold two NCCL ranks (NCCL refuses two ranks on one device), so the two-rank equality stays with the
gloo tests (tests/test_distributed.py, tests/test_engines_torchrun.py). Here a group of one (RLVR_DIST_BACKEND set
under a launcher: rlvr.training.distributed.setup) takes the same eight update cases through the group: the
loss normalisers' all-reduce, the gradient sum (CPU gradients to the GPU and back under NCCL), the clipping norm.
Each must give the single-process loss, gradient norm and weights to the tests' tolerances (loss 1e-6, gradient
norm 1e-5 relative, weights 1e-6 + 1e-5 relative). Prints one JSON line; exit 1 when a case disagrees or no
all-reduce went through the group. Run by benchmarks/gpu_check.sh; tests/test_distributed_backend.py runs it on gloo.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from rlvr.training import distributed  # noqa: E402
from test_distributed import CASES, run_case  # noqa: E402  (the cases and the update the tests compare)


def count_all_reduces() -> list[int]:
    """Count dist.all_reduce calls from here on (rlvr.training.comm calls it through the module)."""
    calls, real = [0], dist.all_reduce

    def counted(*args, **kwargs):
        calls[0] += 1
        return real(*args, **kwargs)

    dist.all_reduce = counted
    return calls


def main() -> int:
    torch.set_num_threads(1)
    comm = distributed.setup()
    if not comm.grouped:
        print(json.dumps({"ok": False, "why": "no process group: run it under torchrun with RLVR_DIST_BACKEND set"}))
        return 1
    calls = count_all_reduces()
    gaps = {"loss_gap": 0.0, "grad_norm_gap": 0.0, "weight_gap": 0.0}
    ok = True
    for case in CASES:
        ref_stats, ref_weights = run_case(case)
        stats, weights = run_case(case, comm)
        loss, norm = abs(stats["loss"] - ref_stats["loss"]), abs(stats["grad_norm"] - ref_stats["grad_norm"])
        ok &= loss <= 1e-6 and norm <= 1e-5 * abs(ref_stats["grad_norm"])
        gaps["loss_gap"], gaps["grad_norm_gap"] = max(gaps["loss_gap"], loss), max(gaps["grad_norm_gap"], norm)
        for name, w in ref_weights.items():
            gap = (weights[name] - w).abs()
            ok &= bool((gap <= 1e-6 + 1e-5 * w.abs()).all())
            gaps["weight_gap"] = max(gaps["weight_gap"], float(gap.max()))
    result = {"backend": dist.get_backend(), "world": comm.world, "cases": len(CASES), "all_reduces": calls[0]}
    result.update(gaps, ok=ok and calls[0] > 0)
    print(json.dumps(result))
    comm.close()
    return 0 if result["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
