"""The sampled tokens' log-probs from the last hidden states and a frozen head, a chunk of positions at a time
(rlvr.policy.softmax.head_chosen_logp; rlvr.policy.logprobs.frozen_head): the values and gradients of the whole-logits
path, no (rows, vocabulary) tensor, and the models it must not take (a trainable or wrapped head, a soft-cap)."""

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.policy.logprobs import PromptPass, completion_logprobs, frozen_head
from rlvr.policy.softmax import head_chosen_logp, selective_log_softmax

PAD = 0


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
def test_values_and_gradient_are_the_logits_paths(temperature):
    g = torch.Generator().manual_seed(0)
    h = torch.randn(3, 5, 8, generator=g, dtype=torch.float64).float().requires_grad_()
    w = torch.randn(50, 8, generator=g)
    ids = torch.randint(0, 50, (3, 5), generator=g)
    mask = torch.ones(3, 5)
    mask[1, 3:] = 0
    weights = torch.rand(3, 5, generator=g)  # an incoming gradient that differs position by position
    logits = h @ w.T
    expected = selective_log_softmax(logits / (temperature or 1.0), ids, mask=mask)
    (expected * weights).sum().backward()
    grad_expected, h.grad = h.grad.clone(), None
    got = head_chosen_logp(h, w, ids, temperature, mask=mask, chunk_rows=4)  # chunks of 4 over 13 kept positions
    (got * weights).sum().backward()
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)
    torch.testing.assert_close(h.grad, grad_expected, atol=1e-6, rtol=1e-6)
    assert (got[1, 3:] == 0).all() and (h.grad[1, 3:] == 0).all()  # unscored positions: 0, and no gradient


def test_by_hand_on_two_tokens():
    """H = 1, V = 2: logits (2h, -h); for y = 0, logp = 2h - log(e^{2h} + e^{-h}), d/dh = 2 - (2 e^{2h} - e^{-h}) / Z."""
    h = torch.tensor([[0.5]], requires_grad=True)
    w = torch.tensor([[2.0], [-1.0]])
    logp = head_chosen_logp(h, w, torch.tensor([0]))
    z = torch.tensor([1.0, -0.5])
    assert logp.item() == pytest.approx(1.0 - torch.logsumexp(z, 0).item(), abs=1e-7)
    logp.sum().backward()
    p = torch.softmax(z, 0)
    assert h.grad.item() == pytest.approx(2.0 - (2.0 * p[0] - 1.0 * p[1]).item(), abs=1e-6)


def test_under_bf16_autocast_it_is_the_heads_own_bf16_matmul():
    g = torch.Generator().manual_seed(1)
    h, w = torch.randn(6, 16, generator=g), torch.randn(40, 16, generator=g)
    ids = torch.randint(0, 40, (6,), generator=g)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        expected = selective_log_softmax(h @ w.T, ids)
        got = head_chosen_logp(h, w, ids)
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=1e-6)  # the same bf16 logits, reduced in float32


def _rows():
    prompts = [[5, 6, 7, 8, 9], [10, 11], [5, 6, 7, 8, 9], [12, 13, 14]]
    ids = torch.tensor([[20, 21, 22], [23, 0, 0], [24, 25, 0], [26, 27, 28]])
    return prompts, ids, (ids > 0).float()


@pytest.mark.parametrize("shared", ["", "one graph", "split graph"], ids=["whole rows", "prompt pass", "split graph"])
def test_a_frozen_head_gives_the_logits_paths_log_probs_and_gradients(shared):
    """A LoRA-like model (head frozen, the rest trains): the hidden-state path against the whole-logits path of the same
    model (with_entropy asks for the logits), values and every trainable weight's gradient."""
    prompts, ids, mask = _rows()
    results = []
    for fused in (True, False):
        model = make_tiny_llama(64, seed=3)
        model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone(), requires_grad=False)
        assert (frozen_head(model) is not None) is True
        if shared and fused:
            logp = PromptPass(model, prompts, pad_id=PAD).logprobs(model, prompts, ids, mask, temperature=0.7)
        else:
            logp = completion_logprobs(model, prompts, ids, mask, pad_id=PAD, temperature=0.7, with_entropy=not fused)[
                0
            ]
        (logp * mask * torch.arange(1.0, 5.0)[:, None]).sum().backward()
        results.append((logp.detach() * mask, [p.grad.clone() for p in model.parameters() if p.requires_grad]))
    (a, ga), (b, gb) = results
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5)
    assert len(ga) == len(gb) > 0
    for x, y in zip(ga, gb):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)


def test_the_head_path_makes_no_vocabulary_wide_tensor_for_all_positions():
    """At 4 rows x 6 positions over a 3,000-token vocabulary in chunks of 5 positions, no tensor of 24 x 3,000 exists:
    the largest the forward and backward make on the way is a chunk's 5 x 3,000."""
    from torch.profiler import profile

    model = make_tiny_llama(3000, seed=0)
    model.lm_head.weight = torch.nn.Parameter(model.lm_head.weight.detach().clone(), requires_grad=False)
    backbone, weight = frozen_head(model)
    ids = torch.randint(3, 3000, (4, 6))
    with profile(profile_memory=True, record_shapes=True) as prof:
        hidden = backbone(input_ids=ids).last_hidden_state
        head_chosen_logp(hidden, weight, ids, chunk_rows=5).sum().backward()
    wide = [s for e in prof.events() for s in (e.input_shapes or []) if s and s[-1] == 3000 and s != [32, 3000]]
    assert wide and max(torch.Size(s[:-1]).numel() for s in wide) == 5  # [32, 3000]: the head's weight, transposed


def test_models_the_head_path_must_not_take():
    trainable = make_tiny_llama(64)  # a full fine-tune: the head takes a gradient of its own
    assert frozen_head(trainable) is None
    frozen = make_tiny_llama(64).requires_grad_(False)
    backbone, weight = frozen_head(frozen)
    assert backbone is frozen.model and weight is frozen.lm_head.weight
    from peft import LoraConfig, get_peft_model

    lora = get_peft_model(make_tiny_llama(64), LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    assert frozen_head(lora) is not None  # LoRA elsewhere: the base's head is frozen
    on_head = get_peft_model(make_tiny_llama(64), LoraConfig(r=2, target_modules=["q_proj", "lm_head"]))
    assert frozen_head(on_head) is None  # LoRA on the head: a wrapped layer, not a plain frozen matrix
    from transformers import AutoModelForCausalLM, Gemma2Config

    capped = AutoModelForCausalLM.from_config(
        Gemma2Config(
            vocab_size=64,
            hidden_size=16,
            intermediate_size=32,
            num_hidden_layers=1,
            num_attention_heads=2,
            num_key_value_heads=1,
            head_dim=8,
        )  # fmt: skip
    ).requires_grad_(False)
    assert capped.config.final_logit_softcapping is not None and frozen_head(capped) is None
