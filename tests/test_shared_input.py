"""rlvr_bench.shared_input (an experiment, not rlvr's update: docs/performance.md): q|k|v and gate|up run as one
matmul each in the update, on every family the fast sampler runs, computing each member's own function (float32 within the rounding of a reblocked product, bf16 forward exact,
bf16 gradients within bf16's rounding), holding no second copy of the weights, leaving nothing pending after a
forward, stepping aside where it does not apply, and saving a merged model that loads."""

import copy

import pytest
import torch

from conftest import FAST_FAMILIES
from rlvr.policy.fastpath import prepare_for_update
from rlvr.policy.load import cast_frozen_base, save_policy
from rlvr_bench.shared_input import fuse_shared_inputs, separate_shared_inputs
from test_fastpath import batch, lora_model, loss_and_grads, settings

# groups of the tiny models (2 layers): q|k|v and gate|up a layer; Qwen3.5's first layer is a delta-net layer (no q/k/v
# projections: its in_proj_qkv is already one matmul), its second full attention
GROUPS = {"llama": 4, "qwen3": 4, "smollm3": 4, "gemma3_text": 4, "qwen3_5_text": 3}

MEMBERS = {"llama": 10, "qwen3": 10, "smollm3": 10, "gemma3_text": 10, "qwen3_5_text": 7}


def pair(family, autocast):
    """(fused, separate): the same LoRA model prepared for the update, the first with its groups fused."""
    fused, separate = lora_model(family=family), lora_model(family=family)
    prepare_for_update(fused, settings(autocast=autocast))
    prepare_for_update(separate, settings(autocast=autocast))
    assert fuse_shared_inputs(fused) == GROUPS[family]
    fused.train(), separate.train()
    return fused, separate


def members(model):
    return [m for m in model.modules() if hasattr(m, "_rlvr_group")]


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_float32_is_each_layers_own_function(family):
    """float32: logits within 1e-6 of the separate layers' (only the product's blocking differs), every LoRA
    gradient within 1e-5 of its largest entry."""
    fused, separate = pair(family, "none")
    got_logits, got = loss_and_grads(fused, autocast=False)
    want_logits, want = loss_and_grads(separate, autocast=False)
    assert (got_logits - want_logits).abs().max() <= 1e-6 * max(1.0, float(want_logits.abs().max()))
    for name, g in want.items():
        assert (got[name] - g).abs().max() <= 1e-5 * float(g.abs().max()), name
    assert all(m._rlvr_group.pending is None for m in members(fused))  # every output handed on


@pytest.mark.parametrize("family", FAST_FAMILIES)
def test_bf16_forward_is_exact_and_gradients_within_bf16_rounding(family):
    """Under bf16 autocast the forward is the separate layers' bit for bit (each output element is the same dot
    product); the input's gradient is one product over the group's outputs where the separate layers added three
    bf16-rounded ones, so the LoRA gradients move by bf16 rounding: within 3% of each tensor's largest entry
    (measured 0.7-1.4% on these models)."""
    fused, separate = pair(family, "bfloat16")
    got_logits, got = loss_and_grads(fused)
    want_logits, want = loss_and_grads(separate)
    assert torch.equal(got_logits, want_logits)
    worst = max(float((got[n] - g).abs().max() / g.abs().max()) for n, g in want.items())
    assert 0 < worst <= 0.03  # 0 would mean the fused backward never ran


def test_the_weights_are_views_of_one_tensor_not_a_copy():
    model = lora_model()
    prepare_for_update(model, settings(autocast="none"))
    fuse_shared_inputs(model)
    for m in members(model):
        group = m._rlvr_group
        assert m.base_layer.weight.untyped_storage().data_ptr() == group.weight.untyped_storage().data_ptr()
    q = model.base_model.model.model.layers[0].self_attn.q_proj
    k = model.base_model.model.model.layers[0].self_attn.k_proj
    assert (
        q._rlvr_group is k._rlvr_group
        and q._rlvr_group.weight.shape[0] == q.base_layer.weight.shape[0] + k.base_layer.weight.shape[0] * 2
    )
    assert fuse_shared_inputs(model) == 0  # once


