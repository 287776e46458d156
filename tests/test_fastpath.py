"""rlvr.policy.fastpath: under bf16 autocast the fast path computes the plain autocast forward (to bf16 rounding),
stores the frozen base in bf16 without losing the adapter's precision in merges, and steps aside where it
does not apply (no autocast, adapters off, dropout, FSDP). The forward checks run on each family the fast sampler
runs (conftest.make_tiny_model: Qwen3's per-head q/k norms, SmolLM3's layers without RoPE, Gemma 3's norms around
attention and MLP and its sliding windows, which reach rlvr's attention through the mask)."""

import contextlib
import copy
from types import SimpleNamespace

import pytest
import torch

from conftest import FAST_FAMILIES, make_tiny_llama, make_tiny_model
from rlvr.policy.fastpath import cast_norm_outputs, fuse_lora_forward, prepare_for_update
from rlvr.policy.load import add_lora, cast_frozen_base, save_policy
from rlvr.sampling.weights import merged_state_dict

VOCAB = 300


def lora_model(seed=0, dropout=0.0, family="llama"):
    model = add_lora(make_tiny_model(family, VOCAB, seed=seed), r=4, alpha=8, dropout=dropout)
    g = torch.Generator().manual_seed(seed + 1)
    for name, p in model.named_parameters():
        if "lora_B" in name:  # peft starts B at zero; a trained adapter is not
            p.data = torch.randn(p.shape, generator=g) * 0.05
    return model


def settings(autocast="bfloat16", attention="auto", fsdp=False, gradient_checkpointing=False):
    return SimpleNamespace(
        autocast=autocast, attention=attention, fsdp=fsdp, gradient_checkpointing=gradient_checkpointing
    )


def batch():
    ids = torch.randint(3, VOCAB, (3, 11), generator=torch.Generator().manual_seed(7))
    att = torch.ones(3, 11, dtype=torch.long)
    att[1, :4] = 0
    return dict(input_ids=ids, attention_mask=att, position_ids=(att.cumsum(-1) - 1).clamp(min=0))


def loss_and_grads(model, autocast=True):
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
        logits = model(**batch()).logits
    real = batch()["attention_mask"].bool()
    loss = logits[real].float().logsumexp(-1).mean()
    loss.backward()
    return logits[real].float().detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad}


# RMSNorms of the tiny models: 2 a layer and the final one; Qwen3's q/k; Gemma 3's 4 a layer and its q/k (its output
# norms take bf16 matmul outputs and return bf16, as the plain autocast forward does: left alone by the hook); Qwen3.5's
# attention layer has q/k norms, its delta-net layer a gated norm that is not hooked (its input is the rule's bf16
# output, not the stream)
NORMS = {"llama": 5, "qwen3": 9, "smollm3": 5, "gemma3_text": 13, "qwen3_5_text": 7}
# LoRA-wrapped linear layers: 7 a Llama layer (q, k, v, o, gate, up, down); Qwen3.5's delta-net layer has 8 (in_proj
# qkv, z, b, a; out_proj; the MLP's three)
LINEARS = {"llama": 14, "qwen3": 14, "smollm3": 14, "gemma3_text": 14, "qwen3_5_text": 15}


# (logits, gradients) bounds of the fast path against the plain autocast forward, relative to the largest entry. Gemma 3's
# tiny model is further from float32 in bf16 whatever runs it: its plain autocast forward is 2.4% of the largest logit
# and 4.4% of a gradient's largest entry from its float32 forward (Qwen3's: 0.7% and 2.0%), and the fast path 2.3% and
# 5.9% from the plain autocast forward (rlvr's attention alone 1.7%, as transformers' eager attention; the fused LoRA
# sum, one rounding for three, 3.2%).
BOUNDS = {"gemma3_text": (4e-2, 1e-1)}


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_bf16_fast_path_matches_plain_autocast(family):
    plain, fast = lora_model(family=family), lora_model(family=family)
    applied = prepare_for_update(fast, settings())
    assert applied == {
        "attention": "rlvr_cpu",
        "bf16_frozen_linears": LINEARS[family],
        "bf16_frozen_head": True,
        "bf16_norm_outputs": NORMS[family],
        "fused_lora": LINEARS[family],
    }
    want_logits, want_grads = loss_and_grads(plain)
    got_logits, got_grads = loss_and_grads(fast)
    scale = float(want_logits.abs().max())
    logits_bound, grad_bound = BOUNDS.get(family, (2e-2, 5e-2))
    assert (got_logits - want_logits).abs().max() < logits_bound * scale
    for name, g in want_grads.items():
        assert (got_grads[name] - g).abs().max() < grad_bound * float(g.abs().max()) + 1e-6, name


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_no_autocast_changes_only_the_attention(family):
    """rlvr's attention computes the model's own on each family (Qwen3 normalises q and k before calling it, SmolLM3
    calls it with q and k unrotated on its no-RoPE layers): float32 logits to 1e-4."""
    model = lora_model(family=family)
    applied = prepare_for_update(model, settings(autocast="none"))
    assert applied == {"attention": "rlvr_cpu"}
    assert all(p.dtype == torch.float32 for p in model.parameters())
    want, _ = loss_and_grads(lora_model(family=family), autocast=False)
    got, _ = loss_and_grads(model, autocast=False)
    assert (got - want).abs().max() < 1e-4


