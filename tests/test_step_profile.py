"""benchmarks/step_profile.py's bookkeeping from known inputs: oneDNN's log lines are counted against the step each
came before, and the step table's shares are the hand-computed ones (the figures of docs/performance.md's AMX
section come from these functions)."""

import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("step_profile", ROOT / "benchmarks" / "step_profile.py")
step_profile = importlib.util.module_from_spec(spec)
spec.loader.exec_module(step_profile)

AMX = "brg_matmul:avx10_1_512_amx"


def miss(kernel: str, ms: float) -> str:
    return (
        f"onednn_verbose,v1,primitive,create:cache_miss,cpu,matmul,{kernel},undef,src:bf16::blocked:ab::f0 "
        f"wei:bf16::blocked:ba::f0 dst:bf16::blocked:ab::f0,attr-scratchpad:user,,416x576:576x576,{ms}"
    )


def hit(ms: float) -> str:
    return f"onednn_verbose,v1,primitive,create:cache_hit,cpu,matmul,{AMX},undef,src:bf16,,8x576:576x576,{ms}"


def test_builds_are_counted_against_the_record_they_precede():
    rows = [{"kind": "ready"}, {"kind": "step", "step": 0}, {"kind": "step", "step": 1}]
    lines = [
        "onednn_verbose,v1,info,oneDNN v3.10.2",
        step_profile.MARK + json.dumps(rows[0]),
        miss(AMX, 0.75),
        miss(AMX, 0.25),
        hit(0.004),  # a cache hit builds nothing
        miss("jit:uni", 1.5),
        step_profile.MARK + json.dumps(rows[1]),
        miss(AMX, 0.5),
        step_profile.MARK + json.dumps(rows[2]),
        miss(AMX, 9.0),  # after the last record: belongs to none
    ]
    out = step_profile._with_onednn_builds([dict(r) for r in rows], lines)
    assert "onednn_builds" not in out[0]
    assert out[1]["onednn_builds"] == 3
    assert out[1]["onednn_build_ms"] == 2.5
    assert out[1]["onednn_kernels"] == {AMX: 2, "jit:uni": 1}
    assert out[2]["onednn_builds"] == 1 and out[2]["onednn_build_ms"] == 0.5


def test_step_table_shares_by_hand():
    params = 100_000_000
    ready = {"kind": "ready", "autocast": "bfloat16"}
    step = {"kind": "step", "params": params, "wall": 10.0, "generate": 4.0, "train": 5.0, "verify": 0.5, "other": 0.5}
    steps = {
        "base": [
            ready,
            {**step, "warmup": True, "wall": 20.0},  # left out of the means
            {**step, "warmup": False, "gen_tokens": 4000, "fwd_tokens": 6000, "onednn_builds": 70},
            {**step, "warmup": False, "gen_tokens": 2000, "fwd_tokens": 4000, "onednn_builds": 30, "train": 5.0},
        ]
    }
    probes = [
        {"shape": "2048x2048x2048", "what": "probe", "dtype": "bfloat16", "gflops": 1000.0},
        {"shape": "2048x2048x2048", "what": "probe", "dtype": "float32", "gflops": 250.0},
    ]
    table = step_profile.step_table(steps, probes)
    row = next(ln for ln in table.splitlines() if ln.startswith("| base |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    # means: wall 10, generate 4, train 5, gen tokens 3000, forward tokens 5000, builds 50
    assert cells[1:7] == ["10.00", "4.00", "5.00", "0.50", "0.50", "750"]  # gen tok/s = 3000 / 4
    assert cells[7] == "600" and cells[8] == "1000"  # completion and forward tokens per update second
    # 4 N FLOP a forward token: 4e8 x 1000 tok/s = 400 GFLOP/s of a 1000 GFLOP/s bf16 probe
    assert cells[9] == "40.0"
    assert cells[10] == "50"
    assert "warm-up" in table and "20.00 s" in table
    # without autocast the ceiling is the float32 probe: 400 / 250
    ready["autocast"] = "none"
    row = next(ln for ln in step_profile.step_table(steps, probes).splitlines() if ln.startswith("| base |"))
    assert row.split("|")[10].strip() == "160.0"


def test_matmul_classes_by_hand():
    """Two base calls of 4 x 8 x 2 (128 FLOP each) in 2 us, a head call of 1 x 2 x 50 (vocabulary 50: 200 FLOP) in
    1 us, LoRA calls with the rank 3 as any dimension; other operators and batched shapes are left out. At a float32
    probe of 0.0001 GFLOP/s (100 kFLOP/s) the base's 128 MFLOP/s is 128,000% of it."""
    events = [
        ("aten::mm", [[4, 8], [8, 2]], 2, 2.0),
        ("aten::mm", [[1, 2], [2, 50]], 1, 1.0),
        ("aten::mm", [[4, 3], [3, 8]], 1, 1.0),
        ("aten::mm", [[3, 4], [4, 8]], 2, 1.0),
        ("aten::bmm", [[2, 4, 8], [2, 8, 2]], 9, 9.0),
        ("aten::mm", [[2, 4, 8]], 1, 9.0),
    ]
    classes = step_profile.matmul_classes(events, rank=3, vocab=50)
    assert classes == [
        {"class": "base", "flop": 256.0, "seconds": 2e-6, "calls": 2},
        {"class": "head", "flop": 200.0, "seconds": 1e-6, "calls": 1},
        {"class": "lora", "flop": 192.0 + 384.0, "seconds": 2e-6, "calls": 3},
    ]
    probes = [
        {"what": "probe", "dtype": "float32", "gflops": 1e-4},
        {"what": "probe", "dtype": "bfloat16", "gflops": 1.0},
    ]
    ops = [{"kind": "ready", "autocast": "none"}, {"kind": "ops", "classes": classes}]
    table = step_profile.matmul_class_table(ops, probes)
    assert "% of the float32 probe" in table and "| base | 0.000 | 0.00 | 2 | 0 | 128000% |" in table
    ops[0]["autocast"] = "bfloat16"  # the update's dtype picks the probe: 0.128 of 1 GFLOP/s
    assert "| base | 0.000 | 0.00 | 2 | 0 | 13% |" in step_profile.matmul_class_table(ops, probes)
