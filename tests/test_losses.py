"""The policy loss: hand-computed 2x3 examples, gradients, GSPO/GRPO equivalence, micro-batch invariance."""

import math

import pytest
import torch

from rlvr.algorithms.losses import AGGREGATIONS, RATIO_LEVELS, aggregate, batch_counts, kl_k3, policy_loss
from rlvr.policy.softmax import selective_log_softmax, token_entropy_from_logits

AGGS, RATIOS = AGGREGATIONS.names(), RATIO_LEVELS.names()

F64 = torch.float64
# Row 0: A = +1, all three tokens count; row 1: A = -1, its last token is padding.
ADV = torch.tensor([1.0, -1.0], dtype=F64)
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=F64)


def _leaf(values):
    return torch.tensor(values, dtype=F64, requires_grad=True)


# ---- token ratio ---------------------------------------------------------------------------------
# ratios r = [[1.1, 0.7, 1.5], [0.9, 1.3, 0.6]], clip range [0.8, 1.2]. Per-token loss -min(rA, clip(r)A):
#   row 0 (A=+1): -min(1.1,1.1) = -1.1 ; -min(0.7,0.8) = -0.7 ; -min(1.5,1.2) = -1.2 (clipped high)
#   row 1 (A=-1):  max(0.9,0.9) =  0.9 ;  max(1.3,1.2) =  1.3 ;  max(0.6,0.8) = 0.8 (clipped low, masked)
# Masked sums: row 0 = -3.0 (3 tokens), row 1 = 2.2 (2 tokens); total -0.8 over 5 tokens, 2 sequences.
TOKEN_RATIOS = [[1.1, 0.7, 1.5], [0.9, 1.3, 0.6]]
# d loss_it / d logp_it = -A r on unclipped, unmasked tokens, 0 elsewhere (before the agg weights):
TOKEN_RAW_GRAD = [[-1.1, -0.7, 0.0], [0.9, 1.3, 0.0]]


@pytest.mark.parametrize(
    "agg, norm_len, loss, weights",
    [
        ("token-mean", None, -0.16, [[1 / 5] * 3, [1 / 5] * 3]),  # -0.8 / 5
        ("seq-mean-token-mean", None, 0.05, [[1 / 6] * 3, [1 / 4] * 3]),  # (-3/3 + 2.2/2) / 2
        ("seq-mean-token-sum-norm", 4, -0.1, [[1 / 8] * 3, [1 / 8] * 3]),  # -0.8 / (2 * 4)
        ("seq-mean-token-sum-norm", None, -0.8 / 6, [[1 / 6] * 3, [1 / 6] * 3]),  # norm_len = T = 3
    ],
)
def test_token_ratio_hand_computed(agg, norm_len, loss, weights):
    old = torch.zeros(2, 3, dtype=F64)
    logp = _leaf([[math.log(r) for r in row] for row in TOKEN_RATIOS])
    value, stats = policy_loss(logp, old, ADV, MASK, ratio="token", agg=agg, norm_len=norm_len)
    assert value.item() == pytest.approx(loss, abs=1e-12)
    value.backward()
    expected = torch.tensor(TOKEN_RAW_GRAD, dtype=F64) * torch.tensor(weights, dtype=F64)
    assert torch.allclose(logp.grad, expected, atol=1e-12)
    # one of five counted tokens is clipped high; the low-clipped token is padding
    assert stats["clip/high_frac"].item() == pytest.approx(0.2)
    assert stats["clip/low_frac"].item() == 0.0
    assert stats["ratio/mean"].item() == pytest.approx(1.1)  # (1.1+0.7+1.5+0.9+1.3) / 5
    assert "kl" not in stats and not stats["ratio/mean"].requires_grad


# ---- sequence ratio (GSPO) -----------------------------------------------------------------------
# log-ratios row 0 = [0.1, 0.2, 0.3] -> mean 0.2, s0 = e^0.2 = 1.2214028 > 1.2: clipped, loss -1.2 per token
# row 1 = [-0.1, -0.3, (5.0 masked)] -> mean -0.2, s1 = e^-0.2 = 0.8187308 >= 0.8: unclipped, loss +0.8187308
# Masked sums: row 0 = -3.6, row 1 = 1.6374615; total -1.9625385.
# Gradient: row 0 is clipped (0); each row-1 token's gradient is s1 = 0.8187308 times its agg weight.
SEQ_LOG_RATIOS = [[0.1, 0.2, 0.3], [-0.1, -0.3, 5.0]]
S1 = 0.8187307531


