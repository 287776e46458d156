"""Presets as data: their values are the papers' choices, and config overrides fail loudly."""

import pytest
import torch

from rlvr.algorithms import PRESETS, Algorithm, algorithm_from_config, get_preset, with_overrides
from rlvr.algorithms.losses import policy_loss
from rlvr.config import ConfigError, as_config

# name: (adv_scale, ratio, clip_low, clip_high, agg, beta, dynamic_sampling, overlong)
PAPER_CHOICES = {
    "grpo": ("group", "token", 0.2, 0.2, "seq-mean-token-mean", 0.0, False, "none"),
    "dapo": ("group", "token", 0.2, 0.28, "token-mean", 0.0, True, "soft"),
    "gspo": ("group", "sequence", 3e-4, 4e-4, "seq-mean-token-mean", 0.0, False, "none"),
    "dr_grpo": ("none", "token", 0.2, 0.2, "seq-mean-token-sum-norm", 0.0, False, "none"),
}


@pytest.mark.parametrize("name", sorted(PAPER_CHOICES))
def test_presets_hold_the_papers_choices(name):
    a = get_preset(name)
    got = (a.adv_scale, a.ratio, a.clip_low, a.clip_high, a.agg, a.beta, a.dynamic_sampling, a.overlong)
    assert got == PAPER_CHOICES[name]
    assert a.name == name


def test_every_preset_is_listed_and_runs_through_the_loss():
    assert set(PRESETS) == set(PAPER_CHOICES)
    logp = torch.zeros(2, 3, requires_grad=True)
    for algo in (entry.value for entry in PRESETS.entries()):
        adv, mask = torch.tensor([1.0, -1.0]), torch.ones(2, 3)
        loss, stats = policy_loss(logp, None, adv, mask, **algo.loss_kwargs())
        assert loss.item() == 0.0  # ratio 1: -A summed over +1 and -1 rows cancels
        assert set(stats) == {"clip/low_frac", "clip/high_frac", "ratio/mean"}


def test_presets_are_frozen():
    with pytest.raises(AttributeError):
        get_preset("dapo").clip_high = 0.5


def test_unknown_preset_lists_the_choices():
    with pytest.raises(ConfigError, match="grpo, dapo, gspo, dr_grpo"):
        get_preset("ppo")


def test_overrides_replace_fields_and_an_int_becomes_a_float():
    a = with_overrides(
        get_preset("dapo"), {"clip_high": 0.3, "beta": 0, "dynamic_sampling": False, "max_sampling_rounds": 5}
    )
    assert (a.clip_high, a.beta, a.dynamic_sampling, a.max_sampling_rounds) == (0.3, 0.0, False, 5)
    assert isinstance(a.beta, float) and a.name == "dapo"
    assert get_preset("dapo").clip_high == 0.28  # the preset itself is untouched


def test_algorithm_keys_are_checked_by_the_rule_that_checks_every_config_key():
    """One rule (rlvr.config.check_value) for algorithm.* and the typed sections: the same messages, and a string is
    not a number here either (YAML and --set read `0.3` as a float; the old string coercion was this section's alone)."""
    with pytest.raises(ConfigError, match=r"^config key 'algorithm.clip_high' must be float, got '0.3'$"):
        with_overrides(get_preset("grpo"), {"clip_high": "0.3"})
    with pytest.raises(ConfigError, match=r"^config key 'train.max_grad_norm' must be float, got '0.3'$"):
        as_config({"train": {"max_grad_norm": "0.3"}})
    # train.lr takes "auto" too (rlvr.config.resolve_auto), and says so
    with pytest.raises(ConfigError, match=r"^config key 'train.lr' must be float or auto, got '0.3'$"):
        as_config({"train": {"lr": "0.3"}})
    with pytest.raises(ConfigError, match=r"^config key 'algorithm.beta' = -0.1; must be >= 0$"):
        algorithm_from_config({"preset": "dapo", "beta": -0.1})
    with pytest.raises(ConfigError, match=r"^config key 'train.weight_decay' = -0.1; must be >= 0$"):
        as_config({"train": {"weight_decay": -0.1}})


@pytest.mark.parametrize(
    "overrides, message",
    [
        ({"clip_hi": 0.3}, "algorithm.clip_hi is not a field; allowed: preset, adv_scale, ratio, surrogate, clip_low"),
        ({"name": "x"}, "algorithm.name is not a field"),
        (
            {"agg": "mean"},
            "algorithm.agg: unknown loss aggregation 'mean'; choose from token-mean, seq-mean-token-mean",
        ),
        (
            {"ratio": "seq"},
            "algorithm.ratio: unknown loss ratio level 'seq'; choose from token, sequence, or package.module:attr",
        ),
        ({"overlong": "cut"}, "algorithm.overlong: unknown overlong shaping 'cut'; choose from none, filter, soft"),
        ({"clip_high": "wide"}, "config key 'algorithm.clip_high' must be float, got 'wide'"),
        ({"max_sampling_rounds": 2.5}, "config key 'algorithm.max_sampling_rounds' must be int, got 2.5"),
        ({"dynamic_sampling": "maybe"}, "config key 'algorithm.dynamic_sampling' must be bool, got 'maybe'"),
        ({"dynamic_sampling": 1}, "config key 'algorithm.dynamic_sampling' must be bool, got 1"),
        ({"beta": -0.1}, "config key 'algorithm.beta' = -0.1; must be >= 0"),
        ({"clip_low": 1.0}, "config key 'algorithm.clip_low' = 1.0; must be >= 0 and < 1"),
        ({"overlong_buffer_frac": 1.5}, "config key 'algorithm.overlong_buffer_frac' = 1.5; must be >= 0 and <= 1"),
        ({"correction_cap": 1}, "config key 'algorithm.correction_cap' = 1; must be > 1"),
        ({"max_sampling_rounds": 0}, "config key 'algorithm.max_sampling_rounds' = 0; must be >= 1"),
    ],
)
def test_bad_overrides_name_the_key(overrides, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(".", r"\.")):
        with_overrides(get_preset("grpo"), overrides)


def test_algorithm_from_config_forms():
    assert algorithm_from_config(None) == get_preset("grpo")
    assert algorithm_from_config("gspo") == get_preset("gspo")
    a = algorithm_from_config({"preset": "dr_grpo", "beta": 0.04})
    assert (a.name, a.adv_scale, a.beta) == ("dr_grpo", "none", 0.04)
    with pytest.raises(ConfigError, match="must be a preset name or a mapping"):
        algorithm_from_config(3)


def test_overlong_buffer_in_tokens():
    # DAPO: 4096 of 20480 tokens is 20%
    assert get_preset("dapo").overlong_buffer(20480) == 4096
    assert get_preset("dapo").overlong_buffer(256) == 51


def test_direct_construction_is_validated_too():
    with pytest.raises(ConfigError, match="adv_scale"):
        Algorithm(name="x", adv_scale="rank")
    with pytest.raises(ConfigError, match=r"^config key 'algorithm.clip_low' = -0.5; must be >= 0 and < 1$"):
        Algorithm(name="x", clip_low=-0.5)
    assert isinstance(Algorithm(name="x", beta=1).beta, float)
