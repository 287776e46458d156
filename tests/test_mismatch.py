"""The sampler-vs-trainer mismatch figures: the pure function against hand-computed values, and a real step on the
tiny model whose sampler's log-probs are shifted on purpose, the figures checked against the shift by hand."""

import dataclasses
import math

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.algorithms.mismatch import empty_sums, merge_sums, mismatch_figures, mismatch_sums
from test_trainer import tiny_config

# r = logp_trainer - logp_sampler on four measured tokens: log 1.5, -log 4, 0, log 3; a fifth, masked, far off
R = [math.log(1.5), -math.log(4.0), 0.0, math.log(3.0), 9.0]
MASK = [1.0, 1.0, 1.0, 1.0, 0.0]


def _pair(r, mask):
    sampler = torch.tensor([[-1.0, -2.0, -0.5, -3.0, -0.1]])[:, : len(r)]
    return sampler + torch.tensor([r]), sampler, torch.tensor([mask])


def test_figures_by_hand():
    trainer, sampler, mask = _pair(R, MASK)
    got = mismatch_figures(mismatch_sums(trainer, sampler, mask, cap=2.0))
    # k3 per token: exp(r) - 1 - r = 1.5 - 1 - 0.405465 = 0.094535; 0.25 - 1 + 1.386294 = 0.636294; 0;
    # 3 - 1 - 1.098612 = 0.901388 -> mean 1.632217 / 4
    assert got["mismatch/k3_kl"] == pytest.approx(1.632217 / 4, abs=1e-5)
    assert got["mismatch/abs_log_ratio"] == pytest.approx((0.405465 + 1.386294 + 0 + 1.098612) / 4, abs=1e-5)
    assert got["mismatch/max_ratio"] == pytest.approx(3.0, rel=1e-5)  # the masked ratio e^9 does not count
    assert got["mismatch/outside_frac"] == 0.5  # 1/4 and 3 lie outside [1/2, 2]; 1.5 and 1 inside
    assert got["mismatch/tokens"] == 4
    wider = mismatch_figures(mismatch_sums(trainer, sampler, mask, cap=5.0))
    assert wider["mismatch/outside_frac"] == 0.0 and wider["mismatch/k3_kl"] == got["mismatch/k3_kl"]


def test_sums_of_parts_are_the_whole():
    """Micro-batches (and ranks) add up to the whole batch's figures."""
    trainer, sampler, mask = _pair(R, MASK)
    whole = mismatch_sums(trainer, sampler, mask)
    parts = empty_sums()
    for cols in (slice(0, 2), slice(2, 5)):
        parts = merge_sums(parts, mismatch_sums(trainer[:, cols], sampler[:, cols], mask[:, cols]))
    assert mismatch_figures(parts) == pytest.approx(mismatch_figures(whole))


def test_no_tokens_no_figures_and_bad_input():
    trainer, sampler, mask = _pair(R, [0.0] * 5)
    assert mismatch_figures(mismatch_sums(trainer, sampler, mask)) == {}
    with pytest.raises(ValueError, match="cap must be > 1, got 1.0"):
        mismatch_sums(trainer, sampler, mask, cap=1.0)
    with pytest.raises(ValueError, match="shapes differ"):
        mismatch_sums(trainer, sampler[:, :3], mask)


class ShiftedSampler:
    """The real sampler, with every drawn token's recorded log-prob moved by `shift` (first token of each row only
    when `first_only`): a sampler that disagrees with the trainer by a known amount."""

    def __init__(self, inner, shift: float, first_only: bool = False):
        self.inner, self.shift, self.first_only = inner, shift, first_only

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def generate(self, *args, **kwargs):
        ro = self.inner.generate(*args, **kwargs)
        delta = ro.mask * self.shift
        if self.first_only:
            delta[:, 1:] = 0.0
        return dataclasses.replace(ro, sampler_logp=ro.sampler_logp + delta)


def _step(tmp_path, tokenizer, shift=None, first_only=False, **over):
    from rlvr.training.step import check_components, run_step, setup

    # float32 sampling and update: the two forwards agree to rounding, so the shift is the whole mismatch
    cfg = tiny_config(tmp_path, **{"rollout.dtype": "float32", "train.autocast": "none", **over})
    state = setup(check_components(cfg), policy=(make_tiny_llama(len(tokenizer)), tokenizer))
    if shift is not None:
        state.sampler = ShiftedSampler(state.sampler, shift, first_only)
    return run_step(state, 0)


