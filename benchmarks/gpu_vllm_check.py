"""The vLLM rollout backend on one CUDA GPU: rollout tokens/s on the GRPO shape, and the weight-sync time.

    python benchmarks/gpu_vllm_check.py [--weight-sync full|lora] [--batches 3]

SmolLM2-135M-Instruct (rlvr's embedded model, converted offline), float32 policy on the GPU with LoRA r=16
as rlvr's default preset, 4 arithmetic-task prompts x 8 completions x at most 128 new tokens at temperature 1,
one warm-up batch, then `--batches` timed ones, each after a weight sync (as in training). Prints figures;
asserts nothing. The engine alone; benchmarks/gpu_check.sh checks the backend inside training runs.
"""

from __future__ import annotations

import argparse
import sys
import time

import torch

from rlvr.policy.load import add_lora, load_policy
from rlvr.prompts.chat import encode_prompt
from rlvr.sampling import make_sampler
from rlvr.tasks import load_task


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(prog="gpu_vllm_check.py")
    ap.add_argument("--weight-sync", choices=("full", "lora"), default="full")
    ap.add_argument("--batches", type=int, default=3)
    ap.add_argument("-P", type=int, default=4)
    ap.add_argument("-G", type=int, default=8)
    ap.add_argument("--max-new-tokens", type=int, default=128)
    args = ap.parse_args(argv)
    model, tok = load_policy("smollm2-135m-instruct", "float32")
    model = add_lora(model.cuda(), r=16, alpha=32).eval()
    task = load_task("arithmetic")
    prompts = [encode_prompt(tok, task.messages(p)) for p in task.problems("train")[: args.P]]
    t0 = time.perf_counter()
    sampler = make_sampler("vllm", model, tok, stop_ids=[tok.eos_token_id], weight_sync=args.weight_sync)
    print(
        f"engine start: {time.perf_counter() - t0:.1f} s (vLLM {__import__('vllm').__version__}, "
        f"{torch.cuda.get_device_name()})"
    )
    gen = torch.Generator().manual_seed(0)
    rates = []
    for b in range(args.batches + 1):
        sampler.sync(model)
        ro = sampler.generate(prompts, args.G, max_new_tokens=args.max_new_tokens, temperature=1.0, generator=gen)
        label = "warm-up" if b == 0 else f"batch {b}"
        print(
            f"{label}: {ro.num_generated_tokens} tokens in {ro.seconds:.2f} s = {ro.tokens_per_second:.0f} tok/s; "
            f"sync ({args.weight_sync}) {sampler.sync_seconds * 1e3:.0f} ms; "
            f"{ro.finish.count('stop')}/{len(ro.finish)} stopped"
        )
        if b:
            rates.append((ro.num_generated_tokens, ro.seconds))
    tokens, seconds = map(sum, zip(*rates))
    print(
        f"{args.P} prompts x {args.G} x {args.max_new_tokens} tokens: {tokens / seconds:.0f} tok/s over "
        f"{args.batches} batches"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
