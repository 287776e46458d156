"""The native decode-attention kernel against the cascade cache's torch path (two flash calls merged through their
log-sum-exps) on the same random caches, in bf16 and in float32: the same attention up to the dtype's rounding, with
every row alive, after rows left the batch (uncompacted and compacted slots), across a cache block boundary, and with
prompts of different lengths. Skipped where the kernel cannot be built here (no compiler); the sampler then keeps the torch
path, which the other sampler tests cover."""

import os

import pytest
import torch

from rlvr.sampling import native
from rlvr.sampling.cascade import BLOCK, CascadeCache

kernel = native.decode_ops()
pytestmark = pytest.mark.skipif(kernel is None, reason="the native kernel cannot be built on this machine")
dtypes = pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])
# the kernel against torch's flash path: bf16 outputs differ by a rounding or two of bf16; float32 ones only by the
# order of float32 sums
TOL = {torch.bfloat16: 2e-2, torch.float32: 2e-5}


def twin_caches(P, G, n_kv, D, lens, dtype, layers=2, seed=0, windows=None):
    g = torch.Generator().manual_seed(seed)
    a = CascadeCache(layers, P, G, n_kv, D, lens, dtype, kernel=kernel, windows=windows)
    b = CascadeCache(layers, P, G, n_kv, D, lens, dtype, kernel=None, windows=windows)
    assert a.kernel is not None and b.kernel is None
    for name in ("pk", "pv"):
        x = torch.randn(getattr(a, name).shape, generator=g).to(dtype)
        for L, p in zip(lens, range(P)):
            x[:, p, :, L:] = 7.0  # padding past a prompt's end must be ignored by both
        getattr(a, name).copy_(x)
        getattr(b, name).copy_(x)
    return a, b, g


def step_both(a, b, g, t, rep, D, layers=2):
    a.begin_step(t)
    b.begin_step(t)
    n = a.n_active
    for i in range(layers):
        # q, k, v as the forward makes them: views into one wider tensor (non-contiguous heads)
        wide = torch.randn(n, a.pk.shape[2] * (rep + 2), D, generator=g).to(a.dtype)
        Hkv = a.pk.shape[2]
        q = wide[:, : Hkv * rep].view(n, Hkv, rep, D) * 0.125
        k, v = wide[:, Hkv * rep : Hkv * (rep + 1)], wide[:, Hkv * (rep + 1) :]
        got, want = a.attend(i, q, k, v), b.attend(i, q, k, v)
        assert got.shape == want.shape == (n, Hkv * rep * D) and got.dtype == a.dtype
        torch.testing.assert_close(got.float(), want.float(), atol=TOL[a.dtype], rtol=TOL[a.dtype])
        # the kernel wrote the same new keys and values into the generated cache
        assert torch.equal(a.gk[i][a.slots, :, t], b.gk[i][b.slots, :, t])
        assert torch.equal(a.gv[i][a.slots, :, t], b.gv[i][b.slots, :, t])


@dtypes
def test_every_row_alive_prompts_of_different_lengths(dtype):
    a, b, g = twin_caches(P=3, G=4, n_kv=3, D=64, lens=[5, 17, 11], dtype=dtype)
    for t in range(6):
        step_both(a, b, g, t, rep=3, D=64)


@dtypes
def test_rows_leaving_compaction_and_a_new_block(dtype):
    a, b, g = twin_caches(P=2, G=8, n_kv=2, D=32, lens=[9, 4], dtype=dtype, seed=1)
    keep = torch.ones(16, dtype=torch.bool)
    for t in range(BLOCK + 3):
        if t in (3, 20):  # rows leave: first uncompacted (over 3/4 of the slots live), then compacted
            keep = torch.ones(a.n_active, dtype=torch.bool)
            keep[torch.randperm(a.n_active, generator=g)[: 2 if t == 3 else 6]] = False
            a.keep(keep)
            b.keep(keep)
            assert torch.equal(a.rows, b.rows) and torch.equal(a.slots, b.slots)
        step_both(a, b, g, t, rep=2, D=32)
    assert a.n_slots < 16 and a.gk.shape[3] == 2 * BLOCK


