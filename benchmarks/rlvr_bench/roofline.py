"""The roofline of a decode step at the rows alive: what no exact sampler of this model can beat on this machine.

A step of n rows reads every weight once and does 2 N FLOP per row (N = the model's parameters), so it takes at
least the larger of the **read floor** (one pass over the weights at the rate the machine reads memory) and the
**compute floor** (n x 2 N FLOP at the bf16 matmul probe's rate). A batch's roofline adds, for each decode step,
the floor at the rows still alive then, plus the prefill's (its prompt tokens' FLOPs, or one read). Useful tokens
per second over the roofline's is the fraction a sampler reaches: 1.0 is the machine's limit.
"""

from __future__ import annotations

import time


def read_floor_s(n_bytes: int, reps: int = 20) -> float:
    """Best seconds to read n_bytes of bf16 once: a matrix-vector product over them, and an int16 max (the faster
    of the two; both only read the buffer)."""
    import torch

    buf = torch.randn(n_bytes // 2 // 576, 576).to(torch.bfloat16)
    ones = torch.ones(576, dtype=torch.bfloat16)
    best = float("inf")
    for f in (lambda: torch.mv(buf, ones), lambda: buf.view(torch.int16).max()):
        f()
        for _ in range(reps):
            t = time.perf_counter()
            f()
            best = min(best, time.perf_counter() - t)
    return best * n_bytes / (buf.numel() * 2)


def live_rows(lengths: list[int]) -> list[int]:
    """Rows alive at each decode step: the first token of every row comes from the prefill, so decode step t
    (t = 1 .. max length - 1) runs the rows whose completion is longer than t."""
    longest = max(lengths, default=0)
    return [sum(L > t for L in lengths) for t in range(1, longest)]


def step_floor_s(rows: int, params: int, read_s: float, gflops: float) -> float:
    """The roofline of one forward of `rows` tokens: max(read floor, rows x 2 N FLOP at the probe's rate)."""
    return max(read_s, rows * 2 * params / (gflops * 1e9))


def batch_roofline_s(lengths: list[int], prompt_tokens: int, params: int, read_s: float, gflops: float) -> float:
    """Seconds the batch would take at the roofline: its prefill (each prompt once) plus every decode step at its
    live rows."""
    return step_floor_s(prompt_tokens, params, read_s, gflops) + sum(
        step_floor_s(n, params, read_s, gflops) for n in live_rows(lengths)
    )


def read_rate(n_bytes: int = 256 << 20, reps: int = 10) -> float:
    """Bytes a second this machine reads memory at: the best of `reps` int16 maxima over a buffer larger than the
    caches (read_floor_s's faster reader; its bf16 matrix-vector product is emulated, and slow, without bf16)."""
    import torch

    buf = torch.ones(n_bytes // 2, dtype=torch.int16)
    buf.max()
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        buf.max()
        best = min(best, time.perf_counter() - t)
    return n_bytes / best


def kv_bytes_per_token(model_dir: str, dtype_bytes: int) -> int:
    """What one past token's keys and values take over all layers: what every later decode step of its row reads."""
    from transformers import AutoConfig

    c = AutoConfig.from_pretrained(model_dir)
    c = getattr(c, "text_config", c)
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    kv_heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    return c.num_hidden_layers * 2 * kv_heads * head_dim * dtype_bytes


def long_roofline_s(
    lengths: list[int],
    prompt_tokens: int,
    prompt_len: float,
    params: int,
    weight_bytes: int,
    kv_bytes: int,
    rate: float,
    gflops: float,
) -> float:
    """batch_roofline_s for long rows: each decode step also reads the live rows' KV cache (the prompt, `prompt_len`
    tokens on average, and the completion so far, `kv_bytes` a token), which at 300-400-token chains of thought is no
    longer small beside the weights. The weights are read at `weight_bytes` (the sampler's dtype), `rate` bytes a
    second; the prefill runs `prompt_tokens` (each distinct prompt once)."""
    total = step_floor_s(prompt_tokens, params, weight_bytes / rate, gflops)
    for t, n in enumerate(live_rows(lengths), start=1):
        read_s = (weight_bytes + n * (prompt_len + t) * kv_bytes) / rate
        total += max(read_s, n * 2 * params / (gflops * 1e9))
    return total


def decode_roofline(framework: str, cfg: dict, model_dir: str, params: int, rate: float, ceilings: dict) -> dict:
    """What a side's decode reads a step: its weights in the dtype it samples in (rlvr's resolved rollout.dtype in
    `cfg`, the bench's config; TRL generates with the model as loaded) and its KV cache, at `rate` bytes a second."""
    dtype = cfg["rollout"]["dtype"] if framework == "rlvr" else cfg["model"]["dtype"]
    width = 2 if dtype == "bfloat16" else 4
    kv = kv_bytes_per_token(model_dir, width)
    return {"dtype": dtype, "weight_bytes": params * width, "kv_bytes": kv, "rate": rate, "gflops": ceilings[dtype]}


def step_floors(r: dict, roof: dict, params: int, update_flops: int, ceiling_gflops: float, spec: dict) -> dict:
    """A step's floor: its decode at the roofline (weights and KV cache read at the machine's rate) plus the update of
    every sampled token and each prompt once (`update_flops` a token) at the matmul probe; the same work counted for
    both sides."""

    decode = long_roofline_s(
        r["lengths"], r["prompt_tokens"], r["prompt_tokens"] / spec["prompts"], params, roof["weight_bytes"],
        roof["kv_bytes"], roof["rate"], roof["gflops"],
    )  # fmt: skip
    update = update_flops * (r["gen_tokens"] + r["prompt_tokens"]) / ceiling_gflops / 1e9
    return {"decode_floor": decode, "train_floor": update, "floor": decode + update}


__all__ = [
    "decode_roofline",
    "step_floors",
    "read_floor_s",
    "live_rows",
    "step_floor_s",
    "batch_roofline_s",
    "read_rate",
    "kv_bytes_per_token",
    "long_roofline_s",
]