def test_steps_aside_for_the_reference_and_refuses_replaced_weights():
    """Adapters off (the KL reference): each layer's own forward, exactly the separate model's. Weights given new
        tensors (cast to bf16, as the trainer's are): a float32 input outside autocast runs each layer alone (rounding
        as autocast would, stored_linear_forward); under autocast the group is fused again from the new tensors (this
    model runs peft's LoRA sum, three bf16 roundings, where the fused group rounds once: within bf16's rounding)."""
    fused, separate = pair("llama", "none")
    with torch.no_grad(), fused.disable_adapter(), separate.disable_adapter():
        assert torch.equal(fused(**batch()).logits, separate(**batch()).logits)
    cast_frozen_base(fused, torch.bfloat16), cast_frozen_base(separate, torch.bfloat16)
    assert not any(m._rlvr_group.intact() for m in members(fused))
    with torch.no_grad():
        assert torch.equal(fused(**batch()).logits, separate(**batch()).logits)
    assert not any(m._rlvr_group.intact() for m in members(fused))
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):  # the LoRA sum rounded once, not thrice
        got, want = fused(**batch()).logits.float(), separate(**batch()).logits.float()
        assert (got - want).abs().max() <= 0.02 * float(want.abs().max())
    assert all(m._rlvr_group.intact() and m._rlvr_group.weight.dtype == torch.bfloat16 for m in members(fused))


def test_a_deep_copy_computes_the_same_and_fuses_again():
    """nn.Parameter's deep copy copies each weight alone: the copy's groups fuse again at their first call."""
    fused, _ = pair("qwen3", "none")
    fused(**batch())
    twin = copy.deepcopy(fused)
    assert members(twin)[0]._rlvr_group is not members(fused)[0]._rlvr_group
    with torch.no_grad():
        assert torch.equal(twin(**batch()).logits, fused(**batch()).logits)
    assert all(m._rlvr_group.intact() for m in members(twin))


@pytest.mark.parametrize("autocast", ["none", "bfloat16"])
def test_the_merged_model_saves_and_loads(tmp_path, autocast, tokenizer):
    """save_policy's merged copy (a deep copy: nn.Parameter's gives each weight its own tensor, which safetensors
    needs) loads as a plain transformers model computing the LoRA model's function; the model keeps its groups."""
    from transformers import AutoModelForCausalLM

    fused, _ = pair("llama", autocast)
    save_policy(fused, tokenizer, tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path / "merged", dtype=torch.float32)
    real = batch()["attention_mask"].bool()  # padded positions: each attention's own convention
    with torch.no_grad():
        want = fused(**batch()).logits[real]
        got = loaded(**batch()).logits[real]
    bound = 1e-5 if autocast == "none" else 0.05  # bf16: the stored base is bf16, the merge float32
    assert (got - want).abs().max() <= bound * max(1.0, float(want.abs().max()))
    assert all(m._rlvr_group.intact() for m in members(fused))


def test_members_of_different_scalings_run_their_own_b_products():
    """peft's alpha_pattern / rank_pattern can give the members of a group different scalings: the B products are
    then one a member (the block-diagonal product takes one scaling), the same function (float32 to 1e-6)."""
    fused, separate = pair("llama", "none")
    for model in (fused, separate):
        for layer in model.base_model.model.model.layers:
            layer.self_attn.k_proj.scaling["default"] = 0.5
    got, _ = loss_and_grads(fused, autocast=False)
    want, _ = loss_and_grads(separate, autocast=False)
    assert (got - want).abs().max() <= 1e-6 * max(1.0, float(want.abs().max()))
    q = fused.base_model.model.model.layers[0].self_attn.q_proj
    assert q._rlvr_group.pending is None and q.scaling["default"] != 0.5


@pytest.mark.parametrize("family", ["llama", "qwen3_5_text"])
def test_separating_restores_each_layers_own_forward(family):
    """The A/B of update_profile.py undoes the groups: every member its own tensor and forward, the separate
    model's function bit for bit."""
    fused, separate = pair(family, "bfloat16")
    assert separate_shared_inputs(fused) == MEMBERS[family] and not members(fused)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        assert torch.equal(fused(**batch()).logits, separate(**batch()).logits)
    assert fuse_shared_inputs(fused) == GROUPS[family]  # and fused again
