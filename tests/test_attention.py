"""rlvr.policy.attention against torch's scaled_dot_product_attention: values and gradients, grouped-query heads,
padding masks, no mask, fully masked queries, and the same result whatever the row chunking."""

from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from rlvr.policy import attention
from rlvr.policy.attention import attention_forward


def reference(q, k, v, mask, scale):
    """sdpa in float32 with each key/value head repeated for its query heads; (B, Lq, Hq, D)."""
    rep = q.shape[1] // k.shape[1]
    if mask is None:
        mask = torch.ones(q.shape[2], k.shape[2], dtype=torch.bool).tril(k.shape[2] - q.shape[2])
    out = F.scaled_dot_product_attention(
        q.float(), k.repeat_interleave(rep, 1).float(), v.repeat_interleave(rep, 1).float(), attn_mask=mask, scale=scale
    )
    return out.transpose(1, 2)


def inputs(dtype, B=3, Hq=6, Hkv=2, Lq=5, Lk=9, D=8, seed=0):
    g = torch.Generator().manual_seed(seed)
    make = lambda *s: torch.randn(*s, generator=g).to(dtype).requires_grad_()  # noqa: E731
    return make(B, Hq, Lq, D), make(B, Hkv, Lk, D), make(B, Hkv, Lk, D)


def padded_causal(B, Lq, Lk):
    mask = torch.ones(Lq, Lk, dtype=torch.bool).tril(Lk - Lq)[None, None].repeat(B, 1, 1, 1)
    mask[1, :, :, :3] = False  # row 1 has 3 left-padding keys
    return mask


@pytest.mark.parametrize("dtype, tol", [(torch.float32, 2e-6), (torch.bfloat16, 2e-2)])
@pytest.mark.parametrize("masked", [False, True])
def test_matches_sdpa_values_and_gradients(dtype, tol, masked):
    q, k, v = inputs(dtype)
    mask = padded_causal(3, 5, 9) if masked else None
    out, weights = attention_forward(SimpleNamespace(), q, k, v, mask, scaling=0.3)
    assert weights is None and out.shape == (3, 5, 6, 8) and out.dtype == dtype
    grad = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(dtype)
    got = (out, *torch.autograd.grad(out, (q, k, v), grad))
    ref = reference(q, k, v, mask, 0.3)
    want = (ref, *torch.autograd.grad(ref, (q, k, v), grad.float()))
    for a, b in zip(got, want):  # relative to the tensor's scale: bf16 keeps ~3 significant digits
        assert (a.float() - b).abs().max() < tol * max(1.0, float(b.abs().max()))


def test_float_mask_and_default_scale():
    """An additive float mask (eager's format) means the same as the boolean one; no scaling = 1/sqrt(D)."""
    q, k, v = inputs(torch.float32)
    mask = padded_causal(3, 5, 9)
    additive = torch.zeros(mask.shape).masked_fill(~mask, torch.finfo(torch.float32).min)
    a, _ = attention_forward(SimpleNamespace(), q, k, v, mask)
    b, _ = attention_forward(SimpleNamespace(), q, k, v, additive)
    assert torch.equal(a, b)
    assert (a - reference(q, k, v, mask, 8**-0.5)).abs().max() < 2e-6


def test_fully_masked_query_is_finite_and_gets_no_gradient_from_others():
    """A left-padding query sees no key: its output is finite (uniform softmax, not NaN), and a loss on
    the other queries sends no gradient through it."""
    q, k, v = inputs(torch.float32)
    mask = padded_causal(3, 5, 9)
    mask[2, :, 0, :] = False  # row 2, query 0: nothing to attend to
    out, _ = attention_forward(SimpleNamespace(), q, k, v, mask)
    assert torch.isfinite(out).all()
    assert torch.allclose(out[2, 0], v[2].mean(dim=1).repeat_interleave(3, 0), atol=1e-6)
    keep = torch.ones_like(out)
    keep[2, 0] = 0
    (gq,) = torch.autograd.grad((out * keep).sum(), (q,))
    assert torch.isfinite(gq).all() and gq[2, :, 0].abs().max() == 0


def test_chunking_does_not_change_the_result(monkeypatch):
    """Rows run a few at a time to keep scores in cache: one row per chunk = all rows in one."""
    q, k, v = inputs(torch.float32, B=4)
    mask = padded_causal(4, 5, 9)
    g = torch.randn(4, 5, 6, 8)
    whole = attention_forward(SimpleNamespace(), q, k, v, mask)[0]
    grads_whole = torch.autograd.grad(whole, (q, k, v), g)
    monkeypatch.setattr(attention, "_chunks", lambda rows, per_row: [slice(i, i + 1) for i in range(rows)])
    split = attention_forward(SimpleNamespace(), q, k, v, mask)[0]
    grads_split = torch.autograd.grad(split, (q, k, v), g)
    assert torch.equal(whole, split)
    assert all(torch.equal(a, b) for a, b in zip(grads_whole, grads_split))


def test_model_logits_match_sdpa_with_padding(tiny_policy):
    """The whole tiny Llama with left padding: same logits at every real position as with sdpa."""
    model, _ = tiny_policy
    ids = torch.randint(3, 500, (2, 7))
    att = torch.ones(2, 7, dtype=torch.long)
    att[0, :3] = 0
    pos = (att.cumsum(-1) - 1).clamp(min=0)
    want = model(input_ids=ids, attention_mask=att, position_ids=pos).logits
    assert attention.configure(model, "auto") == attention.ATTENTION
    got = model(input_ids=ids, attention_mask=att, position_ids=pos).logits
    real = att.bool()
    assert (got[real] - want[real]).abs().max() < 1e-4


def test_configure_choices(tiny_policy):
    model, _ = tiny_policy
    before = model.config._attn_implementation
    assert attention.configure(model, "model") == before
    assert attention.configure(model, "rlvr") == attention.ATTENTION


def test_dropout_is_refused():
    q, k, v = inputs(torch.float32)
    with pytest.raises(ValueError, match="dropout"):
        attention_forward(SimpleNamespace(), q, k, v, None, dropout=0.1)
