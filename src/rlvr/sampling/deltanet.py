"""The gated delta rule of Qwen3.5's linear-attention layers (transformers' Qwen3_5GatedDeltaNet), for the fast
sampler: the short causal convolution in front of it, the chunked form that prefills a prompt and the recurrent
step that decodes one token a row, and the gated RMSNorm after it. Pure tensor functions; rlvr.sampling.qwen3_5
holds the weights, the states and the layer around them.

The rule, per value head (state S: (Dk, Dv), float32): with q and k L2-normalised (q also times Dk^-1/2), decay
a = exp(g) and write strength beta,

    S_t = a_t S_{t-1} + k_t (beta_t (v_t - a_t S_{t-1}^T k_t))^T,     o_t = S_t^T q_t.

The chunked form computes the same thing a block of C tokens at a time (a triangular solve inside the block, one
state update a block); its result is the recurrent one's up to float32 rounding, as transformers'
torch_chunk_gated_delta_rule is its torch_recurrent_gated_delta_rule's. Both run in float32 whatever the compute
dtype, as transformers' reference kernels do.

Shapes: N tokens (P prompts of up to L, or n decode rows), Hk key heads, Hv value heads (each key head serves Hv / Hk
consecutive value heads), Dk / Dv their dims, C the convolution's channels (q | k | v), K its kernel width.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

CHUNK = 64  # tokens a block of the chunked form (transformers' default)
L2_EPS = 1e-6  # transformers' l2norm of q and k
# A decay below e^-60 (1e-26) is taken as 0: a state term it scales is far below float32's rounding of the terms it is
# summed with, and the strong decays of Qwen3.5's heads (A up to 16 a token) otherwise fill the state and the chunked
# form's matrices with denormal floats, on which the CPU's arithmetic runs several times slower.
LOG_TINY = -60.0


def decay_exp(log_decay: torch.Tensor) -> torch.Tensor:
    """exp of a log decay (<= 0), 0 below e^LOG_TINY."""
    return log_decay.masked_fill(log_decay < LOG_TINY, float("-inf")).exp()


def heads(q: torch.Tensor, k: torch.Tensor, n_v: int) -> tuple[torch.Tensor, torch.Tensor]:
    """q, k (..., Hk, Dk) in the compute dtype -> float32 (..., Hv, Dk), L2-normalised, each key head repeated for the
    value heads it serves, q times Dk^-1/2."""
    rep = n_v // q.shape[-2]
    q, k = (x.repeat_interleave(rep, dim=-2).float() if rep > 1 else x.float() for x in (q, k))
    q, k = (x * torch.rsqrt((x * x).sum(-1, keepdim=True) + L2_EPS) for x in (q, k))
    return q * q.shape[-1] ** -0.5, k


def decay_and_beta(a: torch.Tensor, b: torch.Tensor, A: torch.Tensor, dt_bias: torch.Tensor):
    """The log decay g = A softplus(a + dt_bias) (A = -exp(A_log), float32) and beta = sigmoid(b), from the a and b
    projections (..., Hv) in the compute dtype: beta is taken in that dtype (as transformers does), then both float32."""
    return A * F.softplus(a.float() + dt_bias), b.sigmoid().float()


def conv_prefill(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """The causal depthwise convolution and its silu over whole prompts: x (P, L, C) in the compute dtype, weight (K, C)
    float32 (holding compute-dtype values); zeros before each prompt. Returns (P, L, C) in the compute dtype: the
    convolution rounded to it, then silu (transformers' order under autocast and in a bf16 model)."""
    K, L = weight.shape[0], x.shape[1]
    y = F.conv1d(x.transpose(1, 2).float(), weight.t()[:, None, :], padding=K - 1, groups=weight.shape[1])[..., :L]
    return F.silu(y.to(x.dtype)).transpose(1, 2)


def conv_step(state: torch.Tensor, x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """One decode step of the convolution: state (n, K - 1, C), the row's last K - 1 inputs (updated in place), x (n, C)
    this step's input, both in the compute dtype. Returns silu of the convolution, (n, C) in the compute dtype."""
    window = torch.cat([state, x[:, None]], dim=1)  # (n, K, C)
    state.copy_(window[:, 1:])
    y = (window.float() * weight).sum(1)
    return F.silu(y.to(x.dtype))


def recurrent_step(S: torch.Tensor, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g, beta) -> torch.Tensor:
    """One token of the rule for n rows: S (n, Hv, Dk, Dv) float32, updated in place; q, k (n, Hv, Dk) from `heads`,
    v (n, Hv, Dv), g and beta (n, Hv), float32. Returns o (n, Hv, Dv) float32.

    The state is read once for both products it is needed in (k^T S and q^T S of the old state, then scaled by the
    decay: o = a q^T S_old + (q . k) delta, which is S_new^T q), then decayed and written in place, with no
    temporary of its size (rlvr.sampling.native's deltanet.cpp does the same in one pass over it)."""
    n, H, Dk, Dv = S.shape
    a = decay_exp(g)[..., None]  # (n, Hv, 1)
    read = torch.matmul(torch.stack([k, q], dim=2), S) * a[..., None]  # (n, Hv, 2, Dv)
    delta = (v.float() - read[:, :, 0]) * beta[..., None]
    out = read[:, :, 1] + (q * k).sum(-1, keepdim=True) * delta
    flat = S.view(n * H, Dk, Dv)
    flat.mul_(a.reshape(n * H, 1, 1)).baddbmm_(k.reshape(n * H, Dk, 1), delta.reshape(n * H, 1, Dv))
    return out


def chunked(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, g, beta, chunk: int = CHUNK):
    """The rule over whole sequences from a zero state: q, k (P, L, Hv, Dk) from `heads`, v (P, L, Hv, Dv), g and beta
    (P, L, Hv), float32. Returns o (P, L, Hv, Dv) and the final states (P, Hv, Dk, Dv), float32.

    A sequence shorter than L is padded at its end with zero k and v and zero g: those steps leave its state as it was,
    so its final state is the one at its own end."""
    P, L, H, Dk = k.shape
    Dv = v.shape[-1]
    pad = (-L) % chunk

    def blocks(t: torch.Tensor) -> torch.Tensor:  # (P, L, H, ...) -> (P, H, blocks, chunk, ...)
        t = F.pad(t, (0, 0) * (t.dim() - 3) + (0, 0, 0, pad))
        return t.transpose(1, 2).reshape(P, H, -1, chunk, *t.shape[3:])

    q, k, v, g, beta = blocks(q), blocks(k), blocks(v), blocks(g), blocks(beta)
    cum = g.cumsum(-1)  # (P, H, n, C): log decay from the block's start through each token
    causal = torch.ones(chunk, chunk, dtype=torch.bool).tril()
    decay = decay_exp((cum[..., :, None] - cum[..., None, :]).masked_fill(~causal, float("-inf")))  # e^(cum_i - cum_j)
    kb = k * beta[..., None]
    # within a block each token's write corrects for the earlier tokens' writes: (I + strictly lower) u = beta v, and
    # likewise for the keys. One triangular inverse, then matmuls: torch's batched solve with Dk or Dv right-hand
    # sides ran 10-40 times slower than with the C columns of the identity.
    eye = torch.eye(chunk)
    system = ((kb @ k.transpose(-1, -2)) * decay).tril(-1) + eye
    inverse = torch.linalg.solve_triangular(system, eye.expand(system.shape), upper=False, unitriangular=True)
    u, w = inverse @ (v * beta[..., None]), inverse @ (kb * decay_exp(cum)[..., None])
    inner = (q @ k.transpose(-1, -2)) * decay  # (P, H, n, C, C): attention within the block
    q_in = q * decay_exp(cum)[..., None]  # q's read of the state as it was at the block's start
    k_out = k * decay_exp(cum[..., -1:] - cum)[..., None]  # k's write, decayed to the block's end
    S = torch.zeros(P, H, Dk, Dv)
    out = torch.empty(P, H, q.shape[2], chunk, Dv)
    for i in range(q.shape[2]):
        fresh = u[:, :, i] - w[:, :, i] @ S  # the block's writes net of what the state already predicts
        out[:, :, i] = q_in[:, :, i] @ S + inner[:, :, i] @ fresh
        S = S * decay_exp(cum[:, :, i, -1])[..., None, None] + k_out[:, :, i].transpose(-1, -2) @ fresh
    return out.reshape(P, H, -1, Dv)[:, :, :L].transpose(1, 2), S


def gated_norm(o: torch.Tensor, z: torch.Tensor, weight: torch.Tensor, eps: float, dtype: torch.dtype):
    """transformers' Qwen3_5RMSNormGated on the rule's output: o (..., Dv) float32 is handed over in the compute dtype
    (as the reference kernels return it), RMS-normalised in float32 over Dv, rounded to the compute dtype, times the
    float32 weight, times silu(z) in float32, rounded once more. z (..., Dv) in the compute dtype."""
    x = o.to(dtype).float()
    x = (x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)).to(dtype)
    return (weight * x * F.silu(z.float())).to(dtype)


__all__ = ["CHUNK", "chunked", "conv_prefill", "conv_step", "decay_and_beta", "gated_norm", "heads", "recurrent_step"]
