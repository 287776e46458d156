"""The model families the fast sampler runs (rlvr.sampling.llama's forward; rlvr.sampling.qwen3_5's for a `recurrent`
one), by the config's `model_type`, and what each needs beyond the layout they share.

The shared layout: token embedding; per layer an RMSNorm, q/k/v projections (biases allowed on these three only),
RoPE on q and k, softmax attention (grouped-query allowed), o_proj, the residual sum, an RMSNorm, silu(gate) * up,
down_proj, the residual sum; a final RMSNorm and an output head, tied to the embedding or not. An entry says what its
family's layers add to it, as fields the weight reader and the forward read (so no caller tests a family's name):

- `qk_norm`: a per-head RMSNorm of q and of k (self_attn.q_norm, self_attn.k_norm, over head_dim, the model's
  rms_norm_eps) between the projection and RoPE;
- `rope_layers(config)`: which layers rotate q and k (SmolLM3 leaves every fourth layer without position encoding);
- `refuse(config)`: a reason its forward would not match a setting of this family, or None;
- Gemma 3's pieces: `act_key` (the config attribute naming the MLP's activation), `offset_norms` (RMSNorms whose
  weight w scales by 1 + w, the product rounded), `sandwich_norms` (the attention's and the MLP's outputs normed before
  the residual sum), `embed_scale(config)` (the embedding's rows times a constant), `query_scale(config)` (the softmax
  scale, where it is not 1/sqrt(head_dim)), `layer_rope` (each layer type its own rotary table) and `windows` (the
  sliding windows of `layer_types` applied, not refused).
- `recurrent`: the family's layers are not all attention: gated delta-net (linear attention, a recurrent state per
  row) between gated full-attention layers, run by rlvr.sampling.qwen3_5's own forward and states (Qwen3.5).

A family with a piece the forward lacks gets a new field here, read where the weights are read
(llama.load_weights) and used in llama.forward. `check_supported` holds the checks that apply to every family (the
activation, the rope type, a live sliding window where the family does not apply it) and asks the entry for its own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from rlvr.registry import Registry

STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # position-independent tables; "dynamic" rescales with length
ACTIVATIONS = ("silu", "gelu_pytorch_tanh")  # the MLP's act(gate) * up, as llama.forward computes each


class Unsupported(ValueError):
    """The model is not one the hand-written forward can run exactly."""


def _every_layer(config) -> list[bool]:
    return [True] * config.num_hidden_layers


def _nothing_refused(config) -> str | None:
    return None


@dataclass(frozen=True)
class Family:
    qk_norm: bool = False  # per-head RMSNorm of q and k before RoPE (Layer.qk_norm)
    rope_layers: Callable[[Any], list[bool]] = field(default=_every_layer)  # config -> per layer: rotates? (Layer.rope)
    refuse: Callable[[Any], str | None] = field(default=_nothing_refused)  # config -> why not, or None
    act_key: str = "hidden_act"  # the config attribute naming the MLP's activation (LlamaWeights.act)
    offset_norms: bool = False  # every RMSNorm scales by 1 + w, rounded after the weight (Gemma3RMSNorm)
    sandwich_norms: bool = False  # attention and MLP outputs normed before the residual sum (Layer.post_attn, post_mlp)
    embed_scale: Callable[[Any], float] | None = None  # config -> the embedding rows' factor (LlamaWeights.embed)
    query_scale: Callable[[Any], float] | None = None  # config -> the softmax scale; None: 1/sqrt(head_dim)
    layer_rope: bool = False  # each layer type rotates with its own table (Layer.local, LlamaWeights.local_rope)
    windows: bool = False  # sliding windows applied (Layer.window), where check_supported refuses them for others
    recurrent: bool = False  # gated delta-net layers beside attention: rlvr.sampling.qwen3_5 runs it


def _smollm3_rope_layers(config) -> list[bool]:
    # transformers' SmolLM3Attention: `use_rope = config.no_rope_layers[layer_idx]`, 0 = no RoPE on that layer
    return [bool(x) for x in config.no_rope_layers]


def _qwen3_5_refused(config) -> str | None:
    kinds = set(config.layer_types) - {"linear_attention", "full_attention"}
    if kinds:
        return f"layer_types {sorted(kinds)} (Qwen3.5: linear_attention and full_attention only)"
    if config.attention_bias:
        return "attention_bias (Qwen3.5's attention projections without biases only)"
    return None


# model_type -> Family. Not a user's extension point (the model names its type), so not listed by `rlvr list`.
FAMILIES: Registry[Family] = Registry("fast sampler family", key="model_type", listed=False)
FAMILIES.add("llama", Family(), "Llama 1-3 (and any model that says it is one)")
FAMILIES.add("mistral", Family(), "Mistral; its sliding window is not applied (exact within the window)")
FAMILIES.add("qwen2", Family(), "Qwen2 and Qwen2.5: biases on q, k and v")
FAMILIES.add("qwen3", Family(qk_norm=True), "Qwen3 (dense): a per-head RMSNorm of q and k before RoPE")
FAMILIES.add("smollm3", Family(rope_layers=_smollm3_rope_layers), "SmolLM3: no RoPE on its no_rope_layers")


def _gemma3_refuse(config) -> str | None:
    # transformers' Gemma3Attention stores attn_logit_softcapping without applying it, and no released Gemma 3 sets
    # either cap: a config that does is refused (and samples with hf, whatever transformers makes of it)
    for key in ("attn_logit_softcapping", "final_logit_softcapping"):
        if getattr(config, key, None) is not None:
            return f"{key}={getattr(config, key)} (the forward caps no logits; no released Gemma 3 sets one)"
    if getattr(config, "use_bidirectional_attention", False):
        return "use_bidirectional_attention (the forward is causal)"
    return None


FAMILIES.add(
    "gemma3_text",
    Family(
        qk_norm=True,
        refuse=_gemma3_refuse,
        act_key="hidden_activation",
        offset_norms=True,
        sandwich_norms=True,
        embed_scale=lambda config: config.hidden_size**0.5,
        query_scale=lambda config: config.query_pre_attn_scalar**-0.5,
        layer_rope=True,
        windows=True,
    ),
    "Gemma 3 text (270M, 1B; the text model of the larger ones): (1 + w) norms around attention and MLP, GELU-tanh, "
    "sliding-window and global layers with their own RoPE bases",
)
FAMILIES.add(
    "qwen3_5_text",
    Family(recurrent=True, refuse=_qwen3_5_refused),
    "Qwen3.5 (dense): gated delta-net layers and gated full attention with partial RoPE",
)


def family_of(config) -> Family:
    """The entry for the config's model_type; Unsupported naming the families where there is none."""
    kind = getattr(config, "model_type", None)
    if not isinstance(kind, str) or kind not in FAMILIES:
        raise Unsupported(f"model_type {kind!r} (supported: {', '.join(FAMILIES.names())})")
    return FAMILIES[kind]