@dtypes
def test_a_sliding_window_on_one_layer(dtype):
    """Gemma 3's sliding layers: a window of 6 on layer 0 (layer 1 global), prompts shorter and longer than it, rows
    leaving; the window leaves a prompt partly, then whole (from step 5 on), and, with head_dim 256, Gemma's own."""
    a, b, g = twin_caches(P=3, G=2, n_kv=1, D=256, lens=[3, 9, 6], dtype=dtype, seed=2, windows=[6, None])
    keep = torch.ones(6, dtype=torch.bool)
    for t in range(12):
        if t == 4:
            keep[1] = False
            a.keep(keep), b.keep(keep)
        step_both(a, b, g, t, rep=4, D=256)


@pytest.mark.parametrize("native", [True, False], ids=["native", "torch"])
def test_a_window_by_hand(native):
    """One prompt key (value 1), then generated keys of values 3, 5, 7, every score 0: a window of 2 averages the last
    two values a step sees (2, then 4, then 6); without one, all of them (2, 3, 4)."""
    outs = {}
    for window in (2, None):
        a = CascadeCache(1, 1, 1, 1, 2, [1], torch.float32, kernel=kernel if native else None, windows=[window])
        a.pv.fill_(1.0)
        outs[window] = []
        for t in range(3):
            a.begin_step(t)
            v = torch.full((1, 1, 2), 3.0 + 2 * t)
            outs[window].append(a.attend(0, torch.zeros(1, 1, 1, 2), torch.zeros(1, 1, 2), v)[0, 0].item())
    assert outs == {2: [2.0, 4.0, 6.0], None: [2.0, 3.0, 4.0]}


@dtypes
def test_one_query_attends_exactly_by_hand(dtype):
    # one prompt token (key 0, value 1) and the generated key (key 0, value 3): equal scores -> mean value 2
    a = CascadeCache(1, 1, 1, 1, 2, [1], dtype, kernel=kernel)
    a.pv.fill_(1.0)
    a.begin_step(0)
    q = torch.zeros(1, 1, 1, 2, dtype=dtype)
    out = a.attend(0, q, torch.zeros(1, 1, 2, dtype=dtype), torch.full((1, 1, 2), 3.0, dtype=dtype))
    assert out.dtype == dtype and out.tolist() == [[2.0, 2.0]]


def test_a_long_head_softmax_by_hand_in_float32():
    """One query over 40 keys (past the vector exp's 8 or 16 lanes and its scalar tail): scores 0.1 j, values j,
    so the output is sum j e^(0.1 j) / sum e^(0.1 j), worked in float64 here; the vector exp is about 1 ulp."""
    import math

    D, L = 8, 39  # 39 prompt keys and the generated one
    a = CascadeCache(1, 1, 1, 1, D, [L], torch.float32, kernel=kernel)
    keys = torch.zeros(L + 1, D)
    keys[:, 0] = torch.arange(L + 1) * 0.1  # q = e_0, so score j = 0.1 j
    values = torch.arange(L + 1, dtype=torch.float32)[:, None].repeat(1, D)
    a.pk[0, 0, 0], a.pv[0, 0, 0] = keys[:L], values[:L]
    a.begin_step(0)
    q = torch.zeros(1, 1, 1, D)
    q[..., 0] = 1.0
    out = a.attend(0, q, keys[L:].view(1, 1, D), values[L:].reshape(1, 1, D))
    w = [math.exp(0.1 * j) for j in range(L + 1)]
    want = sum(j * x for j, x in enumerate(w)) / sum(w)
    assert out.shape == (1, D) and max(abs(v - want) for v in out[0].tolist()) < 4e-6 * want


