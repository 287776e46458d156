"""A hand-written forward for the Llama layout, used by the fast sampler for every family in
rlvr.sampling.families (Llama, Mistral without a live sliding window, Qwen2, Qwen3, SmolLM3, Gemma 3). Reads the
weights out of the HF model once per sync; per-layer work is a handful of fused matmuls (q|k|v in one, gate|up in one),
so Python overhead stays small at 135M scale. A family's own pieces (Qwen3's per-head q/k norms, SmolLM3's layers
without RoPE, Gemma 3's norms around attention and MLP, GELU-tanh, sliding windows and local RoPE table) are fields of
its registry entry, read into each Layer and LlamaWeights.

Precision: matmuls in the compute dtype (bf16 on CPUs with AVX512-BF16/AMX); the residual stream,
RMSNorm, RoPE and softmax in float32. Shapes: N tokens, H hidden, Hq / Hkv heads, D head dim.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from rlvr.policy.load import base_model

from .families import Family, Unsupported, check_supported, layer_windows, local_rope_layers
from .weights import embedding_copy, merged_weights_lazily, plain_config


@dataclass
class Layer:
    ln1: torch.Tensor  # (H,) float32
    wqkv: torch.Tensor  # ((Hq + 2 Hkv) D, H); q and k rows interleaved per head for complex RoPE
    bqkv: torch.Tensor | None
    wo: torch.Tensor  # (H, Hq D)
    ln2: torch.Tensor  # (H,) float32
    wgu: torch.Tensor  # (2 I, H): gate rows then up rows
    wd: torch.Tensor  # (H, I)
    qk_norm: torch.Tensor | None = None  # (Hq + Hkv, D) float32: per-head q, then k norm weights, interleaved
    rope: bool = True  # False: q and k go to attention unrotated (SmolLM3's no-RoPE layers)
    post_attn: torch.Tensor | None = None  # (H,) float32: RMSNorm of the attention's output before the residual sum
    post_mlp: torch.Tensor | None = None  # (H,) float32: the same for the MLP's output (Gemma 3)
    window: int | None = None  # sliding window: a token sees itself and the window - 1 tokens before it
    local: bool = False  # rotates with LlamaWeights.local_rope (Gemma 3's sliding layers), not inv_freq


@dataclass
class LlamaWeights:
    embed: torch.Tensor  # (V, H) float32, or bf16 where every entry is a bf16 value (rows gathered, never multiplied)
    layers: list[Layer]
    norm: torch.Tensor  # (H,) float32
    lm_head: torch.Tensor  # (V, H) compute dtype
    n_heads: int
    n_kv: int
    head_dim: int
    eps: float
    inv_freq: torch.Tensor  # (D/2,) float32
    head_gain: torch.Tensor  # (Hq + Hkv, 1) float32: rope attention_scaling, times 1/sqrt(D) on q heads
    dtype: torch.dtype
    linear: Callable = F.linear  # (x, weight, bias) -> x @ weight.T + bias, for weights as stored here
    fused: Any = None  # rlvr.sampling.native's decode ops (bf16, float32), or None for the torch ops
    act: str = "silu"  # the MLP's act(gate) * up: "silu" or "gelu_pytorch_tanh" (families.ACTIVATIONS)
    local_rope: tuple[torch.Tensor, torch.Tensor] | None = None  # (inv_freq, head_gain) of the Layer.local layers
    qk_round_last: bool = False  # q/k norms round after their weight, (x w).to(dtype) as Gemma3RMSNorm, not before
    embed_scale: torch.Tensor | None = None  # () float32: the gathered rows' factor (Gemma 3's sqrt(H))


def packed_linear(dtype: torch.dtype, batch_hint: int, kernels=None) -> tuple[Callable, Callable] | None:
    """(pack, linear) for weights packed once at load and at each sync, or None where nothing beats F.linear.

    With decode batches of a few dozen rows a step is bound by streaming the weights, and F.linear streams them
    badly: in bf16 it re-lays out the weight on every call, in float32 it hands a few rows to a general matmul (MKL's)
    that runs far under the machine's rate. bf16 uses oneDNN's pre-packed weights (about 1.5x faster, bit-identical
    to F.linear, which is oneDNN's too). float32 uses rlvr's own panel kernel where `kernels` (the native decode ops)
    has it, else oneDNN's packing (2.7-3.9x F.linear at 8 rows on the AVX2 EPYC, but its few-row kernel still reads
    the weights at half the memory's rate; docs/performance.md, "Decode on the AVX2-only kind"). Either changes
    float32's order of sums from MKL's: float32 rounding, ~4e-6 relative. A weight whose rows do not fill panels of
    16 keeps oneDNN's packing.
    """
    onednn = _onednn_linear(dtype, batch_hint)
    if dtype != torch.float32 or kernels is None or not kernels.panel_linear_available():
        return onednn
    pack_rest, linear_rest = onednn or ((lambda w: w), F.linear)
    panel = kernels.panel_linear

    def pack(w: torch.Tensor) -> torch.Tensor:  # (N, K) -> (N / 16, K, 16): the kernel's panels
        N, K = w.shape
        return w.view(N // 16, 16, K).transpose(1, 2).contiguous() if N % 16 == 0 else pack_rest(w)

    def linear(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor | None = None) -> torch.Tensor:
        return panel(x, w, b) if w.dim() == 3 else linear_rest(x, w, b)

    probe, weight = torch.randn(3, 8), torch.randn(16, 8)
    return (
        (pack, linear) if torch.allclose(linear(probe, pack(weight)), F.linear(probe, weight), 1e-5, 1e-6) else onednn
    )


def _onednn_linear(dtype: torch.dtype, batch_hint: int) -> tuple[Callable, Callable] | None:
    """(pack, linear) on oneDNN's pre-packed weights (bf16 or float32), or None where unavailable."""
    if dtype not in (torch.bfloat16, torch.float32) or not torch.backends.mkldnn.is_available():
        return None
    try:
        ops = torch.ops.mkldnn
        pack = lambda w: ops._reorder_linear_weight(w.contiguous(), batch_hint)  # noqa: E731
        linear = lambda x, w, b=None: ops._linear_pointwise(x, w, b, "none", [], "")  # noqa: E731
        probe = torch.randn(3, 8, dtype=dtype)
        weight = torch.randn(4, 8, dtype=dtype)
        got, want = linear(probe, pack(weight)), F.linear(probe, weight)
        if not (torch.equal(got, want) if dtype == torch.bfloat16 else torch.allclose(got, want, rtol=1e-5, atol=1e-6)):
            return None
        return pack, linear
    except (AttributeError, RuntimeError):
        return None


def load_weights(model, dtype: torch.dtype, batch_hint: int = 32, native: bool = True) -> LlamaWeights:
    """Pull (LoRA-merged) weights from a transformers or peft model into the fused layout above. In bf16 and
    float32 the forward uses the native fused ops where they build (`native=False`: torch's ops only)."""
    config = plain_config(model)
    family = check_supported(config)
    sd = merged_weights_lazily(model)  # one merged float weight at a time, converted, then dropped
    kernels = _native_ops() if native and dtype in (torch.bfloat16, torch.float32) else None
    packed = packed_linear(dtype, batch_hint, kernels)
    # copies on the CPU (the native kernels' home), whatever the policy's device: never alias the trainer
    f32 = lambda k: sd[k].detach().to("cpu", torch.float32, copy=True)  # noqa: E731
    cd = lambda t: t.detach().to("cpu", dtype, copy=True).contiguous()  # noqa: E731
    mat = (lambda t: packed[0](cd(t))) if packed else cd  # noqa: E731
    nw = (lambda k: f32(k) + 1.0) if family.offset_norms else f32  # noqa: E731  # a norm's weight, as it scales
    Hq, Hkv = config.num_attention_heads, config.num_key_value_heads
    D = getattr(config, "head_dim", None) or config.hidden_size // Hq
    layers = []
    per_layer = zip(family.rope_layers(config), layer_windows(config), local_rope_layers(config))
    for i, (rope, window, local) in enumerate(per_layer):
        p = f"model.layers.{i}."
        qkv = [sd[f"{p}self_attn.{x}_proj.weight"] for x in "qkv"]
        biases = [sd.get(f"{p}self_attn.{x}_proj.bias") for x in "qkv"]
        if any(sd.get(f"{p}{n}.bias") is not None for n in ("self_attn.o_proj", "mlp.gate_proj", "mlp.down_proj")):
            raise Unsupported("biases on o_proj or the MLP")
        qkv[0], qkv[1] = _interleave(qkv[0], D), _interleave(qkv[1], D)
        bqkv = _qkv_bias(biases, D)
        layers.append(
            Layer(
                **_norms(family, nw, p),
                wqkv=mat(torch.cat(qkv)),
                bqkv=cd(bqkv) if bqkv is not None else None,
                wo=mat(sd[f"{p}self_attn.o_proj.weight"]),
                wgu=mat(torch.cat([sd[f"{p}mlp.gate_proj.weight"], sd[f"{p}mlp.up_proj.weight"]])),
                wd=mat(sd[f"{p}mlp.down_proj.weight"]),
                qk_norm=_qk_norm_weights(family, nw, p, D, Hq, Hkv),
                rope=rope,
                window=window,
                local=local,
            )
        )
    (inv_freq, head_gain), local_rope = _rope_and_gains(model, family, config, D, [L.local for L in layers])
    embed, embed_scale = embedding_copy(sd, family.embed_scale(config) if family.embed_scale else None)
    return LlamaWeights(
        embed=embed,
        layers=layers,
        norm=nw("model.norm.weight"),
        lm_head=mat(sd.get("lm_head.weight", sd["model.embed_tokens.weight"])),  # tied embeddings have no own head
        n_heads=Hq,
        n_kv=Hkv,
        head_dim=D,
        eps=config.rms_norm_eps,
        inv_freq=inv_freq,
        head_gain=head_gain,
        dtype=dtype,
        linear=packed[1] if packed else F.linear,
        fused=kernels,
        act=getattr(config, family.act_key, "silu"),
        local_rope=local_rope,
        qk_round_last=family.offset_norms,
        embed_scale=embed_scale,
    )


def _rope_and_gains(model, family: Family, config, D: int, local: list[bool]):
    """((inv_freq, head_gain), the local layers' pair or None), each head_gain (Hq + Hkv, 1) float32: the rope type's
    attention_scaling on q and k heads, times the softmax scale on q's (1/sqrt(D) unless the family sets its own)."""
    Hq, Hkv = config.num_attention_heads, config.num_key_value_heads
    q_scale = family.query_scale(config) if family.query_scale else None

    def gain(scale: float) -> torch.Tensor:
        return torch.tensor([scale / math.sqrt(D) if q_scale is None else scale * q_scale] * Hq + [scale] * Hkv)[
            :, None
        ]

    main = ("sliding_attention" if all(local) else "full_attention") if family.layer_rope else None
    inv_freq, scale = rope_tables(model, main)
    if not any(local):
        return (inv_freq, gain(scale)), None
    local_freq, local_scale = rope_tables(model, "sliding_attention")
    return (inv_freq, gain(scale)), (local_freq, gain(local_scale))


def _norms(family: Family, nw: Callable, p: str) -> dict[str, Any]:
    """A layer's RMSNorm weights under the family's names: Gemma 3's post_attention_layernorm norms the attention's
    output, its pre_feedforward_layernorm the MLP's input (Llama's post_attention_layernorm)."""
    if not family.sandwich_norms:
        return dict(ln1=nw(f"{p}input_layernorm.weight"), ln2=nw(f"{p}post_attention_layernorm.weight"))
    names = ("input", "pre_feedforward", "post_attention", "post_feedforward")
    return dict(zip(("ln1", "ln2", "post_attn", "post_mlp"), (nw(f"{p}{n}_layernorm.weight") for n in names)))


def _qk_norm_weights(family: Family, f32: Callable, p: str, D: int, Hq: int, Hkv: int) -> torch.Tensor | None:
    """A layer's per-head q and k norm weights as (Hq + Hkv, D) float32, one row a head, in the interleaved order of
    the q and k rows (RMSNorm's mean over a head is the same in any order; its weight must follow the rows); None for
    a family without them."""
    if not family.qk_norm:
        return None
    q, k = (_interleave(f32(f"{p}self_attn.{x}_norm.weight"), D) for x in "qk")
    return torch.cat([q.expand(Hq, D), k.expand(Hkv, D)]).contiguous()


def _native_ops():
    from .native import decode_ops

    return decode_ops()


def _interleave(w: torch.Tensor, D: int) -> torch.Tensor:
    """Reorder each head's D rows from HF's halves layout (x1 | x2) to pairs (x1[j], x2[j]), so RoPE
    becomes one complex multiply. q and k get the same order, so every q.k dot product is unchanged."""
    half = torch.arange(D // 2)
    order = torch.stack([half, half + D // 2], dim=-1).flatten()  # (D,)
    heads = w.shape[0] // D
    return w.reshape(heads, D, *w.shape[1:])[:, order].reshape(w.shape)


def _qkv_bias(biases: list[torch.Tensor | None], D: int) -> torch.Tensor | None:
    """The q|k|v biases as one vector, q's and k's in the interleaved order of their weights; None without them."""
    bq, bk, bv = biases
    if bq is None:
        return None
    if bk is None or bv is None:
        raise Unsupported("a q bias without k and v biases")
    return torch.cat([_interleave(bq, D), _interleave(bk, D), bv])


def rope_tables(model, layer_type: str | None = None) -> tuple[torch.Tensor, float]:
    """inv_freq and attention scaling from the model's own rotary module, so every static rope type
    (default, linear, llama3, yarn) comes out exactly as HF computes it; of one layer type where the module keeps a
    table per type (Gemma 3's `full_attention_inv_freq`, `sliding_attention_inv_freq`)."""
    base = base_model(model)
    rotary = base.model.rotary_emb
    prefix = f"{layer_type}_" if layer_type else ""
    inv_freq, scaling = getattr(rotary, f"{prefix}inv_freq"), getattr(rotary, f"{prefix}attention_scaling")
    return inv_freq.detach().to("cpu", torch.float32, copy=True), float(scaling)


def rope_rotation(w: LlamaWeights, positions: torch.Tensor, local: bool = False) -> torch.Tensor:
    """(N, Hq + Hkv, D/2) complex64: e^(i pos theta_j) times each head's gain (q heads carry the softmax scale); with
    `local`, of the local table (w.local_rope)."""
    inv_freq, head_gain = w.local_rope if local and w.local_rope is not None else (w.inv_freq, w.head_gain)
    angle = positions.float()[:, None, None] * inv_freq[None, None, :]
    return torch.polar(head_gain[None].expand(1, -1, angle.shape[-1]), angle)


def no_rotation(w: LlamaWeights, n: int) -> torch.Tensor:
    """(N, Hq + Hkv, D/2) complex64: what a layer without RoPE multiplies q and k by, in rope_rotation's form: 1/sqrt(D)
    on the q heads and 1 on the k heads, real (transformers skips RoPE on such a layer, its attention_scaling too)."""
    gain = torch.tensor([1 / math.sqrt(w.head_dim)] * w.n_heads + [1.0] * w.n_kv)[None, :, None]
    gain = gain.expand(n, -1, w.head_dim // 2)
    return torch.complex(gain, torch.zeros_like(gain)).contiguous()


# attend(layer index, q (N, Hkv, rep, D), k (N, Hkv, D), v (N, Hkv, D)) -> (N, Hq * D), compute dtype.
# q arrives already multiplied by the softmax scale 1/sqrt(D); q and k are in the interleaved order.
Attend = Callable[[int, torch.Tensor, torch.Tensor, torch.Tensor], torch.Tensor]


def forward(w: LlamaWeights, tokens: torch.Tensor, positions: torch.Tensor, attend: Attend) -> torch.Tensor:
    """Run N tokens through the decoder; the caller's `attend` owns the KV cache. Returns the final
    normed hidden states (N, H) in the compute dtype (feed to `logits`)."""
    x = w.embed[tokens].float()  # (N, H) float32 residual stream
    if w.embed_scale is not None:
        x *= w.embed_scale
    N, H = x.shape
    D, Hq, Hkv = w.head_dim, w.n_heads, w.n_kv
    rot = rope_rotation(w, positions)
    still = rot if all(L.rope for L in w.layers) else no_rotation(w, N)  # a no-RoPE layer's (unused where none is)
    local = rope_rotation(w, positions, local=True) if w.local_rope is not None else rot
    act_mul = _silu_mul if w.act == "silu" else _gelu_tanh_mul
    nqk = (Hq + Hkv) * D
    linear = w.linear
    for i, L in enumerate(w.layers):
        qkv = linear(_norm(w, x, L.ln1), L.wqkv, L.bqkv)
        turn = (local if L.local else rot) if L.rope else still
        if L.qk_norm is None:
            qk = _rope(w, qkv, turn, nqk)  # (N, Hq + Hkv, D) compute dtype
        else:
            qk = _normed_rope(w, qkv, L.qk_norm, turn, nqk)
        q, k, v = qk[:, :Hq].view(N, Hkv, Hq // Hkv, D), qk[:, Hq:], qkv[:, nqk:].view(N, Hkv, D)
        out = linear(attend(i, q, k, v), L.wo)
        x += out if L.post_attn is None else _norm(w, out.float(), L.post_attn)  # Gemma: normed in float32, rounded
        out = linear(act_mul(w, linear(_norm(w, x, L.ln2), L.wgu)), L.wd)
        x += out if L.post_mlp is None else _norm(w, out.float(), L.post_mlp)
    return _norm(w, x, w.norm)


# The three small steps of a layer, fused natively (one call, float32 inside, one rounding to the compute dtype) or as
# torch ops
def _norm(w: LlamaWeights, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """RMSNorm of the float32 stream (N, H), in the compute dtype."""
    if w.fused is not None:
        return w.fused.rms_norm(x, weight, w.eps, w.dtype == torch.bfloat16)
    return F.rms_norm(x, (x.shape[1],), weight, w.eps).to(w.dtype)


def _rope(w: LlamaWeights, qkv: torch.Tensor, rot: torch.Tensor, nqk: int) -> torch.Tensor:
    """q and k heads of the qkv output (N, >= nqk), rotated: (N, Hq + Hkv, D) in the compute dtype."""
    if w.fused is not None:
        return w.fused.rope(qkv, rot)
    N, D = qkv.shape[0], w.head_dim
    qk = torch.view_as_complex(qkv[:, :nqk].float().view(N, -1, D // 2, 2)) * rot
    return torch.view_as_real(qk).to(w.dtype).view(N, -1, D)


def _normed_rope(w: LlamaWeights, qkv: torch.Tensor, weight: torch.Tensor, rot: torch.Tensor, nqk: int) -> torch.Tensor:
    """A per-head RMSNorm of the q and k heads of the qkv output (N, >= nqk), weight (Hq + Hkv, D), then RoPE: (N, Hq +
    Hkv, D) in the compute dtype. As transformers' Qwen3 computes it under the trainer's autocast: normalised in
    float32, rounded to the projection's dtype (the compute dtype here), times the float32 weight, rotated in float32."""
    if w.fused is not None:
        return w.fused.head_norm_rope(qkv, weight, rot, w.eps, w.qk_round_last)
    N, D = qkv.shape[0], w.head_dim
    normed = F.rms_norm(qkv[:, :nqk].float().view(N, -1, D), (D,), eps=w.eps)
    # Gemma 3 rounds the product (its q_norm returns the projection's dtype); Qwen3 the normed value before its weight
    heads = (normed * weight).to(w.dtype) if w.qk_round_last else normed.to(w.dtype) * weight
    return _rope(w, heads.view(N, nqk), rot, nqk)


def _silu_mul(w: LlamaWeights, gate_up: torch.Tensor) -> torch.Tensor:
    """silu(gate) * up of the fused gate|up output (N, 2 I)."""
    if w.fused is not None:
        return w.fused.silu_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return F.silu(gate) * up


def _gelu_tanh_mul(w: LlamaWeights, gate_up: torch.Tensor) -> torch.Tensor:
    """gelu_tanh(gate) * up of the fused gate|up output (N, 2 I), rounded as the trainer's autocast forward rounds it:
    the activation to the compute dtype, then the product."""
    if w.fused is not None:
        return w.fused.gelu_tanh_mul(gate_up)
    gate, up = gate_up.chunk(2, dim=-1)
    return F.gelu(gate, approximate="tanh") * up


def logits(w: LlamaWeights, hidden: torch.Tensor, upcast: bool = True) -> torch.Tensor:
    """hidden (N, H) -> logits (N, V) float32, or in the compute dtype with upcast=False (for
    sample_tokens, which makes its own float32 copy: one conversion of (N, V) instead of two)."""
    out = w.linear(hidden, w.lm_head)
    return out.float() if upcast else out


def prefill_attend_into(
    cache_k: torch.Tensor, cache_v: torch.Tensor, lengths: list[int], past=None, windows: list[int | None] | None = None
) -> Attend:
    """Attention for several prompts packed into one token sequence (each causal within itself), filling
    the prompt cache. Packing lets the weight matmuls of a prefill run once for all prompts.

    cache_k/cache_v: (layers, P, Hkv, >= past + max(lengths), D); tokens are the prompts' new tokens concatenated
    in order. `past` (rlvr.sampling.prefix_cache): per prompt (n, keys, values) of the n tokens before its new
    ones, already computed ((layers, Hkv, n, D); n = 0 where none): they go into the cache, and the new tokens
    attend to them and, causally, to each other. `windows`: per layer, its sliding window or None (Layer.window).
    """
    offsets = [sum(lengths[:p]) for p in range(len(lengths))]
    past = past or [(0, None, None)] * len(lengths)

    def attend(i: int, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        N, Hkv, rep, D = q.shape
        window = windows[i] if windows else None
        out = torch.empty(N, Hkv * rep, D, dtype=q.dtype)
        for p, (o, L) in enumerate(zip(offsets, lengths)):
            n0, k0, v0 = past[p]
            if n0:
                cache_k[i, p, :, :n0], cache_v[i, p, :, :n0] = k0[i], v0[i]
            cache_k[i, p, :, n0 : n0 + L] = k[o : o + L].transpose(0, 1)  # (Hkv, L, D)
            cache_v[i, p, :, n0 : n0 + L] = v[o : o + L].transpose(0, 1)
            qh = q[o : o + L].reshape(L, Hkv * rep, D).transpose(0, 1)[None]  # (1, Hq, L, D)
            kh = cache_k[i, p, :, : n0 + L].repeat_interleave(rep, dim=0)[None]
            vh = cache_v[i, p, :, : n0 + L].repeat_interleave(rep, dim=0)[None]
            # q is pre-scaled, hence scale=1
            mask = _prefill_mask(n0, L, window)
            o_p = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask, is_causal=mask is None, scale=1.0)
            out[o : o + L] = o_p[0].transpose(0, 1)
        return out.view(N, Hkv * rep * D)

    return attend


def _prefill_mask(n0: int, L: int, window: int | None) -> torch.Tensor | None:
    """Which of n0 + L keys each of L new tokens sees (L, n0 + L) bool, or None for plain causal (no past, no window
    that binds): after a past of n0, new token j sees keys 0 .. n0 + j; in a window of W, the last W of those
    (transformers' sliding_window_overlay: key > query - W)."""
    if not n0 and (window is None or window >= L):
        return None
    key, query = torch.arange(n0 + L)[None, :], (n0 + torch.arange(L))[:, None]
    return key <= query if window is None else (key <= query) & (key > query - window)
