"""A hand-written forward for the Llama family (Llama, Mistral without a live sliding window, Qwen2),
used by the fast sampler. Reads the weights out of the HF model once per sync; per-layer work is a
handful of fused matmuls (q|k|v in one, gate|up in one), so Python overhead stays small at 135M scale.

Precision: matmuls in the compute dtype (bf16 on CPUs with AVX512-BF16/AMX); the residual stream,
RMSNorm, RoPE and softmax in float32. Shapes: N tokens, H hidden, Hq / Hkv heads, D head dim.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import torch
import torch.nn.functional as F

from .weights import merged_state_dict, plain_config

SUPPORTED = ("llama", "mistral", "qwen2")
STATIC_ROPE = ("default", "linear", "llama3", "yarn")  # position-independent tables; "dynamic" rescales with length


class Unsupported(ValueError):
    """The model is not one the hand-written forward can run exactly."""


@dataclass
class Layer:
    ln1: torch.Tensor  # (H,) float32
    wqkv: torch.Tensor  # ((Hq + 2 Hkv) D, H)
    bqkv: torch.Tensor | None
    wo: torch.Tensor  # (H, Hq D)
    ln2: torch.Tensor  # (H,) float32
    wgu: torch.Tensor  # (2 I, H): gate rows then up rows
    wd: torch.Tensor  # (H, I)


@dataclass
class LlamaWeights:
    embed: torch.Tensor  # (V, H) float32 (rows are gathered, never multiplied)
    layers: list[Layer]
    norm: torch.Tensor  # (H,) float32
    lm_head: torch.Tensor  # (V, H) compute dtype
    n_heads: int
    n_kv: int
    head_dim: int
    eps: float
    inv_freq: torch.Tensor  # (D/2,) float32
    rope_scale: float  # attention_scaling of the rope type (1.0 for default)
    dtype: torch.dtype


def check_supported(config) -> None:
    """Raise Unsupported with the reason when the hand-written forward would not match the model."""
    kind = getattr(config, "model_type", None)
    if kind not in SUPPORTED:
        raise Unsupported(f"model_type {kind!r} (supported: {', '.join(SUPPORTED)})")
    if getattr(config, "hidden_act", "silu") != "silu":
        raise Unsupported(f"hidden_act {config.hidden_act!r} (only silu)")
    rope = getattr(config, "rope_parameters", None) or {"rope_type": "default"}
    if rope.get("rope_type", "default") not in STATIC_ROPE:
        raise Unsupported(f"rope_type {rope.get('rope_type')!r} (supported: {', '.join(STATIC_ROPE)})")
    if kind == "qwen2" and getattr(config, "use_sliding_window", False):
        raise Unsupported("Qwen2 with use_sliding_window=True")


def load_weights(model, dtype: torch.dtype) -> LlamaWeights:
    """Pull (LoRA-merged) weights from a transformers or peft model into the fused layout above."""
    config = plain_config(model)
    check_supported(config)
    sd = merged_state_dict(model)
    f32 = lambda k: sd[k].detach().to(torch.float32).contiguous()  # noqa: E731
    cd = lambda t: t.detach().to(dtype).contiguous()  # noqa: E731
    layers = []
    for i in range(config.num_hidden_layers):
        p = f"model.layers.{i}."
        qkv = [sd[f"{p}self_attn.{x}_proj.weight"] for x in "qkv"]
        biases = [sd.get(f"{p}self_attn.{x}_proj.bias") for x in "qkv"]
        if any(sd.get(f"{p}{n}.bias") is not None for n in ("self_attn.o_proj", "mlp.gate_proj", "mlp.down_proj")):
            raise Unsupported("biases on o_proj or the MLP")
        layers.append(Layer(
            ln1=f32(f"{p}input_layernorm.weight"), ln2=f32(f"{p}post_attention_layernorm.weight"),
            wqkv=cd(torch.cat(qkv)), bqkv=cd(torch.cat(biases)) if biases[0] is not None else None,
            wo=cd(sd[f"{p}self_attn.o_proj.weight"]),
            wgu=cd(torch.cat([sd[f"{p}mlp.gate_proj.weight"], sd[f"{p}mlp.up_proj.weight"]])),
            wd=cd(sd[f"{p}mlp.down_proj.weight"]),
        ))
    head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])  # tied embeddings have no own head
    inv_freq, scale = rope_tables(model)
    return LlamaWeights(
        embed=f32("model.embed_tokens.weight"), layers=layers, norm=f32("model.norm.weight"), lm_head=cd(head),
        n_heads=config.num_attention_heads, n_kv=config.num_key_value_heads,
        head_dim=getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads,
        eps=config.rms_norm_eps, inv_freq=inv_freq, rope_scale=scale, dtype=dtype,
    )


def rope_tables(model) -> tuple[torch.Tensor, float]:
    """inv_freq and attention scaling from the model's own rotary module, so every static rope type
    (default, linear, llama3, yarn) comes out exactly as HF computes it."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model
    rotary = base.model.rotary_emb
    return rotary.inv_freq.detach().float().clone(), float(rotary.attention_scaling)


