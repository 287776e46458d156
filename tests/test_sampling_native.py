"""The native decode-attention kernel against the cascade cache's torch path (two flash calls merged through their
log-sum-exps) on the same random caches: the same attention up to float32 rounding, with every row alive, after
rows left the batch (uncompacted and compacted slots), across a cache block boundary, and with prompts of
different lengths. Skipped where the kernel cannot be built here (no compiler); the sampler then keeps the torch
path, which the other sampler tests cover."""

import pytest
import torch

from rlvr.sampling import native
from rlvr.sampling.cascade import BLOCK, CascadeCache

kernel = native.decode_ops()
pytestmark = pytest.mark.skipif(kernel is None, reason="the native kernel cannot be built on this machine")


def twin_caches(P, G, n_kv, D, lens, layers=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = CascadeCache(layers, P, G, n_kv, D, lens, torch.bfloat16, kernel=kernel)
    b = CascadeCache(layers, P, G, n_kv, D, lens, torch.bfloat16, kernel=None)
    assert a.kernel is not None and b.kernel is None
    for name in ("pk", "pv"):
        x = torch.randn(getattr(a, name).shape, generator=g).to(torch.bfloat16)
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
        wide = torch.randn(n, a.pk.shape[2] * (rep + 2), D, generator=g).to(torch.bfloat16)
        Hkv = a.pk.shape[2]
        q = wide[:, : Hkv * rep].view(n, Hkv, rep, D) * 0.125
        k, v = wide[:, Hkv * rep : Hkv * (rep + 1)], wide[:, Hkv * (rep + 1) :]
        got, want = a.attend(i, q, k, v), b.attend(i, q, k, v)
        assert got.shape == want.shape == (n, Hkv * rep * D) and got.dtype == torch.bfloat16
        torch.testing.assert_close(got.float(), want.float(), atol=2e-2, rtol=2e-2)
        # the kernel wrote the same new keys and values into the generated cache
        assert torch.equal(a.gk[i][a.slots, :, t], b.gk[i][b.slots, :, t])
        assert torch.equal(a.gv[i][a.slots, :, t], b.gv[i][b.slots, :, t])


def test_every_row_alive_prompts_of_different_lengths():
    a, b, g = twin_caches(P=3, G=4, n_kv=3, D=64, lens=[5, 17, 11])
    for t in range(6):
        step_both(a, b, g, t, rep=3, D=64)


def test_rows_leaving_compaction_and_a_new_block():
    a, b, g = twin_caches(P=2, G=8, n_kv=2, D=32, lens=[9, 4], seed=1)
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


def test_one_query_attends_exactly_by_hand():
    # one prompt token (key 0, value 1) and the generated key (key 0, value 3): equal scores -> mean value 2
    a = CascadeCache(1, 1, 1, 1, 2, [1], torch.bfloat16, kernel=kernel)
    a.pv.fill_(1.0)
    a.begin_step(0)
    q = torch.zeros(1, 1, 1, 2, dtype=torch.bfloat16)
    out = a.attend(0, q, torch.zeros(1, 1, 2, dtype=torch.bfloat16), torch.full((1, 1, 2), 3.0, dtype=torch.bfloat16))
    assert out.tolist() == [[2.0, 2.0]]


def test_fused_small_ops_equal_the_torch_ops():
    """RMSNorm, RoPE and silu * up: float32 inside and one rounding, so each equals the torch path's result up to
    one bf16 rounding step (the torch path rounds silu(gate) before the multiply)."""
    import torch.nn.functional as F

    g = torch.Generator().manual_seed(3)
    x, weight = torch.randn(5, 96, generator=g) * 3, torch.rand(96, generator=g) + 0.5
    got = kernel.rms_norm_bf16(x, weight, 1e-5)
    want = F.rms_norm(x, (96,), weight, 1e-5)
    assert (
        got.dtype == torch.bfloat16
        and torch.equal(got, want.to(torch.bfloat16))
        or (got.float() - want).abs().max() <= 2**-7 * want.abs().max()
    )
    # RoPE on q|k heads of a wider qkv (the v columns after them are left alone), positions 0..4
    heads, D = 4, 16
    qkv = torch.randn(5, (heads + 1) * D, generator=g).to(torch.bfloat16)
    inv = 1.0 / (10000 ** (torch.arange(0, D, 2).float() / D))
    rot = torch.polar(torch.full((5, heads, D // 2), 0.5), torch.arange(5).float()[:, None, None] * inv)
    want = torch.view_as_real(torch.view_as_complex(qkv[:, : heads * D].float().view(5, heads, D // 2, 2)) * rot)
    got = kernel.rope_bf16(qkv, rot)
    assert got.shape == (5, heads, D)
    torch.testing.assert_close(got.float(), want.view(5, heads, D).to(torch.bfloat16).float(), atol=1e-2, rtol=1e-2)
    assert torch.equal(kernel.rope_bf16(qkv[:, : heads * D].contiguous(), rot), got)  # v columns never read
    gu = torch.randn(3, 2 * 40, generator=g).to(torch.bfloat16)
    gate, up = gu.float().chunk(2, dim=-1)
    exact = (F.silu(gate) * up).to(torch.bfloat16)
    assert (
        torch.equal(kernel.silu_mul_bf16(gu), exact)
        or (kernel.silu_mul_bf16(gu).float() - exact.float()).abs().max() <= 2**-7 * exact.float().abs().max()
    )
    # by hand: silu(0) * 5 = 0, silu(2) * 1 = 2 / (1 + e^-2) = 1.7616 -> bf16 1.7578125
    assert kernel.silu_mul_bf16(torch.tensor([[0.0, 2.0, 5.0, 1.0]], dtype=torch.bfloat16)).tolist() == [
        [0.0, 1.7578125]
    ]


def test_the_fused_forward_follows_the_torch_forward():
    """The whole bf16 forward with the native ops against the same weights with torch's ops: the same logits up to
    bf16 rounding, and the same greedy tokens."""
    from rlvr.sampling import llama
    from rlvr.sampling.cascade import CascadeCache
    from test_sampler import tiny_llama

    model = tiny_llama()
    fused, plain = (llama.load_weights(model, torch.bfloat16, native=n) for n in (True, False))
    assert fused.fused is not None and plain.fused is None
    prompt = torch.tensor([5, 6, 7, 8, 9, 10])
    outs = []
    for w in (fused, plain):
        cache = CascadeCache(len(w.layers), 1, 1, w.n_kv, w.head_dim, [6], w.dtype, kernel=w.fused)
        hidden = llama.forward(w, prompt, torch.arange(6), llama.prefill_attend_into(cache.pk, cache.pv, [6]))
        outs.append(llama.logits(w, hidden[-1:]))
    torch.testing.assert_close(outs[0], outs[1], atol=0.1, rtol=0.05)
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