def _trained_rows(batch) -> int:
    return sum(1 for r in range(len(batch)) if batch.mask[r].sum() > 0 and batch.advantages[r] != 0)


def test_a_faithful_sampler_shows_no_mismatch(tmp_path, tokenizer):
    result = _step(tmp_path, tokenizer)
    row = result.row
    assert row["mismatch/tokens"] == int(
        sum(result.batch.mask[r].sum() for r in range(len(result.batch)) if result.batch.advantages[r] != 0)
    )
    assert row["mismatch/k3_kl"] < 1e-9 and row["mismatch/abs_log_ratio"] < 1e-4
    assert row["mismatch/max_ratio"] == pytest.approx(1.0, abs=1e-4) and row["mismatch/outside_frac"] == 0.0


def test_a_shifted_sampler_shows_its_shift(tmp_path, tokenizer):
    """sampler_logp + 0.8 on every token: r = -0.8 everywhere, so k3 = e^-0.8 - 1 + 0.8 = 0.249329, |r| = 0.8,
    max ratio e^-0.8 = 0.449329, and every token outside [1/2, 2] (0.8 > log 2 = 0.693)."""
    row = _step(tmp_path, tokenizer, shift=0.8).row
    assert row["mismatch/tokens"] > 0
    assert row["mismatch/k3_kl"] == pytest.approx(0.249329, abs=1e-4)
    assert row["mismatch/abs_log_ratio"] == pytest.approx(0.8, abs=1e-4)
    assert row["mismatch/max_ratio"] == pytest.approx(0.449329, abs=1e-4)
    assert row["mismatch/outside_frac"] == 1.0
    assert (
        _step(tmp_path / "wide", tokenizer, shift=0.8, **{"log.mismatch_cap": 3.0}).row["mismatch/outside_frac"] == 0.0
    )


def test_a_shift_on_first_tokens_is_diluted_by_the_token_count(tmp_path, tokenizer):
    """sampler_logp - 1.0 on the first token of each row only: r = +1 on one token per trained row, ~0 elsewhere, so
    k3 = rows (e - 2) / tokens, |r| = rows / tokens, max ratio e, outside = rows / tokens."""
    result = _step(tmp_path, tokenizer, shift=-1.0, first_only=True)
    row, rows = result.row, _trained_rows(result.batch)
    share = rows / row["mismatch/tokens"]
    assert 0 < share < 1
    assert row["mismatch/k3_kl"] == pytest.approx((math.e - 2) * share, abs=1e-4)
    assert row["mismatch/abs_log_ratio"] == pytest.approx(share, abs=1e-4)
    assert row["mismatch/max_ratio"] == pytest.approx(math.e, abs=1e-3)
    assert row["mismatch/outside_frac"] == pytest.approx(share)


def test_mismatch_warning_reads_the_mean_k3_over_the_steps_that_measured_it():
    from rlvr.evaluation.report import MISMATCH_WARN_K3, mismatch_warning

    # the attention bug's figures (0.15-0.39): mean (0.1 + 0.3) / 2 = 0.2 over 2 steps; the row without the figure
    # (an episode step with no policy token, a skipped update) is not a step that measured
    rows = [{"step": 1, "mismatch/k3_kl": 0.1}, {"step": 2}, {"step": 3, "mismatch/k3_kl": 0.3}]
    text = mismatch_warning(rows)
    assert "averaged 0.2 over 2 steps (at most 0.3)" in text
    assert f"warned above {MISMATCH_WARN_K3:g}" in text
    # a healthy bf16 run (0.001-0.006) and the limit itself are not warned about; nor a run that measured nothing
    assert mismatch_warning([{"mismatch/k3_kl": 0.004}, {"mismatch/k3_kl": 0.0063}]) is None
    assert mismatch_warning([{"mismatch/k3_kl": MISMATCH_WARN_K3}]) is None
    assert mismatch_warning([{"step": 1}]) is None
    assert mismatch_warning([{"mismatch/k3_kl": 0.02}], limit=0.01) is not None
