"""Rollout correction by hand: the sampler's and the trainer's log-probs of the same tokens differ on purpose, and
each registered correction weighs or drops exactly the tokens its formula says; "none" leaves the loss bit for bit."""

import pytest
import torch

from rlvr.algorithms import algorithm_from_config
from rlvr.algorithms.correction import ROLLOUT_CORRECTIONS
from rlvr.algorithms.losses import policy_loss
from rlvr.registry import ConfigError

F64 = torch.float64
# Trainer log-probs 0 (prob 1 relative), sampler log-probs chosen so the ratios r = exp(logp - sampler_logp) are
# row 0: [1.0, 3.0, 0.25], row 1: [1.5, 1.5, (padding)].
RATIOS = [[1.0, 3.0, 0.25], [1.5, 1.5, 1.0]]
MASK = torch.tensor([[1.0, 1.0, 1.0], [1.0, 1.0, 0.0]], dtype=F64)
LOGP = torch.zeros(2, 3, dtype=F64)
SAMPLER = -torch.log(torch.tensor(RATIOS, dtype=F64))


def test_truncated_weight_is_the_ratio_capped_at_c():
    weight, keep = ROLLOUT_CORRECTIONS.get("truncated")(LOGP, SAMPLER, MASK, 2.0)
    assert weight.flatten().tolist() == pytest.approx([1.0, 2.0, 0.25, 1.5, 1.5, 1.0])  # padding: ratio taken as 1
    assert keep.tolist() == [[1, 1, 1], [1, 1, 1]]


def test_masked_token_drops_tokens_outside_one_over_c_to_c():
    weight, keep = ROLLOUT_CORRECTIONS.get("masked-token")(LOGP, SAMPLER, MASK, 2.0)
    assert keep.tolist() == [[1, 0, 0], [1, 1, 1]]  # 3.0 > 2 and 0.25 < 1/2 dropped
    assert weight.tolist() == [[1, 1, 1], [1, 1, 1]]


def test_masked_sequence_uses_the_mean_token_log_ratio():
    # row 0: mean log r = (0 + log 3 + log 0.25) / 3 = log(0.75) / 3 -> ratio 0.909, kept;
    # row 1: mean log r = log 1.5 -> kept at cap 2, dropped at cap 1.4. With the *sum*, row 0 would be 0.75 and
    # a long sequence of tiny mismatches would be dropped for its length alone.
    _, keep = ROLLOUT_CORRECTIONS.get("masked-sequence")(LOGP, SAMPLER, MASK, 2.0)
    assert keep.tolist() == [[1, 1, 1], [1, 1, 1]]
    _, keep = ROLLOUT_CORRECTIONS.get("masked-sequence")(LOGP, SAMPLER, MASK, 1.4)
    assert keep.tolist() == [[1, 1, 1], [0, 0, 0]]


def test_policy_loss_with_truncated_weights_by_hand():
    """Ratio 1 (old = current), A = [+1, -1]: per-token loss -A; token-mean over 5 tokens of -A * weight."""
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    loss, stats = policy_loss(
        logp,
        None,
        adv,
        MASK,
        agg="token-mean",
        sampler_logp=SAMPLER,
        rollout_correction="truncated",
        correction_cap=2.0,
    )
    # row 0: -(1 + 2 + 0.25); row 1: +(1.5 + 1.5); over 5 tokens
    assert loss.item() == pytest.approx((-(1 + 2 + 0.25) + 3.0) / 5)
    loss.backward()
    assert logp.grad[0].tolist() == pytest.approx([-1 / 5, -2 / 5, -0.25 / 5])
    assert stats["correction/ratio_mean"].item() == pytest.approx((1 + 3 + 0.25 + 1.5 + 1.5) / 5)
    assert stats["correction/weight_mean"].item() == pytest.approx((1 + 2 + 0.25 + 1.5 + 1.5) / 5)
    assert stats["correction/kept_frac"].item() == 1.0