def rope_inputs(g, heads: int, D: int, dtype):
    """5 rows of a qkv output with `heads` rotated heads and one more (v), and their rotations: radius 0.5, angle
    position x the usual inverse frequencies."""
    qkv = torch.randn(5, (heads + 1) * D, generator=g).to(dtype)
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    return qkv, torch.polar(torch.full((5, heads, D // 2), 0.5), torch.arange(5).float()[:, None, None] * inv)


def test_fused_small_ops_equal_the_torch_ops():
    """RMSNorm, RoPE and silu * up in bf16: float32 inside and one rounding, so each equals the torch path's result up
    to one bf16 rounding step (the torch path rounds silu(gate) before the multiply)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(3)
    x, weight = torch.randn(5, 96, generator=g) * 3, torch.rand(96, generator=g) + 0.5
    got = kernel.rms_norm(x, weight, 1e-5, True)
    want = F.rms_norm(x, (96,), weight, 1e-5)
    assert (
        got.dtype == torch.bfloat16
        and torch.equal(got, want.to(torch.bfloat16))
        or (got.float() - want).abs().max() <= 2**-7 * want.abs().max()
    )
    # RoPE on q|k heads of a wider qkv (the v columns after them are left alone), positions 0..4
    heads, D = 4, 16
    qkv, rot = rope_inputs(g, heads, D, torch.bfloat16)
    want = torch.view_as_real(torch.view_as_complex(qkv[:, : heads * D].float().view(5, heads, D // 2, 2)) * rot)
    got = kernel.rope(qkv, rot)
    assert got.shape == (5, heads, D)
    torch.testing.assert_close(got.float(), want.view(5, heads, D).to(torch.bfloat16).float(), atol=1e-2, rtol=1e-2)
    assert torch.equal(kernel.rope(qkv[:, : heads * D].contiguous(), rot), got)  # v columns never read
    gu = torch.randn(3, 2 * 40, generator=g).to(torch.bfloat16)
    gate, up = gu.float().chunk(2, dim=-1)
    exact = (F.silu(gate) * up).to(torch.bfloat16)
    assert (
        torch.equal(kernel.silu_mul(gu), exact)
        or (kernel.silu_mul(gu).float() - exact.float()).abs().max() <= 2**-7 * exact.float().abs().max()
    )
    # by hand: silu(0) * 5 = 0, silu(2) * 1 = 2 / (1 + e^-2) = 1.7616 -> bf16 1.7578125
    assert kernel.silu_mul(torch.tensor([[0.0, 2.0, 5.0, 1.0]], dtype=torch.bfloat16)).tolist() == [[0.0, 1.7578125]]


def test_fused_small_ops_in_float32_equal_the_torch_ops():
    """The same three ops in float32 (the sampler's dtype without bf16 hardware): torch's results up to float32
    rounding; silu's exp is the kernel's own vector polynomial (about 1 ulp), checked from -100 to 100, with a row
    width (45) that leaves a scalar tail after the 8- or 16-lane vectors."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(4)
    x, weight = torch.randn(5, 96, generator=g) * 3, torch.rand(96, generator=g) + 0.5
    got = kernel.rms_norm(x, weight, 1e-5, False)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, F.rms_norm(x, (96,), weight, 1e-5), atol=1e-6, rtol=1e-6)
    heads, D = 4, 16
    qkv, rot = rope_inputs(g, heads, D, torch.float32)
    want = torch.view_as_real(torch.view_as_complex(qkv[:, : heads * D].reshape(5, heads, D // 2, 2)) * rot)
    got = kernel.rope(qkv, rot)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want.view(5, heads, D), atol=1e-6, rtol=1e-6)
    gu = torch.randn(4, 2 * 45, generator=g) * 4
    gu[0, :45] = torch.linspace(-100, 100, 45)
    gate, up = gu.chunk(2, dim=-1)
    torch.testing.assert_close(kernel.silu_mul(gu), F.silu(gate) * up, atol=1e-6, rtol=1e-6)
    # by hand: silu(2) * 1 = 2 / (1 + e^-2) = 1.76159...
    assert kernel.silu_mul(torch.tensor([[0.0, 2.0, 5.0, 1.0]])).tolist() == [[0.0, pytest.approx(1.7615942, rel=1e-6)]]


@dtypes
def test_head_norm_rope_equals_the_torch_path(dtype):
    """Qwen3's per-head q/k RMSNorm and RoPE in one call: the torch path's result (rlvr.sampling.llama._normed_rope:
    normalised in float32, rounded to the dtype, times each head's own weight row, rotated) up to a rounding of the
    dtype; the v columns after the heads are never read. By hand, in float32: the head (3, 4) has mean square 12.5, so
    it normalises to (3, 4) / sqrt(12.5); times the weight (1, 2) and rotated by i: (-8, 3) / sqrt(12.5)."""
    from types import SimpleNamespace

    from rlvr.sampling import llama

    g = torch.Generator().manual_seed(5)
    heads, D = 6, 16
    qkv, rot = rope_inputs(g, heads, D, dtype)
    qkv, weight = (qkv.float() * 3).to(dtype), torch.rand(heads, D, generator=g) + 0.5
    torch_path = SimpleNamespace(fused=None, head_dim=D, eps=1e-6, dtype=dtype, qk_round_last=False)
    want = llama._normed_rope(torch_path, qkv, weight, rot, heads * D)
    got = kernel.head_norm_rope(qkv, weight, rot, 1e-6)
    assert got.dtype == dtype and got.shape == want.shape == (5, heads, D)
    tol = 1e-2 if dtype == torch.bfloat16 else 1e-5
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
    assert torch.equal(kernel.head_norm_rope(qkv[:, : heads * D].contiguous(), weight, rot, 1e-6), got)
    by_hand = kernel.head_norm_rope(torch.tensor([[3.0, 4.0]]), torch.tensor([[1.0, 2.0]]), torch.tensor([[[1j]]]), 0.0)
    assert by_hand.view(2).tolist() == pytest.approx([-8 / 12.5**0.5, 3 / 12.5**0.5], rel=1e-6)
    # Gemma 3's q/k norm rounds the product with its weight (round_last), as the torch path does with qk_round_last
    gemma = SimpleNamespace(fused=None, head_dim=D, eps=1e-6, dtype=dtype, qk_round_last=True)
    want = llama._normed_rope(gemma, qkv, weight, rot, heads * D)
    got = kernel.head_norm_rope(qkv, weight, rot, 1e-6, True)
    torch.testing.assert_close(got.float(), want.float(), atol=tol, rtol=tol)
    if dtype == torch.bfloat16:  # the two roundings differ: a rounding step apart on some elements
        assert not torch.equal(got, kernel.head_norm_rope(qkv, weight, rot, 1e-6))


@dtypes
def test_the_fused_forward_follows_the_torch_forward(dtype):
    """The whole forward with the native ops against the same weights with torch's ops: the same logits up to the
    dtype's rounding (bf16's, or float32's: only the order of sums differs), and the same greedy tokens."""
    from rlvr.sampling import llama
    from rlvr.sampling.cascade import CascadeCache
    from test_sampler import tiny_llama

    model = tiny_llama()
    fused, plain = (llama.load_weights(model, dtype, native=n) for n in (True, False))
    assert fused.fused is not None and plain.fused is None
    prompt = torch.tensor([5, 6, 7, 8, 9, 10])
    outs = []
    for w in (fused, plain):
        cache = CascadeCache(len(w.layers), 1, 1, w.n_kv, w.head_dim, [6], w.dtype, kernel=w.fused)
        hidden = llama.forward(w, prompt, torch.arange(6), llama.prefill_attend_into(cache.pk, cache.pv, [6]))
        outs.append(llama.logits(w, hidden[-1:]))
    tol = {torch.bfloat16: (0.1, 0.05), torch.float32: (1e-4, 1e-4)}[dtype]
    torch.testing.assert_close(outs[0], outs[1], atol=tol[0], rtol=tol[1])
    assert outs[0].argmax() == outs[1].argmax()


def test_a_build_lock_left_by_a_killed_build_does_not_hang_the_next_run(tmp_path):
    """torch's build lock (a `lock` file in the build folder) survives a process killed mid-build; the next run
    must not wait for it forever. A child loads the kernel beside such a stale lock, with a deadline."""
    import subprocess
    import sys
    from pathlib import Path

    from rlvr.sampling.native import HERE, _build_dir

    _, folder = _build_dir(HERE / "decode.cpp")
    (folder / "lock").touch()  # as a build SIGKILLed while holding it leaves it
    code = "from rlvr.sampling.native import decode_ops; print(decode_ops() is not None)"
    root = Path(__file__).resolve().parents[1]
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=root)
    assert p.returncode == 0 and p.stdout.strip() == "True", p.stderr[-2000:]
    assert not (folder / "lock").exists()


panel = pytest.mark.skipif(
    kernel is None or not kernel.panel_linear_available(), reason="the panel kernel needs AVX2 and FMA"
)


@panel
def test_panel_linear_by_hand():
    """y = x W^T + b with W[n] = (n, 1), x = (1, 2), b = 10: y[n] = n + 12, exactly."""
    from rlvr.sampling import llama

    pack, linear = llama.packed_linear(torch.float32, 8, kernel)
    w = torch.stack([torch.arange(32.0), torch.ones(32)], dim=1)
    packed = pack(w)
    assert packed.shape == (2, 2, 16)  # two panels of 16 output columns, K = 2
    out = linear(torch.tensor([[1.0, 2.0]]), packed, torch.full((32,), 10.0))
    assert out.tolist() == [[n + 12.0 for n in range(32)]]


@panel
@pytest.mark.parametrize("M", [1, 2, 7, 8, 13, 64, 65, 141])
def test_panel_linear_equals_f_linear(M):
    """Every row count the sampler meets (decode's few rows, chunks of 64, a prefill), K not a multiple of the
    vector width, with and without a bias, and rows taken from a wider tensor: F.linear's result up to the order of
    float32 sums."""
    import torch.nn.functional as F

    from rlvr.sampling import llama

    g = torch.Generator().manual_seed(M)
    pack, linear = llama.packed_linear(torch.float32, 8, kernel)
    w, b = torch.randn(80, 37, generator=g), torch.randn(80, generator=g)
    wide = torch.randn(M, 50, generator=g)
    x = wide[:, 5:42]  # unit column stride, row stride 50
    packed = pack(w)
    assert packed.dim() == 3
    torch.testing.assert_close(linear(x, packed, b), F.linear(x, w, b), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(linear(x, packed), F.linear(x, w), atol=1e-5, rtol=1e-5)


@panel
def test_panel_linear_rows_do_not_interact():
    """Each output is one float32 sum in k order, whatever the rows beside it: 141 rows at once (three chunks, row
    blocks of every size) are bit-identical to each row alone, so a decode batch's size never moves a token."""
    from rlvr.sampling import llama

    g = torch.Generator().manual_seed(7)
    pack, linear = llama.packed_linear(torch.float32, 8, kernel)
    packed, x = pack(torch.randn(96, 200, generator=g)), torch.randn(141, 200, generator=g)
    alone = torch.cat([linear(x[i : i + 1], packed) for i in range(len(x))])
    assert torch.equal(linear(x, packed), alone)


@panel
def test_a_weight_that_does_not_fill_panels_keeps_onednn():
    import torch.nn.functional as F

    from rlvr.sampling import llama

    pack, linear = llama.packed_linear(torch.float32, 8, kernel)
    w, x = torch.randn(20, 8), torch.randn(3, 8)
    packed = pack(w)
    assert packed.dim() == 2  # oneDNN's packing (or the plain weight where oneDNN is missing)
    torch.testing.assert_close(linear(x, packed), F.linear(x, w), atol=1e-5, rtol=1e-5)


def test_a_second_checkout_of_the_same_source_reuses_the_build(tmp_path):
    """The build is cached per source content; torch's build file names the source's path, so the source is built
    from a copy inside the cache folder: another checkout (a worktree, a clean clone) loads the same library
    without rebuilding it."""
    import shutil
    import subprocess
    import sys
    from pathlib import Path

    from rlvr.sampling.native import HERE, _build_dir

    _, folder = _build_dir(HERE / "decode.cpp")
    built = sorted(folder.glob("*.so"))
    assert built, "the module-level load above built it"
    stamp = built[0].stat().st_mtime_ns
    copy = tmp_path / "src"
    shutil.copytree(Path(__file__).resolve().parents[1] / "src", copy)
    code = "from rlvr.sampling.native import decode_ops; import rlvr; print(rlvr.__file__, decode_ops() is not None)"
    p = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(copy)},
    )
    assert p.returncode == 0 and p.stdout.split() == [str(copy / "rlvr" / "__init__.py"), "True"], p.stderr[-2000:]
    assert built[0].stat().st_mtime_ns == stamp  # loaded, not rebuilt


@dtypes
def test_gelu_tanh_mul_equals_the_torch_ops(dtype):
    """Gemma 3's gelu_tanh(gate) * up, rounded as transformers' MLP rounds it (bf16: the activation, then the product):
    torch's own result, except where gate < -2 in bf16, where torch's 0.5 x (1 + tanh y) loses digits to cancellation
    (27% of a value near x = -5) and the kernel's x / (1 + exp(-2y)) does not: there a bf16 step apart, under 1e-4
    absolute. float32 from -100 to 100, a row (45) with a scalar tail; by hand, gelu_tanh(1) = 0.841192."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(6)
    gu = torch.randn(4, 2 * 45, generator=g) * 3
    gu[0, :45] = torch.linspace(-100, 100, 45)
    gu = gu.to(dtype)
    gate, up = gu.chunk(2, dim=-1)
    want, got = F.gelu(gate, approximate="tanh") * up, kernel.gelu_tanh_mul(gu)
    assert got.dtype == dtype and got.shape == want.shape
    if dtype == torch.float32:
        torch.testing.assert_close(got, want, atol=1e-6, rtol=1e-5)
    else:
        far = gate.float() > -2
        assert torch.equal(got[far], want[far]) and (got.float() - want.float()).abs().max() < 1e-4
    assert kernel.gelu_tanh_mul(torch.tensor([[1.0, 2.0]], dtype=dtype)).item() == pytest.approx(
        2 * 0.841192, rel=1e-6 if dtype == torch.float32 else 4e-3
    )
