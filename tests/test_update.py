"""The policy update: micro-batch size and skipping zero-advantage rows change nothing but speed."""

import dataclasses
import math

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.algorithms import get_preset
from rlvr.policy.update import UpdateSettings, micro_batches, update_policy
from rlvr.tasks.base import Problem
from rlvr.training.batch import StepBatch
from rlvr.verifiers.base import Verdict


def make_batch(advantages, seed=0):
    g = torch.Generator().manual_seed(seed)
    b, t = len(advantages), 6
    lengths = torch.randint(1, t + 1, (b,), generator=g)
    mask = (torch.arange(t)[None, :] < lengths[:, None]).float()
    prompts = [torch.randint(4, 60, (int(n),), generator=g).tolist() for n in torch.randint(2, 6, (b,), generator=g)]
    return StepBatch(
        problems=[Problem(id=str(i), prompt="q", answer="1") for i in range(b)],
        prompt_ids=prompts,
        completion_ids=torch.randint(4, 60, (b, t), generator=g) * mask.long(),
        mask=mask,
        sampler_logp=torch.zeros(b, t),
        group_ids=torch.arange(b) // 2,
        lengths=lengths,
        finish=["stop"] * b,
        texts=[""] * b,
        verdicts=[Verdict("wrong", 0.0)] * b,
        rewards=torch.zeros(b),
        terms={},
        advantages=torch.tensor(advantages, dtype=torch.float32),
    )


def run_update(batch, preset, micro, seed=3, tokens=0, grad_hook=None):
    """`preset`: a preset's name or an Algorithm; `grad_hook`, where given, rewrites the final norm's gradient."""
    model = make_tiny_llama(64, seed=seed)
    if grad_hook is not None:
        model.model.norm.weight.register_hook(grad_hook)
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    stats = update_policy(
        model,
        opt,
        batch,
        get_preset(preset) if isinstance(preset, str) else preset,
        UpdateSettings(
            pad_id=0,
            temperature=1.0,
            micro_batch_size=micro,
            max_grad_norm=1e9,
            autocast="none",
            norm_len=6,
            micro_batch_tokens=tokens,
        ),
    )
    return model, stats


@pytest.mark.parametrize("preset", ["grpo", "dapo", "gspo", "dr_grpo"])
def test_micro_batch_size_does_not_change_the_update(preset):
    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    ref, s_ref = run_update(batch, preset, micro=8)
    for micro, tokens in ((1, 0), (3, 0), (8, 7)):  # 7 tokens: rows of 4+ alone, shorter ones in pairs
        model, s = run_update(batch, preset, micro=micro, tokens=tokens)
        assert s["loss"] == pytest.approx(s_ref["loss"], abs=1e-6)
        for a, b in zip(ref.parameters(), model.parameters()):
            torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_a_non_finite_gradient_skips_the_step_and_reports_what_the_step_measured():
    # The loss is finite, one gradient is NaN: nothing is applied, and the metrics line carries the same figures as
    # the applied update of the same batch (token-weighted means, not the sums they are built from; no kl at beta 0)
    batch = make_batch([1.0, -1.0, 0.5, -0.5, 2.0, -2.0, 0.3, -0.3])
    algo = dataclasses.replace(get_preset("grpo"), rollout_correction="truncated")
    _, applied = run_update(batch, algo, micro=3)
    model, skipped = run_update(batch, algo, micro=3, grad_hook=lambda g: g * float("nan"))
    assert (applied["skipped"], skipped["skipped"]) == (0, 1)
    assert math.isnan(skipped["grad_norm"]) and math.isfinite(applied["grad_norm"])
    assert set(skipped) == set(applied) and "kl" not in skipped
    for key in set(applied) - {"skipped", "grad_norm"}:
        assert skipped[key] == pytest.approx(applied[key], rel=1e-6), key
    assert skipped["correction/kept_frac"] == 1.0  # truncation keeps every token (a sum would be the token count)
    assert skipped["train_tokens"] == int(batch.mask.sum())
    untouched = make_tiny_llama(64, seed=3)
    assert all(torch.equal(a, b) for a, b in zip(model.parameters(), untouched.parameters()))