def test_fsdp_keeps_one_dtype():
    model = lora_model()
    applied = prepare_for_update(model, settings(fsdp=True, attention="model"))
    assert "bf16_frozen_linears" not in applied
    assert {p.dtype for p in model.parameters()} == {torch.float32}


def test_frozen_base_in_bf16_keeps_the_adapter_trainable_in_float32():
    model = lora_model()
    assert cast_frozen_base(model, torch.bfloat16) == 14
    for name, p in model.named_parameters():
        if "base_layer" in name:
            assert p.dtype == torch.bfloat16 and not p.requires_grad
        if "lora_" in name:
            assert p.dtype == torch.float32 and p.requires_grad
    assert model.get_input_embeddings().weight.dtype == torch.float32


def test_a_bf16_stored_base_runs_outside_autocast_as_each_layer_runs_under_it():
    """The update's model (prepare_for_update under bf16 autocast: base linears stored in bf16, LoRA fused) called
    without autocast, as the remote backend's server check and any other caller may: each stored layer computes
    exactly what autocast computes for it (the bf16 product, handed back in float32), and the whole forward is the
    model's, with or without its adapter: within bf16 rounding of the autocast forward, and far from another model's."""
    model = lora_model()
    prepare_for_update(model, settings())
    layer = model.base_model.model.model.layers[0].self_attn.q_proj.base_layer
    x = torch.randn(5, 32, generator=torch.Generator().manual_seed(3))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        want = layer(x)
    got = layer(x)
    assert got.dtype == torch.float32 and want.dtype == torch.bfloat16 and torch.equal(got, want.float())
    ids = batch()["input_ids"]
    other = lora_model(seed=5)
    for off in (False, True):
        with torch.no_grad(), model.disable_adapter() if off else contextlib.nullcontext():
            with torch.autocast("cpu", dtype=torch.bfloat16):
                under = model(ids).logits.float()
            outside = model(ids).logits
        with torch.no_grad(), other.disable_adapter() if off else contextlib.nullcontext():
            elsewhere = other(ids).logits
        assert outside.dtype == torch.float32
        scale = float(under.abs().max())
        assert (outside - under).abs().max() < 2e-2 * scale
        assert (elsewhere - under).abs().max() > 0.2 * scale


def test_merges_add_the_delta_in_float32_to_the_bf16_base(tmp_path, tokenizer):
    """A small delta added in bf16 would be mostly rounded away: the merge upcasts the stored base first,
    in the sampler's weights and in the saved model alike."""
    model = lora_model()
    cast_frozen_base(model, torch.bfloat16)
    layer = model.base_model.model.model.layers[0].self_attn.q_proj
    delta = layer.get_delta_weight("default")
    want = layer.base_layer.weight.float() + delta
    merged = merged_state_dict(model)["model.layers.0.self_attn.q_proj.weight"]
    assert merged.dtype == torch.float32 and torch.equal(merged, want)
    assert not torch.equal((layer.base_layer.weight + delta.bfloat16()).float(), want)  # what a bf16 merge gives
    save_policy(model, tokenizer, tmp_path)
    from safetensors.torch import load_file

    saved = load_file(tmp_path / "merged" / "model.safetensors")["model.layers.0.self_attn.q_proj.weight"]
    assert saved.dtype == torch.float32 and torch.equal(saved, want)
    assert layer.base_layer.weight.dtype == torch.bfloat16  # the trainer's model is untouched by the save


