"""Decode speed on a Qwen3.5 shape with random weights: the fast sampler (rlvr.sampling.qwen3_5) against hf
(transformers' generate with its reference PyTorch kernels for the delta-net layers), one process, bf16.

    PYTHONPATH=src python benchmarks/bench_qwen3_5.py [--vocab 32768] [--layers 12] [--shape 4x4] [--new 64] [--threads 1]

The shape is Qwen3.5-0.8B's text model (hidden 1024, 24 layers: 18 gated delta-net with 16 key and 16 value heads of
128, 6 gated attention with 8 heads and 2 key/value heads of 256, intermediate 3584, RoPE on a quarter of each head,
tied embeddings), by default with 12 of its layers (the same 3 delta-net : 1 attention pattern) and its
248,320-token vocabulary cut to --vocab, so that the process stays under 3 GB: the model, one sampler's copy of it
(hf's is a whole bf16 model, fast's keeps the embedding in float32) and their states (the whole 0.8B shape with the
full vocabulary took 4.1 GB). No
hub access: the config is rlvr_bench.shapes' (Qwen/Qwen3.5-0.8B's config.json), the weights are random.

Prints the tokens each backend generated, its decode tokens/s (fast: the decode phase alone, its prefill apart; hf:
generate's whole call, which prefills each of the P x G rows), and the CPU other processes took meanwhile
(rlvr.training.contention): figures on a busy machine are lower; compare rows of one run only.
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from pathlib import Path

import torch

from rlvr_bench.shapes import QWEN3_5_0_8B


class Ids:
    """A stand-in tokenizer (random weights have no text to decode)."""

    pad_token_id = 0

    def batch_decode(self, rows, skip_special_tokens=True):
        return [" ".join(map(str, r)) for r in rows]


def build(vocab: int, layers: int):
    from transformers import AutoModelForCausalLM, Qwen3_5TextConfig

    # the class is the type; the special ids may lie past a cut vocabulary (random weights decode no text)
    values = {k: v for k, v in QWEN3_5_0_8B.items() if k != "model_type" and not k.endswith("_token_id")}
    values |= {"num_hidden_layers": layers, "layer_types": QWEN3_5_0_8B["layer_types"][:layers], "vocab_size": vocab}
    config = Qwen3_5TextConfig(**values)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval().requires_grad_(False)
    with torch.no_grad():  # trained-looking norms: transformers starts (1 + w) norms at w = 0
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.add_(0.1 * torch.randn(p.shape))
    return model


def peak_gb() -> float:
    """This process's peak resident memory so far (VmHWM), GB."""
    line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("VmHWM"))
    return int(line.split()[1]) / 1e6


def measure(backend: str, model, prompts, G: int, new: int, threads: int | None) -> dict:
    from rlvr.sampling import make_sampler
    from rlvr.training.contention import other_cpu, snapshot

    sampler = make_sampler(backend, model, Ids(), stop_ids=[1], dtype="bfloat16", threads=threads)
    sampler.generate(prompts[:1], 1, max_new_tokens=4, temperature=1.0, generator=torch.Generator().manual_seed(0))
    before = snapshot()
    t0 = time.perf_counter()
    r = sampler.generate(prompts, G, max_new_tokens=new, temperature=1.0, generator=torch.Generator().manual_seed(1))
    wall = time.perf_counter() - t0
    load = other_cpu(before, snapshot()) or {}
    decode_s = r.timings.get("decode", wall)
    del sampler
    gc.collect()
    return {
        "backend": backend,
        "tokens": r.num_generated_tokens,
        "wall_s": round(wall, 2),
        "prefill_s": round(r.timings.get("prefill", float("nan")), 2),
        "decode_tok_s": round(r.num_generated_tokens / decode_s, 1),
        "others_cpu_share": round(load.get("other_share", float("nan")), 2),
        "peak_rss_gb": round(peak_gb(), 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--vocab", type=int, default=32768)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--shape", default="4x4", help="P prompts x G samples")
    ap.add_argument("--prompt", type=int, default=96, help="prompt tokens")
    ap.add_argument("--new", type=int, default=64, help="tokens generated a row (no stop token is sampled)")
    ap.add_argument("--backends", default="fast,hf")
    ap.add_argument("--threads", type=int, default=None, help="torch threads while sampling (rollout.threads)")
    a = ap.parse_args()
    P, G = (int(x) for x in a.shape.split("x"))
    t0 = time.perf_counter()
    model = build(a.vocab, a.layers)
    params = sum(p.numel() for p in model.parameters())
    print(f"model: Qwen3.5-0.8B text shape, {a.layers} layers, vocab {a.vocab}: {params / 1e6:.0f}M parameters, bf16")
    print(f"built in {time.perf_counter() - t0:.0f} s; torch threads {torch.get_num_threads()}, cpus {os.cpu_count()}")
    g = torch.Generator().manual_seed(2)
    prompts = [torch.randint(2, a.vocab, (a.prompt,), generator=g).tolist() for _ in range(P)]
    print(f"shape: {P} prompts x {G} samples, {a.prompt} prompt tokens, {a.new} new tokens a row")
    for backend in a.backends.split(","):
        print(measure(backend, model, prompts, G, a.new, a.threads), flush=True)


if __name__ == "__main__":
    main()