def test_zero_advantage_rows_are_skipped_but_still_counted():
    # rows 2 and 3 form a zero-variance group: no gradient, but they count in the token-mean denominator
    batch = make_batch([1.0, -1.0, 0.0, 0.0])
    model, stats = run_update(batch, "dapo", micro=2)
    assert stats["active_rows"] == 2
    # the same update computed with every row in the forward, by hand: loss over all tokens of the batch
    full = make_tiny_llama(64, seed=3)
    from rlvr.algorithms.losses import policy_loss
    from rlvr.policy.logprobs import completion_logprobs

    logp, _ = completion_logprobs(full, batch.prompt_ids, batch.completion_ids, batch.mask, pad_id=0)
    loss, _ = policy_loss(logp, None, batch.advantages, batch.mask, agg="token-mean", clip_high=0.28)
    assert stats["loss"] == pytest.approx(float(loss.detach()), abs=1e-6)
    loss.backward()
    with torch.no_grad():
        for p in full.parameters():
            p -= 0.5 * p.grad
    for a, b in zip(full.parameters(), model.parameters()):
        torch.testing.assert_close(a, b, atol=1e-6, rtol=1e-5)


def test_micro_batches_cut_the_sorted_rows_where_padding_costs_more_than_a_chunk():
    # lengths 10, 9, 2, 1 (rows 0..3), overhead 5 a chunk: one chunk 4x10+5 = 45; {10,9}{2,1} 20+5+4+5 = 34;
    # {10}{9}{2,1} and {10,9}{2}{1} 38 each: the cut goes between the long and the short rows
    assert micro_batches([0, 1, 2, 3], [10, 9, 2, 1], 4, overhead=5) == [[0, 1], [2, 3]]
    # free chunks: every row alone, no padding at all; a costly chunk: as few as `size` allows
    assert micro_batches([0, 1, 2, 3, 4], [3, 9, 1, 7, 5], 8, overhead=0) == [[1], [3], [4], [0], [2]]
    assert micro_batches([0, 1, 2, 3, 4], [3, 9, 1, 7, 5], 8, overhead=1000) == [[1, 3, 4, 0, 2]]
    assert [len(c) for c in micro_batches(list(range(5)), [4] * 5, 2, overhead=1)] in ([2, 2, 1], [2, 1, 2], [1, 2, 2])
    # a token cap: at most 9 padded tokens a chunk: only the 3 and the 1 can share one; a longer row goes alone
    assert micro_batches([0, 1, 2, 3, 4], [3, 9, 1, 7, 5], 8, max_tokens=9, overhead=1000) == [[1], [3], [4], [0, 2]]
    assert micro_batches([0, 1], [30, 2], 8, max_tokens=10, overhead=1000) == [[0], [1]]


def test_micro_batches_are_the_cheapest_split_of_the_sorted_rows():
    import itertools
    import random

    rng = random.Random(0)
    for _ in range(30):
        n, size, overhead = rng.randint(1, 7), rng.randint(1, 4), rng.randint(0, 20)
        lengths = [rng.randint(1, 30) for _ in range(n)]
        cap = rng.choice([0, 20, 45])

        def fits(chunk, cap=cap, lengths=lengths):
            return len(chunk) == 1 or not cap or len(chunk) * max(lengths[r] for r in chunk) <= cap

        def cost(chunks, lengths=lengths, overhead=overhead):
            return sum(len(c) * max(lengths[r] for r in c) + overhead for c in chunks)

        order = sorted(range(n), key=lambda r: -lengths[r])
        best = min(
            cost([order[a:b] for a, b in zip((0,) + cuts, cuts + (n,))])
            for k in range(n)
            for cuts in itertools.combinations(range(1, n), k)
            if all(b - a <= size and fits(order[a:b]) for a, b in zip((0,) + cuts, cuts + (n,)))
        )
        chunks = micro_batches(list(range(n)), lengths, size, max_tokens=cap, overhead=overhead)
        assert sorted(r for c in chunks for r in c) == list(range(n))
        assert max(map(len, chunks)) <= size and all(map(fits, chunks))
        assert cost(chunks) == best