def test_norm_outputs_are_bf16_only_under_autocast():
    model = make_tiny_llama(VOCAB)
    assert cast_norm_outputs(model, torch.bfloat16) == 5  # 2 per layer + the final norm
    norm = model.model.norm
    x = torch.randn(2, 32)
    assert norm(x).dtype == torch.float32
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert norm(x).dtype == torch.bfloat16


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_norm_outputs_keep_the_plain_autocast_arithmetic(family):
    """Casting the norms' outputs moves a rounding, never changes one: under autocast the logits are the plain
    forward's bit for bit. Qwen3's per-head q_norm and k_norm (fed by the bf16 q and k projections) hand RoPE their
    float32 output as the plain forward does; cast to bf16 as well, they changed half the logits, by up to 4e-3."""
    plain, hooked = make_tiny_model(family, VOCAB), make_tiny_model(family, VOCAB)
    assert cast_norm_outputs(hooked, torch.bfloat16) == NORMS[family]
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(hooked(**batch()).logits, plain(**batch()).logits)


@pytest.mark.parametrize("case", ["disabled", "dropout"])
def test_fused_forward_steps_aside(case):
    """Adapters switched off (the KL reference) or dropout on: peft's own forward, exactly."""
    model = lora_model(dropout=0.1 if case == "dropout" else 0.0)
    reference = copy.deepcopy(model)
    assert fuse_lora_forward(model) == 14
    model.eval(), reference.eval()  # dropout off in eval: the two must agree exactly
    if case == "disabled":
        with model.disable_adapter(), reference.disable_adapter():
            assert torch.equal(model(**batch()).logits, reference(**batch()).logits)
    else:
        assert torch.equal(model(**batch()).logits, reference(**batch()).logits)


def test_gradient_checkpointing_gives_the_same_gradients():
    """Recomputing the layers in the backward changes memory, not the result (float32, exact to 1e-6)."""
    plain, ckpt = lora_model(), lora_model()
    prepare_for_update(plain, settings(autocast="none"))
    applied = prepare_for_update(ckpt, settings(autocast="none", gradient_checkpointing=True))
    assert applied["gradient_checkpointing"] is True
    plain.train(), ckpt.train()
    _, want = loss_and_grads(plain, autocast=False)
    _, got = loss_and_grads(ckpt, autocast=False)
    for name, g in want.items():
        assert (got[name] - g).abs().max() <= 1e-6 * max(1.0, float(g.abs().max())), name


def test_applying_twice_changes_nothing():
    """A second prepare (e.g. a caller that prepares again) must not stack hooks or wrap the fused forward in
    itself: the counts say nothing new was done, and the forward still matches a once-prepared model."""
    once, twice = lora_model(), lora_model()
    prepare_for_update(once, settings())
    prepare_for_update(twice, settings())
    again = prepare_for_update(twice, settings())
    assert again["bf16_norm_outputs"] == 0 and again["fused_lora"] == 0
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(once(**batch()).logits, twice(**batch()).logits)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16), twice.disable_adapter():
        assert torch.isfinite(twice(**batch()).logits).all()  # the fallback still reaches peft's own forward


def test_frozen_head_cast_once_is_autocasts_cast_and_follows_the_weight():
    from rlvr.policy.fastpath import cache_frozen_head_cast

    plain, cached = lora_model(), lora_model()
    assert cache_frozen_head_cast(cached, torch.bfloat16) and not cache_frozen_head_cast(cached, torch.bfloat16)
    head = cached.get_output_embeddings()
    for _ in range(2):  # the copy is made once and reused: bitwise the logits of plain autocast
        with torch.autocast("cpu", dtype=torch.bfloat16):
            assert torch.equal(cached(**batch()).logits, plain(**batch()).logits)
    assert head._rlvr_cast[1].dtype == torch.bfloat16
    with torch.no_grad():  # the weight changed in place (its version moves): a fresh copy, not a stale one
        for m in (plain, cached):
            m.get_output_embeddings().weight.mul_(1.5)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(cached(**batch()).logits, plain(**batch()).logits)
    assert torch.equal(cached(**batch()).logits, plain(**batch()).logits)  # no autocast: the float32 head
    # a trainable head (full fine-tune) is left to autocast
    full = make_tiny_llama(VOCAB)
    assert not cache_frozen_head_cast(full, torch.bfloat16)
