"""Decode at Gemma 3 270M's shape (random weights, bf16; its 262,144-token vocabulary) as ratios, in one process:
against the embedded SmolLM2-135M on the fast sampler, against the hf backend, and its decode step split into the
layers, the output head and the sampling (whole batch against rlvr.sampling.distribution's chunks of rows).

    PYTHONPATH=src python benchmarks/bench_gemma3.py [--reps 3] [--new 64]

Each figure is the best of --reps, the variants interleaved, so that a machine shared with other work slows them
alike; the load average is printed beside them. Read the ratios, not the rates. hf's generate peaked 0.35 GB above its
sampler at 1 x 2 rows of 60-odd prompt tokens, 1.0 GB at 2 x 2 and 2.3 GB at 2 x 4, so it runs at a small shape
(--hf-shape) to keep the process under 3 GB; the fast sampler runs that shape too for its ratio.
"""

from __future__ import annotations

import argparse
import gc
import os
import resource
import time

import torch

from rlvr_bench.shapes import GEMMA3_270M


class Tok:
    """What a sampler needs of a tokenizer here: a pad id and a decode (the ids as numbers)."""

    pad_token_id = 0

    def batch_decode(self, rows, skip_special_tokens=True):
        return [" ".join(map(str, r)) for r in rows]


def gemma3_270m():
    from transformers import AutoModelForCausalLM, Gemma3TextConfig

    torch.manual_seed(0)
    values = {k: v for k, v in GEMMA3_270M.items() if k != "model_type"}  # the class is the type
    return AutoModelForCausalLM.from_config(Gemma3TextConfig(**values), dtype=torch.bfloat16).eval()


def sampler_for(model, backend: str):
    from rlvr.sampling import make_sampler

    return make_sampler(backend, model, Tok(), stop_ids=[], dtype="bfloat16")


def decode_rate(sampler, shape: tuple[int, int], new: int, vocab: int, decode_only: bool = True) -> float:
    """Generated tokens per second of the fast sampler's decode timing (decode_only), or of the whole generate call."""
    P, G = shape
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(10, vocab, (60 + 7 * p,), generator=g).tolist() for p in range(P)]
    r = sampler.generate(prompts, G, max_new_tokens=new, temperature=1.0, generator=torch.Generator().manual_seed(1))
    return int(r.mask.sum()) / (r.timings["decode"] if decode_only else r.seconds)


def step_split(w, n: int, steps: int = 12) -> dict[str, float]:
    """Seconds of one decode step's parts at n rows (median): layers, head, sampling whole, sampling in chunks."""
    from rlvr.sampling import distribution, llama
    from rlvr.sampling.cascade import CascadeCache

    windows = [layer.window for layer in w.layers]
    cache = CascadeCache(len(w.layers), 4, n // 4, w.n_kv, w.head_dim, [100] * 4, w.dtype, w.fused, windows)
    tok, g = torch.randint(0, w.embed.shape[0], (n,)), torch.Generator().manual_seed(0)
    times: dict[str, list[float]] = {"layers": [], "head": [], "sampling, whole": [], "sampling, chunks": []}
    for t in range(steps):
        cache.begin_step(t)
        a = time.perf_counter()
        hidden = llama.forward(w, tok, torch.full((n,), 100 + t), cache.attend)
        b = time.perf_counter()
        logits = llama.logits(w, hidden, upcast=False)
        times["layers"].append(b - a)
        times["head"].append(time.perf_counter() - b)
        for name in ("sampling, whole", "sampling, chunks")[:: 1 if t % 2 else -1]:  # each first on every other step
            a = time.perf_counter()
            if name.endswith("whole"):
                tok, _ = distribution._sample_rows(logits, 1.0, 0, 1.0, g)
            else:
                tok, _ = distribution.sample_tokens(logits, temperature=1.0, generator=g)
            times[name].append(time.perf_counter() - a)
    return {k: sorted(v[2:])[len(v[2:]) // 2] for k, v in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--new", type=int, default=64, help="new tokens a row")
    ap.add_argument("--shape", default="4x8", help="P x G for the fast sampler against SmolLM2")
    ap.add_argument("--hf-shape", default="1x4", help="P x G for fast against hf")
    ap.add_argument("--hf-new", type=int, default=16)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    args = ap.parse_args(argv)
    from bench_sampler import load_default

    if args.threads:
        torch.set_num_threads(args.threads)
    shape = tuple(int(x) for x in args.shape.split("x"))
    hf_shape = tuple(int(x) for x in args.hf_shape.split("x"))
    rss = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6  # noqa: E731
    print(f"threads {torch.get_num_threads()}, load {os.getloadavg()}")
    best: dict[str, float] = {}
    gemma = (
        gemma3_270m()
    )  # hf first, on a fresh heap: its generate alone takes about 1 GB at 1 x 4 (the prefill's logits)
    for _ in range(args.reps):  # a sampler at a time
        for backend in ("fast", "hf"):
            key = f"gemma3-270m {backend} {args.hf_shape}"
            sampler = sampler_for(gemma, backend)
            rate = decode_rate(sampler, hf_shape, args.hf_new, 262_144, decode_only=False)
            del sampler
            gc.collect()
            best[key] = max(best.get(key, 0.0), rate)
        print(f"  {best}, load {os.getloadavg()[0]:.1f}, peak RSS {rss():.2f} GB", flush=True)
    # then the fast samplers' own weights only, their models dropped
    samplers = {"gemma3-270m fast": sampler_for(gemma, "fast")}
    del gemma
    gc.collect()
    samplers["smollm2-135m fast"] = sampler_for(load_default()[0], "fast")
    gc.collect()
    for _ in range(args.reps):  # interleaved
        for name, sampler in samplers.items():
            vocab = 49_152 if name.startswith("smollm2") else 262_144
            best[name] = max(best.get(name, 0.0), decode_rate(sampler, shape, args.new, vocab))
        print(f"  {best}, load {os.getloadavg()[0]:.1f}, peak RSS {rss():.2f} GB", flush=True)
    splits = {n: step_split(samplers["gemma3-270m fast"].w, n) for n in (8, 32, 64)}
    print(
        f"\nload {os.getloadavg()}, peak RSS {rss():.2f} GB; {args.shape}, {args.new} new tokens; tok/s, best of {args.reps}"
    )
    for k, v in best.items():
        print(f"  {k:28s} {v:8.1f}")
    print(f"gemma3-270m / smollm2-135m, fast: {best['gemma3-270m fast'] / best['smollm2-135m fast']:.2f}")
    hf_ratio = best[f"gemma3-270m fast {args.hf_shape}"] / best[f"gemma3-270m hf {args.hf_shape}"]
    print(f"gemma3-270m fast / hf at {args.hf_shape}, {args.hf_new} new tokens, whole generate calls: {hf_ratio:.1f}")
    for n, parts in splits.items():
        step = parts["layers"] + parts["head"] + parts["sampling, chunks"]
        shares = ", ".join(f"{k} {v / step:.2f}" for k, v in parts.items())
        print(f"decode step at {n} rows ({step * 1e3:.0f} ms), shares of layers + head + sampling in chunks: {shares}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