def test_masked_tokens_count_as_zero_loss_in_the_same_denominators():
    logp = torch.zeros(2, 3, dtype=F64, requires_grad=True)
    adv = torch.tensor([1.0, -1.0], dtype=F64)
    loss, stats = policy_loss(
        logp,
        None,
        adv,
        MASK,
        agg="token-mean",
        sampler_logp=SAMPLER,
        rollout_correction="masked-token",
        correction_cap=2.0,
    )
    assert loss.item() == pytest.approx((-1 + 1 + 1) / 5)
    assert stats["correction/kept_frac"].item() == pytest.approx(3 / 5)


def test_none_is_the_uncorrected_loss_bit_for_bit():
    logp = torch.randn(2, 3, dtype=F64)
    adv = torch.tensor([0.7, -1.3], dtype=F64)
    a, sa = policy_loss(logp, logp - 0.1, adv, MASK)
    b, sb = policy_loss(logp, logp - 0.1, adv, MASK, sampler_logp=SAMPLER, rollout_correction="none")
    assert torch.equal(a, b) and sa.keys() == sb.keys()


def test_a_correction_without_sampler_logprobs_and_bad_settings_are_refused():
    with pytest.raises(ValueError, match="needs the sampler's log-probs"):
        policy_loss(LOGP, None, torch.ones(2, dtype=F64), MASK, rollout_correction="truncated")
    with pytest.raises(ConfigError, match="algorithm.rollout_correction: unknown rollout correction 'tis'"):
        algorithm_from_config({"preset": "grpo", "rollout_correction": "tis"})
    with pytest.raises(ConfigError, match=r"^config key 'algorithm.correction_cap' = 1.0; must be > 1$"):
        algorithm_from_config({"preset": "grpo", "rollout_correction": "truncated", "correction_cap": 1.0})
    assert algorithm_from_config("dapo").rollout_correction == "none"  # the presets unchanged


def test_a_real_step_with_truncated_weights_logs_the_figures_before_and_after_the_cap(tmp_path, tokenizer):
    """Two steps on the tiny model (hf sampler in float32 against a float32 trainer: ratios near 1) with the
    correction on: its figures in every metrics line, the weights never above the ratios, nothing dropped."""
    import json

    from conftest import make_tiny_llama
    from rlvr.training.loop import train
    from test_trainer import tiny_config

    cfg = tiny_config(tmp_path, **{"algorithm.rollout_correction": "truncated", "algorithm.correction_cap": 1.5})
    assert cfg["algorithm"] == {"preset": "grpo", "rollout_correction": "truncated", "correction_cap": 1.5}
    run = train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    rows = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    for r in rows:
        assert r["correction/kept_frac"] == 1.0
        assert 0 < r["correction/weight_mean"] <= r["correction/ratio_mean"] + 1e-9
        assert r["correction/ratio_mean"] == pytest.approx(1.0, abs=0.05)
    plain = train(tiny_config(tmp_path / "plain"), policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    assert not any(
        k.startswith("correction/") for k in json.loads((plain / "metrics.jsonl").read_text().splitlines()[0])
    )


def test_a_step_with_no_informative_group_logs_no_correction_figures():
    """Every group zero-variance: nothing is trained, so there is no ratio to report (not a ratio of 0); with
    informative rows the figures are the token means of exp(logp - sampler_logp) (the sampler's log-probs 0 here,
    so every ratio is the trainer's probability of its token: between 0 and 1)."""
    from conftest import make_tiny_llama
    from rlvr.policy.update import UpdateSettings, update_policy
    from test_update import make_batch

    algo = algorithm_from_config({"preset": "grpo", "rollout_correction": "truncated"})
    settings = UpdateSettings(pad_id=0, temperature=1.0, micro_batch_size=4, max_grad_norm=1e9, autocast="none")

    def step(advantages):
        model = make_tiny_llama(64, seed=3)
        return update_policy(model, torch.optim.SGD(model.parameters(), lr=0.1), make_batch(advantages), algo, settings)

    idle = step([0.0, 0.0, 0.0, 0.0])
    assert idle["active_rows"] == 0
    assert not [k for k in idle if k.startswith(("correction/", "mismatch/"))]
    busy = step([1.0, -1.0, 0.5, -0.5])
    assert 0 < busy["correction/ratio_mean"] < 1
    assert busy["correction/weight_mean"] == pytest.approx(busy["correction/ratio_mean"])  # every ratio under the cap
    assert busy["correction/kept_frac"] == 1.0