def check_supported(config) -> Family:
    """Raise Unsupported with the reason when the hand-written forward would not match the model; else its family."""
    family = family_of(config)
    act = getattr(config, family.act_key, "silu")
    if act not in ACTIVATIONS:
        raise Unsupported(f"{family.act_key} {act!r} (supported: {', '.join(ACTIVATIONS)})")
    for rope in _rope_parameters(config):
        if rope.get("rope_type", "default") not in STATIC_ROPE:
            raise Unsupported(f"rope_type {rope.get('rope_type')!r} (supported: {', '.join(STATIC_ROPE)})")
    sliding = sliding_layers(config)
    if sliding and not family.windows:
        raise Unsupported(f"sliding-window attention (sliding_window={config.sliding_window} on layers {sliding})")
    why = family.refuse(config)
    if why:
        raise Unsupported(why)
    return family


def _rope_parameters(config) -> list[dict]:
    """The config's rotary settings: one dict, or one per layer type (Gemma 3's `rope_parameters` by layer type)."""
    rope = getattr(config, "rope_parameters", None) or {"rope_type": "default"}
    nested = [v for v in rope.values() if isinstance(v, dict)]
    return nested if nested and len(nested) == len(rope) else [rope]


def layer_windows(config) -> list[int | None]:
    """Each layer's sliding window (sliding_layers), for a family that applies them (`windows`); None elsewhere."""
    sliding = set(sliding_layers(config)) if family_of(config).windows else set()
    return [config.sliding_window if i in sliding else None for i in range(config.num_hidden_layers)]


def local_rope_layers(config) -> list[bool]:
    """Which layers rotate with the sliding layers' own table, for a family with `layer_rope` (Gemma 3's
    rope_local_base_freq); none elsewhere."""
    types = (getattr(config, "layer_types", None) or []) if family_of(config).layer_rope else []
    return [i < len(types) and types[i] == "sliding_attention" for i in range(config.num_hidden_layers)]


def sliding_layers(config) -> list[int]:
    """The layers that attend through a sliding window, as transformers' masks do: those `layer_types` calls
    "sliding_attention" while the config has a window (Qwen2 and Qwen3 set it with use_sliding_window, from
    max_window_layers on). Mistral names no layer types: its window is not seen here."""
    if getattr(config, "sliding_window", None) is None:
        return []
    return [i for i, kind in enumerate(getattr(config, "layer_types", None) or []) if kind == "sliding_attention"]


__all__ = [
    "ACTIVATIONS",
    "FAMILIES",
    "STATIC_ROPE",
    "Family",
    "Unsupported",
    "check_supported",
    "family_of",
    "layer_windows",
    "local_rope_layers",
    "sliding_layers",
]
