"""How fast decoding could possibly go on this machine: the time to stream the default model's weights once per
decode step, against what the fast sampler takes on real GRPO-shaped batches.

A decode step with a few dozen rows is bound by reading the weights, not by arithmetic: every step multiplies
the rows by all 134.5M bf16 weights (268 MB), so it cannot be faster than the weight matmuls alone. This script
times exactly those matmuls (the sampler's own pre-packed bf16 weights, in its order: q|k|v, o, gate|up and down
for every layer, then the head) for 1 to 64 rows, with nothing else in the step: the floor of a decode step.
From it:
- the most tokens/s a step of n rows can give (n / floor), and that as a fraction of the bf16 matmul probe
  (2 x 134.5M FLOP a token), the measure of issue 9's "40% of the bf16 ceiling";
- for real batches of the bench shape (4 prompts x 8 completions, at most 128 new tokens, temperature 1, the
  arithmetic task's prompts), the floor of the whole batch (the floor at each step's number of active rows,
  summed) beside the sampler's decode time.
Prints figures; asserts nothing.

Usage: PYTHONPATH=src python benchmarks/bench_decode_floor.py [--batches 3] [--reps 20]
"""

import argparse
import os
import statistics
import time


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=3, help="real 4 x 8 x 128 batches to sample")
    parser.add_argument("--reps", type=int, default=20, help="timed repeats of each floor step")
    args = parser.parse_args()

    import torch

    from rlvr.batch import encode_prompt
    from rlvr.bench import matmul_gflops
    from rlvr.models import load_policy
    from rlvr.sampling import llama, make_sampler
    from rlvr.tasks import load_task

    threads = os.cpu_count() or 1
    torch.set_num_threads(threads)
    model, tokenizer = load_policy("smollm2-135m-instruct")
    model.eval()
    w = llama.load_weights(model, torch.bfloat16)
    n_params = sum(p.numel() for p in model.parameters())  # tied head counted once, as the FLOP convention
    # every linear layer of the decoder and the output head, 2 bytes a weight
    weight_bytes = 2 * sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    bf16 = matmul_gflops(2048, "bfloat16", threads)
    print(f"{threads} threads; bf16 matmul probe {bf16:.0f} GFLOP/s; {n_params / 1e6:.1f}M parameters; "
          f"{weight_bytes / 1e6:.0f} MB of bf16 weights read per decode step")

    H = model.config.hidden_size
    inner = model.config.intermediate_size

    def floor_step(n: int) -> float:
        """Median seconds of one decode step's weight matmuls for n rows (the sampler's linear, its weights)."""
        x, xi = torch.randn(n, H).to(torch.bfloat16), torch.randn(n, inner).to(torch.bfloat16)
        times = []
        for rep in range(args.reps + 2):
            t = time.perf_counter()
            for layer in w.layers:
                w.linear(x, layer.wqkv, layer.bqkv)
                w.linear(x, layer.wo)  # its input is Hq x D wide, which is H for this model
                w.linear(x, layer.wgu)
                w.linear(xi, layer.wd)
            w.linear(x, w.lm_head)
            if rep >= 2:
                times.append(time.perf_counter() - t)
        return statistics.median(times)

    assert model.config.num_attention_heads * w.head_dim == H, "the floor step feeds o_proj an H-wide input"
    floors = {n: floor_step(n) for n in range(1, 65)}
    flop_per_token = 2 * n_params
    print(f"\n{'rows':>5} {'floor ms':>9} {'GB/s':>6} {'max tok/s':>10} {'% of bf16 probe':>16}")
    for n in (1, 4, 8, 16, 24, 32, 48, 64):
        tps = n / floors[n]
        print(f"{n:>5} {floors[n] * 1e3:>9.1f} {weight_bytes / floors[n] / 1e9:>6.1f} {tps:>10.0f} "
              f"{100 * tps * flop_per_token / (bf16 * 1e9):>15.1f}%")

    task = load_task("arithmetic", seed=0)
    problems = task.problems("train")
    stop_ids = sorted({tokenizer.eos_token_id, tokenizer.convert_tokens_to_ids("<|im_end|>")})
    sampler = make_sampler("fast", model, tokenizer, stop_ids=stop_ids, dtype="bfloat16")
    print(f"\nreal batches, 4 prompts x 8 completions, at most 128 new tokens, temperature 1 (batch 0 = warm-up):")
    print(f"{'batch':>5} {'tokens':>7} {'steps':>6} {'decode s':>9} {'floor s':>8} {'decode/floor':>13} "
          f"{'tok/s':>6} {'floor tok/s':>12}")
    for b in range(args.batches + 1):
        prompts = [encode_prompt(tokenizer, task.messages(p)) for p in problems[4 * b: 4 * b + 4]]
        ro = sampler.generate(prompts, 8, max_new_tokens=128, temperature=1.0,
                              generator=torch.Generator().manual_seed(b))
        lengths = [int(n) for n in ro.mask.sum(dim=1)]
        steps = max(lengths)
        # step t decodes the rows still running after t tokens (the first token comes from the prefill)
        active = [sum(L > t for L in lengths) for t in range(1, steps)]
        floor_s = sum(floors[min(n, 64)] for n in active if n)
        decode_s, tokens = ro.timings["decode"], sum(lengths)
        print(f"{b:>5} {tokens:>7} {steps:>6} {decode_s:>9.2f} {floor_s:>8.2f} {decode_s / floor_s:>13.2f} "
              f"{tokens / ro.seconds:>6.0f} {tokens / (floor_s + ro.timings['prefill']):>12.0f}")


if __name__ == "__main__":
    main()