@pytest.mark.parametrize(
    "agg, loss, weight",
    [
        ("token-mean", -0.3925077, 1 / 5),  # -1.9625385 / 5
        ("seq-mean-token-mean", -0.1906346, 1 / 4),  # (-1.2 + 0.8187308) / 2
        ("seq-mean-token-sum-norm", -0.3270897, 1 / 6),  # -1.9625385 / (2 * 3)
    ],
)
def test_sequence_ratio_hand_computed(agg, loss, weight):
    old = torch.zeros(2, 3, dtype=F64)
    logp = _leaf(SEQ_LOG_RATIOS)
    value, stats = policy_loss(logp, old, ADV, MASK, ratio="sequence", agg=agg)
    assert value.item() == pytest.approx(loss, abs=1e-6)
    value.backward()
    expected = torch.tensor([[0.0, 0.0, 0.0], [S1 * weight, S1 * weight, 0.0]], dtype=F64)
    assert torch.allclose(logp.grad, expected, atol=1e-9)
    assert stats["clip/high_frac"].item() == pytest.approx(0.6)  # row 0's three tokens
    # (3 * 1.2214028 + 2 * 0.8187308) / 5
    assert stats["ratio/mean"].item() == pytest.approx(1.0603340, abs=1e-6)


def test_gspo_tight_clip_zeroes_both_rows():
    logp = _leaf(SEQ_LOG_RATIOS)
    value, stats = policy_loss(
        logp,
        torch.zeros(2, 3, dtype=F64),
        ADV,
        MASK,
        ratio="sequence",
        clip_low=3e-4,
        clip_high=4e-4,
        agg="seq-mean-token-mean",
    )
    # (-(1 + 4e-4) + (1 - 3e-4)) / 2 = -3.5e-4
    assert value.item() == pytest.approx(-3.5e-4, abs=1e-12)
    value.backward()
    assert torch.count_nonzero(logp.grad) == 0
    assert stats["clip/high_frac"].item() == pytest.approx(0.6)
    assert stats["clip/low_frac"].item() == pytest.approx(0.4)


# ---- gradients: clipped and masked tokens get none -----------------------------------------------
@pytest.mark.parametrize("agg", AGGS)
def test_zero_gradient_on_clipped_and_masked_tokens(agg):
    gen = torch.Generator().manual_seed(1)
    logp = (torch.randn(6, 7, generator=gen, dtype=F64) * 0.3).requires_grad_()
    old = torch.zeros(6, 7, dtype=F64)
    adv = torch.randn(6, generator=gen, dtype=F64)
    mask = (torch.rand(6, 7, generator=gen) < 0.7).to(F64)
    value, _ = policy_loss(logp, old, adv, mask, agg=agg, clip_low=0.2, clip_high=0.28)
    value.backward()
    r = logp.detach().exp()
    a = adv.unsqueeze(-1)
    clipped = ((r > 1.28) & (a > 0)) | ((r < 0.8) & (a < 0))
    dead = clipped | (mask == 0)
    assert dead.any() and (~dead).any()
    assert torch.all(logp.grad[dead] == 0)
    assert torch.all(logp.grad[~dead] != 0)


def test_gspo_equals_grpo_when_each_sequence_has_one_log_ratio():
    gen = torch.Generator().manual_seed(2)
    per_seq = torch.randn(5, 1, generator=gen, dtype=F64) * 0.2
    old = torch.randn(5, 4, generator=gen, dtype=F64)
    adv = torch.randn(5, generator=gen, dtype=F64)
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0], [1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 1, 1]], dtype=F64)
    for agg in AGGS:
        results = []
        for ratio in RATIOS:
            logp = (old + per_seq).requires_grad_()
            value, stats = policy_loss(logp, old, adv, mask, ratio=ratio, agg=agg, clip_high=0.28)
            value.backward()
            results.append((value.detach(), logp.grad, stats["clip/high_frac"], stats["clip/low_frac"]))
        for tok, seq in zip(*results):
            assert torch.allclose(tok, seq, atol=1e-12)


