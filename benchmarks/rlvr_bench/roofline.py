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


__all__ = ["read_floor_s", "live_rows", "step_floor_s", "batch_roofline_s"]