def rope_cos_sin(w: LlamaWeights, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """cos, sin: (N, D) float32 for integer positions (N,)."""
    freqs = positions.float()[:, None] * w.inv_freq[None, :]
    emb = torch.cat((freqs, freqs), dim=-1)
    return emb.cos() * w.rope_scale, emb.sin() * w.rope_scale


def apply_rope(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x: (N, heads, D) float32; cos/sin: (N, D). HF's rotate-half convention."""
    half = x.shape[-1] // 2
    rot = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos[:, None, :] + rot * sin[:, None, :]


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype) -> torch.Tensor:
    """x: (N, H) float32 -> (N, H) in the compute dtype."""
    return (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight).to(dtype)


# attend(layer index, q (N, Hkv, rep, D), k (N, Hkv, D), v (N, Hkv, D)) -> (N, Hq * D), compute dtype
Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def forward(w: LlamaWeights, tokens: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
    """Run N tokens through the decoder; the caller's `attend` owns the KV cache. Returns the final
    normed hidden states (N, H) in the compute dtype (feed to `logits`)."""
    x = w.embed[tokens]  # (N, H) float32 residual stream
    cos, sin = rope_cos_sin(w, positions)
    D, Hq, Hkv = w.head_dim, w.n_heads, w.n_kv
    for i, L in enumerate(w.layers):
        qkv = F.linear(rms_norm(x, L.ln1, w.eps, w.dtype), L.wqkv, L.bqkv).float()
        q, k, v = qkv.split([Hq * D, Hkv * D, Hkv * D], dim=-1)
        q = apply_rope(q.view(-1, Hq, D), cos, sin).to(w.dtype).view(-1, Hkv, Hq // Hkv, D)
        k = apply_rope(k.view(-1, Hkv, D), cos, sin).to(w.dtype)
        x = x + F.linear(attend(i, q, k, v.reshape(-1, Hkv, D).to(w.dtype)), L.wo).float()
        gate, up = F.linear(rms_norm(x, L.ln2, w.eps, w.dtype), L.wgu).chunk(2, dim=-1)
        x = x + F.linear(F.silu(gate) * up, L.wd).float()
    return rms_norm(x, w.norm, w.eps, w.dtype)


def logits(w: LlamaWeights, hidden: torch.Tensor) -> torch.Tensor:
    """hidden (N, H) -> logits (N, V) float32."""
    return F.linear(hidden, w.lm_head).float()


def causal_attend_into(cache_k: torch.Tensor, cache_v: torch.Tensor, scale: float) -> Attend:
    """Attention for one prompt's prefill (causal, no padding) that also fills a per-layer cache.

    cache_k/cache_v: (layers, Hkv, >= N, D) views for this prompt.
    """
    def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        N, Hkv, rep, D = q.shape
        cache_k[i, :, :N] = k.transpose(0, 1)
        cache_v[i, :, :N] = v.transpose(0, 1)
        qh = q.reshape(N, Hkv * rep, D).transpose(0, 1)[None]  # (1, Hq, N, D)
        kh = k.transpose(0, 1).repeat_interleave(rep, dim=0)[None]
        vh = v.transpose(0, 1).repeat_interleave(rep, dim=0)[None]
        out = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True, scale=scale)
        return out[0].transpose(0, 1).reshape(N, Hkv * rep * D)

    return attend


def softmax_scale(w: LlamaWeights) -> float:
    return 1.0 / math.sqrt(w.head_dim)
