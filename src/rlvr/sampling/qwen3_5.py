"""The fast sampler's forward for Qwen3.5 (model_type qwen3_5_text, transformers' Qwen3_5ForCausalLM): gated delta-net
layers (rlvr.sampling.deltanet) between gated full-attention layers, each followed by the Llama layout's MLP.

What differs from rlvr.sampling.llama's forward, read from transformers' modeling_qwen3_5:
- every RMSNorm but the delta-net's output norm scales by (1 + w) (Qwen3_5RMSNorm, its weight stored around 0);
- a full-attention layer's q_proj gives each head its queries and an output gate (per head [q | gate]); q and k get a
  per-head (1 + w) RMSNorm (rounded to the compute dtype after the weight, unlike Qwen3's), RoPE turns only the first
  partial_rotary_factor of each head (the rest pass through: here a rotation by angle 0), and the attention's output is
  multiplied by sigmoid(gate) before o_proj;
- a linear-attention layer's token mixer is the gated delta rule: one projection gives q | k | v (through a short
  causal convolution and silu), z (the output gate), b (beta) and a (the decay); its state is a fixed-size matrix per
  head, not a cache that grows.

The states: the full-attention layers keep keys and values in rlvr.sampling.cascade's cache (a prompt's once, each
sample's own); the delta-net layers keep, per row, the convolution's last K - 1 inputs and the rule's float32 state.
A prompt is prefilled once (the chunked rule, its prompts packed as the Llama path packs them) and its final states
are copied to its G rows (`prefill`), which then advance one token a step (`step`, the recurrent rule); finished rows
leave and their states are dropped at once. rlvr.sampling.fast's HybridSampler drives them, without a prefix cache:
an episode's next turn is prefilled whole.

Precision as the Llama path's: matmuls in the compute dtype, the residual stream, norms, RoPE and the softmax in
float32; the delta rule in float32 (transformers' reference kernels do the same). A decode step runs each delta-net
layer's token mixer as one native call where rlvr.sampling.native builds (deltanet.cpp's delta_step), else as the
torch ops of `Mixer.mix`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from . import deltanet, llama
from .cascade import CascadeCache
from .families import check_supported
from .weights import merged_weights_lazily, plain_config


@dataclass
class DeltaLayer:
    ln1: torch.Tensor  # (H,) float32, 1 + w
    ln2: torch.Tensor  # (H,) float32, 1 + w
    wgu: torch.Tensor  # (2 I, H): gate rows then up rows
    wd: torch.Tensor  # (H, I)
    w_in: torch.Tensor  # (C + Vd + 2 Hv, H): in_proj_qkv | in_proj_z | in_proj_b | in_proj_a
    conv: torch.Tensor  # (K, C) float32, holding compute-dtype values (the weight the autocast trainer's conv uses)
    A: torch.Tensor  # (Hv,) float32: -exp(A_log)
    dt_bias: torch.Tensor  # (Hv,) float32
    norm: torch.Tensor  # (Dv,) float32: the gated RMSNorm's weight (plain w)
    w_out: torch.Tensor  # (H, Vd)


@dataclass
class HybridWeights:
    base: llama.LlamaWeights  # embedding, final norm, head, RoPE tables, matmuls; its layers: the attention layers
    stack: list[llama.Layer | DeltaLayer]  # every layer in order (an attention layer's wqkv: q | k | v | gate rows)
    n_k: int  # delta-net key heads
    n_v: int  # delta-net value heads
    dk: int
    dv: int
    fused: Any = None  # rlvr.sampling.native's deltanet ops (a decode step's token mixer in one call), or None


def load_weights(model, dtype: torch.dtype, batch_hint: int = 32, native: bool = True) -> HybridWeights:
    """The (LoRA-merged) weights of a Qwen3.5 model in the layout above, read as llama.load_weights reads a Llama's."""
    config = plain_config(model)
    check_supported(config)
    sd = merged_weights_lazily(model)
    kernels = llama._native_ops() if native and dtype in (torch.bfloat16, torch.float32) else None
    packed = llama.packed_linear(dtype, batch_hint, kernels)
    f32 = lambda k: sd[k].detach().to("cpu", torch.float32, copy=True)  # noqa: E731
    cd = lambda t: t.detach().to("cpu", dtype, copy=True).contiguous()  # noqa: E731
    mat = (lambda t: packed[0](cd(t))) if packed else cd  # noqa: E731
    one_plus = lambda k: 1.0 + f32(k)  # noqa: E731  (Qwen3_5RMSNorm: (1 + w), in float32)
    Hq, Hkv, D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    inv_freq, scale = llama.rope_tables(model)  # (R / 2,): only the rotated part of a head
    R = 2 * inv_freq.numel()
    stack: list[llama.Layer | DeltaLayer] = []
    for i, kind in enumerate(config.layer_types):
        p = f"model.layers.{i}."
        mlp = dict(
            ln1=one_plus(f"{p}input_layernorm.weight"),
            ln2=one_plus(f"{p}post_attention_layernorm.weight"),
            wgu=mat(torch.cat([sd[f"{p}mlp.gate_proj.weight"], sd[f"{p}mlp.up_proj.weight"]])),
            wd=mat(sd[f"{p}mlp.down_proj.weight"]),
        )
        if kind == "linear_attention":
            stack.append(_delta_layer(sd, f"{p}linear_attn.", mlp, f32, cd, mat))
            continue
        a = f"{p}self_attn."
        q_gate = sd[f"{a}q_proj.weight"].view(Hq, 2 * D, -1)  # per head: D query rows, then D gate rows
        q, gate = q_gate[:, :D].reshape(Hq * D, -1), q_gate[:, D:].reshape(Hq * D, -1)
        k, v = sd[f"{a}k_proj.weight"], sd[f"{a}v_proj.weight"]
        norms = [_rotary_pairs(one_plus(f"{a}{x}_norm.weight"), D, R) for x in "qk"]
        stack.append(
            llama.Layer(
                wqkv=mat(torch.cat([_rotary_pairs(q, D, R), _rotary_pairs(k, D, R), v, gate])),
                bqkv=None,
                wo=mat(sd[f"{a}o_proj.weight"]),
                qk_norm=torch.cat([norms[0].expand(Hq, D), norms[1].expand(Hkv, D)]).contiguous(),
                **mlp,
            )
        )
    head = sd.get("lm_head.weight", sd["model.embed_tokens.weight"])
    base = llama.LlamaWeights(
        embed=f32("model.embed_tokens.weight"),
        layers=[L for L in stack if isinstance(L, llama.Layer)],
        norm=one_plus("model.norm.weight"),
        lm_head=mat(head),
        n_heads=Hq,
        n_kv=Hkv,
        head_dim=D,
        eps=config.rms_norm_eps,
        inv_freq=torch.cat([inv_freq, torch.zeros((D - R) // 2)]),  # the pass-through pairs turn by angle 0
        head_gain=torch.tensor([scale / D**0.5] * Hq + [scale] * Hkv)[:, None],
        dtype=dtype,
        linear=packed[1] if packed else F.linear,
        fused=kernels,
        act=config.hidden_act,  # checked against families.ACTIVATIONS by check_supported
    )
    dims = (config.linear_num_key_heads, config.linear_num_value_heads, config.linear_key_head_dim)
    fused = _native_ops() if native and dtype in (torch.bfloat16, torch.float32) else None
    return HybridWeights(base, stack, *dims, config.linear_value_head_dim, fused)


def _native_ops():
    from .native import deltanet_ops

    return deltanet_ops()


def _delta_layer(sd, p: str, mlp: dict, f32, cd, mat) -> DeltaLayer:
    w_in = torch.cat([sd[f"{p}in_proj_{x}.weight"] for x in ("qkv", "z", "b", "a")])
    return DeltaLayer(
        w_in=mat(w_in),
        conv=cd(sd[f"{p}conv1d.weight"][:, 0]).float().t().contiguous(),
        A=-f32(f"{p}A_log").exp(),
        dt_bias=f32(f"{p}dt_bias"),
        norm=f32(f"{p}norm.weight"),
        w_out=mat(sd[f"{p}out_proj.weight"]),
        **mlp,
    )


def _rotary_pairs(w: torch.Tensor, D: int, R: int) -> torch.Tensor:
    """Each head's first R rows from the halves layout (x1 | x2) to pairs (x1[j], x2[j]), as llama._interleave does
    for a whole head; the other D - R rows (not rotated) stay in place. q, k and their norm weights alike."""
    half = torch.arange(R // 2)
    order = torch.cat([torch.stack([half, half + R // 2], dim=-1).flatten(), torch.arange(R, D)])
    return w.reshape(w.shape[0] // D, D, *w.shape[1:])[:, order].reshape(w.shape)


class Mixer:
    """Where the delta-net layers' states live for one forward call: conv(j, x, weight) runs layer j's convolution
    (x (N, C), compute dtype) and rule(j, q, k, v, g, beta) its delta rule (deltanet.heads' q and k), each reading
    and updating that layer's state; mix(j, w, L, proj) is the layer's token mixer between its two projections,
    which a decode step runs as one native call where it builds. `Prefill` (whole prompts) and `HybridCache` (a
    decode step) are the two."""

    def conv(self, j: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        raise NotImplementedError

    def rule(self, j: int, q, k, v, g, beta) -> torch.Tensor:
        raise NotImplementedError

    def mix(self, j: int, w: HybridWeights, L: DeltaLayer, proj: torch.Tensor) -> torch.Tensor:
        """Qwen3_5GatedDeltaNet between in_proj and out_proj: proj (N, C + Vd + 2 Hv) (q | k | v, z, b, a) in the
        compute dtype -> (N, Hv Dv) in the compute dtype."""
        N, b = proj.shape[0], w.base
        kd, vd, C = w.n_k * w.dk, w.n_v * w.dv, L.conv.shape[1]
        mixed = self.conv(j, proj[:, :C], L.conv)
        q, k = deltanet.heads(mixed[:, :kd].view(N, w.n_k, w.dk), mixed[:, kd : 2 * kd].view(N, w.n_k, w.dk), w.n_v)
        g, beta = deltanet.decay_and_beta(proj[:, C + vd + w.n_v :], proj[:, C + vd : C + vd + w.n_v], L.A, L.dt_bias)
        o = self.rule(j, q, k, mixed[:, 2 * kd :].view(N, w.n_v, w.dv).float(), g, beta)
        z = proj[:, C : C + vd].view(N, w.n_v, w.dv)
        return deltanet.gated_norm(o, z, L.norm, b.eps, b.dtype).view(N, vd)


def forward(w: HybridWeights, tokens, positions, attend: llama.Attend, mixer: Mixer) -> torch.Tensor:
    """Run N tokens through the decoder: `attend` owns the attention layers' keys and values (its layer index counts
    attention layers only), `mixer` the delta-net layers' states. Returns the final normed hidden states (N, H) in
    the compute dtype (feed to llama.logits(w.base, ...))."""
    b = w.base
    x = b.embed[tokens]  # (N, H) float32 residual stream
    rot = llama.rope_rotation(b, positions)
    act_mul = llama._silu_mul if b.act == "silu" else llama._gelu_tanh_mul  # as llama.forward picks it
    a = j = 0
    for L in w.stack:
        h = llama._norm(b, x, L.ln1)
        if isinstance(L, DeltaLayer):
            x += b.linear(mixer.mix(j, w, L, b.linear(h, L.w_in)), L.w_out)
            j += 1
        else:
            x += b.linear(_gated_attention(b, L, h, rot, a, attend), L.wo)
            a += 1
        x += b.linear(act_mul(b, b.linear(llama._norm(b, x, L.ln2), L.wgu)), L.wd)
    return llama._norm(b, x, b.norm)


def _gated_attention(b: llama.LlamaWeights, L: llama.Layer, h, rot, a: int, attend: llama.Attend) -> torch.Tensor:
    """Qwen3_5Attention on the normed stream h (N, H), up to o_proj: (N, Hq D) in the compute dtype. The q and k heads
    are normalised as Qwen3_5RMSNorm does under the trainer's autocast (float32, times 1 + w, then rounded to the
    projection's dtype), then rotated in float32; the gate multiplies in the compute dtype, as there."""
    N, D, Hq, Hkv = h.shape[0], b.head_dim, b.n_heads, b.n_kv
    nqk, nv = (Hq + Hkv) * D, Hkv * D
    qkv = b.linear(h, L.wqkv)  # (N, q | k | v | gate)
    assert L.qk_norm is not None
    heads = (F.rms_norm(qkv[:, :nqk].float().view(N, -1, D), (D,), eps=b.eps) * L.qk_norm).to(b.dtype)
    qk = llama._rope(b, heads.view(N, nqk), rot, nqk)
    q, k, v = qk[:, :Hq].view(N, Hkv, Hq // Hkv, D), qk[:, Hq:], qkv[:, nqk : nqk + nv].view(N, Hkv, D)
    return attend(a, q, k, v) * torch.sigmoid(qkv[:, nqk + nv :])


class HybridCache(CascadeCache, Mixer):
    """The attention layers' keys and values (CascadeCache) and the delta-net layers' states, per active row:
    `conv_state` (layers, n, K - 1, C) in the compute dtype and `state` (layers, n, Hv, Dk, Dv) float32. Built per prompt by a
    Prefill, then `share()`d by the prompt's G rows; a decode step reads and advances them (the Mixer methods)."""

    def __init__(self, w: HybridWeights, n_prompts: int, group: int, prompt_lens: list[int]):
        b = w.base
        super().__init__(len(b.layers), n_prompts, group, b.n_kv, b.head_dim, prompt_lens, b.dtype, kernel=b.fused)
        deltas = [L for L in w.stack if isinstance(L, DeltaLayer)]
        K, C = deltas[0].conv.shape if deltas else (1, 0)
        self.conv_state = torch.zeros(len(deltas), n_prompts, K - 1, C, dtype=b.dtype)
        self.state = torch.zeros(len(deltas), n_prompts, w.n_v, w.dk, w.dv)
        self.fused = w.fused

    def share(self) -> None:
        """Each prompt's states (written by the prefill) copied to its G rows."""
        self.conv_state = self.conv_state.repeat_interleave(self.G, dim=1)
        self.state = self.state.repeat_interleave(self.G, dim=1)

    def keep(self, still: torch.Tensor) -> None:
        super().keep(still)
        self.conv_state, self.state = self.conv_state[:, still], self.state[:, still]  # indexing copies: compact

    def conv(self, j: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        return deltanet.conv_step(self.conv_state[j], x, weight)

    def rule(self, j: int, q, k, v, g, beta) -> torch.Tensor:
        return deltanet.recurrent_step(self.state[j], q, k, v, g, beta)

    def mix(self, j: int, w: HybridWeights, L: DeltaLayer, proj: torch.Tensor) -> torch.Tensor:
        if self.fused is None:
            return super().mix(j, w, L, proj)
        args = (proj, self.conv_state[j], L.conv, L.A, L.dt_bias, L.norm, self.state[j], w.n_k, w.base.eps)
        return self.fused.delta_step(*args)


class Prefill(Mixer):
    """The delta-net layers over whole prompts packed in one token sequence (each from a zero state, as the Llama path
    packs them for attention): each layer's tokens laid out one prompt a row, zeros after a prompt's end, for the
    convolution and the chunked rule; each prompt's final states written to `cache` (per prompt, before share)."""

    def __init__(self, cache: HybridCache, lengths: list[int]):
        self.cache, self.lengths = cache, lengths
        L = max(lengths)
        self.width = L
        self.index = torch.cat([p * L + torch.arange(n) for p, n in enumerate(lengths)])  # packed token -> grid cell

    def _grid(self, x: torch.Tensor) -> torch.Tensor:
        """(N, ...) packed -> (P, L, ...), zeros after each prompt's end."""
        grid = x.new_zeros((len(self.lengths) * self.width, *x.shape[1:]))
        grid[self.index] = x
        return grid.view(len(self.lengths), self.width, *x.shape[1:])

    def _packed(self, grid: torch.Tensor) -> torch.Tensor:
        return grid.reshape(-1, *grid.shape[2:])[self.index]

    def conv(self, j: int, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
        grid = self._grid(x)
        K = weight.shape[0]
        before = F.pad(grid, (0, 0, K - 1, 0))  # (P, K - 1 + L, C): a prompt's last K - 1 inputs end at its length
        for p, n in enumerate(self.lengths):
            self.cache.conv_state[j, p] = before[p, n : n + K - 1]
        return self._packed(deltanet.conv_prefill(grid, weight))

    def rule(self, j: int, q, k, v, g, beta) -> torch.Tensor:
        o, self.cache.state[j] = deltanet.chunked(
            self._grid(q), self._grid(k), self._grid(v), self._grid(g), self._grid(beta)
        )
        return self._packed(o)


def prefill(w: HybridWeights, prompts: list[list[int]], G: int) -> tuple[HybridCache, torch.Tensor]:
    """Every prompt once, all through the weights in one pass: the cache, each prompt's states shared by its G rows,
    and the B = P G rows' logits at their prompt's last position (B, V) in the compute dtype."""
    lengths = [len(p) for p in prompts]
    cache = HybridCache(w, len(prompts), G, lengths)
    attend = llama.prefill_attend_into(cache.pk, cache.pv, lengths)
    positions = torch.cat([torch.arange(n) for n in lengths])
    hidden = forward(w, torch.tensor([t for p in prompts for t in p]), positions, attend, Prefill(cache, lengths))
    cache.share()
    last = torch.tensor(lengths).cumsum(0) - 1
    return cache, llama.logits(w.base, hidden[last], upcast=False).repeat_interleave(G, dim=0)


def step(w: HybridWeights, cache: HybridCache, tokens: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
    """One decode step of the cache's active rows (after cache.begin_step): their logits (n, V), compute dtype."""
    return llama.logits(w.base, forward(w, tokens, positions, cache.attend, cache), upcast=False)


__all__ = ["HybridCache", "HybridWeights", "forward", "load_weights", "prefill", "step"]