# ---- micro-batch invariance ----------------------------------------------------------------------
def _batch(seed=3, b=8, t=6):
    gen = torch.Generator().manual_seed(seed)
    logp = torch.randn(b, t, generator=gen, dtype=F64) * 0.3
    old = logp + torch.randn(b, t, generator=gen, dtype=F64) * 0.2
    ref = logp + torch.randn(b, t, generator=gen, dtype=F64) * 0.2
    adv = torch.randn(b, generator=gen, dtype=F64)
    lengths = torch.tensor([6, 1, 3, 0, 5, 2, 6, 4])  # row 3 fully masked (e.g. overlong-filtered)
    mask = (torch.arange(t) < lengths.unsqueeze(-1)).to(F64)
    return logp, old, ref, adv, mask


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("agg", AGGS)
@pytest.mark.parametrize("beta", [0.0, 0.1])
def test_micro_batch_invariance(agg, ratio, beta):
    logp0, old, ref, adv, mask = _batch()
    num_tokens, num_seqs = batch_counts(mask)
    assert num_tokens.item() == 27 and num_seqs.item() == 7
    kw = dict(ratio=ratio, agg=agg, beta=beta, clip_high=0.28, norm_len=6)
    full_logp = logp0.clone().requires_grad_()
    full, _ = policy_loss(full_logp, old, adv, mask, ref_logp=ref, **kw)
    full.backward()
    for n_micro in (1, 2, 8):
        logp = logp0.clone().requires_grad_()
        total = torch.zeros((), dtype=F64)
        size = 8 // n_micro
        for i in range(0, 8, size):
            s = slice(i, i + size)
            # each micro-batch's share, computed with the full batch's denominators, summed
            part, _ = policy_loss(
                logp[s], old[s], adv[s], mask[s], ref_logp=ref[s], num_tokens=num_tokens, num_seqs=num_seqs, **kw
            )
            part.backward()
            total = total + part.detach()
        assert torch.allclose(total, full.detach(), atol=1e-12), (n_micro, total, full)
        assert torch.allclose(logp.grad, full_logp.grad, atol=1e-12)


def test_local_counts_are_not_invariant_which_is_why_the_arguments_exist():
    logp, old, _, adv, mask = _batch()
    full, _ = policy_loss(logp, old, adv, mask, agg="token-mean")
    parts = sum(
        policy_loss(logp[i : i + 4], old[i : i + 4], adv[i : i + 4], mask[i : i + 4], agg="token-mean")[0]
        for i in (0, 4)
    )
    assert not torch.allclose(parts / 2, full)


# ---- aggregation edge cases, KL, old_logp=None ---------------------------------------------------
def test_aggregate_unknown_mode_names_the_choices():
    with pytest.raises(ValueError, match="token-mean, seq-mean-token-mean, seq-mean-token-sum-norm, or package"):
        aggregate(torch.ones(1, 1), torch.ones(1, 1), "mean")
    with pytest.raises(ValueError, match="token, sequence"):
        policy_loss(torch.zeros(1, 1), None, torch.zeros(1), torch.ones(1, 1), ratio="seq")


def test_aggregate_of_an_all_masked_batch_is_zero_not_nan():
    for mode in AGGS:
        assert aggregate(torch.ones(2, 3), torch.zeros(2, 3), mode).item() == 0.0


def test_k3_value_and_gradient_at_a_hand_point():
    # x = ref - logp = ln 2: k3 = 2 - ln 2 - 1 = 0.3068528; d k3 / d logp = 1 - e^x = -1
    logp = torch.tensor([0.0, 0.5], dtype=F64, requires_grad=True)
    ref = torch.tensor([math.log(2.0), 0.5], dtype=F64)
    k3 = kl_k3(logp, ref)
    assert k3.tolist() == pytest.approx([0.3068528, 0.0], abs=1e-7)
    k3.sum().backward()
    assert logp.grad.tolist() == pytest.approx([-1.0, 0.0], abs=1e-12)


def test_kl_term_in_the_loss():
    # A = 0 removes the surrogate; beta * token-mean(k3) over the 5 counted tokens
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    ref = torch.full((2, 3), math.log(2.0), dtype=F64)
    value, stats = policy_loss(logp, None, torch.zeros(2, dtype=F64), MASK, ref_logp=ref, beta=0.1)
    assert value.item() == pytest.approx(0.1 * 0.3068528, abs=1e-7)
    assert stats["kl"].item() == pytest.approx(0.3068528, abs=1e-7)
    value.backward()
    # 0.1 * (1 - 2) / 5 on counted tokens
    assert torch.allclose(logp.grad, -0.02 * MASK, atol=1e-12)
    with pytest.raises(ValueError, match="ref_logp"):
        policy_loss(logp, None, ADV, MASK, beta=0.1)


def test_old_logp_none_is_the_detached_current_policy():
    logp0, old, _, adv, mask = _batch()
    a = logp0.clone().requires_grad_()
    b = logp0.clone().requires_grad_()
    la, sa = policy_loss(a, None, adv, mask, agg="seq-mean-token-mean")
    lb, _ = policy_loss(b, logp0.clone(), adv, mask, agg="seq-mean-token-mean")
    la.backward()
    lb.backward()
    assert torch.allclose(la, lb) and torch.allclose(a.grad, b.grad)
    assert sa["ratio/mean"].item() == 1.0 and sa["clip/high_frac"].item() == 0.0


# ---- log-softmax and entropy helpers -------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_selective_log_softmax_matches_full_log_softmax(dtype):
    gen = torch.Generator().manual_seed(4)
    logits = (torch.randn(3, 5, 37, generator=gen) * 3).to(dtype).requires_grad_()
    ids = torch.randint(0, 37, (3, 5), generator=gen)
    got = selective_log_softmax(logits, ids, chunk_rows=4)  # 15 rows in chunks of 4
    assert got.dtype == torch.float32 and got.shape == (3, 5)
    ref_logits = logits.detach().clone().requires_grad_()
    want = torch.log_softmax(ref_logits.float(), -1).gather(-1, ids.unsqueeze(-1)).squeeze(-1)
    assert torch.allclose(got, want, atol=1e-5)
    (got * torch.arange(15.0).view(3, 5)).sum().backward()
    (want * torch.arange(15.0).view(3, 5)).sum().backward()
    atol = 1e-2 if dtype == torch.bfloat16 else 1e-6
    assert torch.allclose(logits.grad.float(), ref_logits.grad.float(), atol=atol)


def test_token_entropy_hand_values():
    logits = torch.tensor([[0.0, 0.0, 0.0, 0.0], [100.0, 0.0, 0.0, 0.0]])
    # uniform over 4: ln 4 = 1.3862944 ; one-hot: 0
    entropy = token_entropy_from_logits(logits, chunk_rows=1)
    assert entropy.tolist() == pytest.approx([1.3862944, 0.0], abs=1e-6)


def test_selective_log_softmax_mask_scores_only_sampled_positions():
    """Masked-out positions come back 0 with zero gradient; the others equal the full log-softmax, in
    value and gradient, for every chunk size (the hand-written backward is g * (onehot - softmax))."""
    gen = torch.Generator().manual_seed(5)
    logits = (torch.randn(2, 6, 11, generator=gen) * 2).requires_grad_()
    ids = torch.randint(0, 11, (2, 6), generator=gen)
    mask = torch.tensor([[1, 1, 1, 0, 0, 0], [1, 1, 1, 1, 1, 0]])
    weights = torch.arange(1.0, 13.0).view(2, 6)
    full = torch.log_softmax(logits.detach().double(), -1).gather(-1, ids[..., None])[..., 0]
    softmax = torch.softmax(logits.detach().double(), -1)
    # d/dz_v of sum_t w_t logp_t = w_t (onehot(y_t)_v - softmax_v), on kept positions only
    want_grad = (torch.nn.functional.one_hot(ids, 11).double() - softmax) * (weights * mask)[..., None]
    for chunk in (1, 4, 100):
        logits.grad = None
        got = selective_log_softmax(logits, ids, chunk_rows=chunk, mask=mask)
        assert torch.allclose(got.double(), full * mask, atol=1e-6)
        assert got[0, 3:].tolist() == [0.0, 0.0, 0.0] and got[1, 5].item() == 0.0
        (got * weights).sum().backward()
        assert torch.allclose(logits.grad.double(), want_grad, atol=1e-6)
        assert logits.grad[0, 3:].abs().sum().item() == 0.0
