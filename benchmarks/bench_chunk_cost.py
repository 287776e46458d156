"""What one micro-batch of the update costs on the default model: forward + backward of completion chunks of
several shapes against one shared prompt pass, and the least-squares line seconds = a + b x tokens through them.
a / b is the fixed cost of a chunk in tokens, the figure behind rlvr.policy.update.CHUNK_OVERHEAD_TOKENS.

The model is the default preset's: SmolLM2-135M-Instruct with LoRA r=16 on all linear layers, the update's fast
path under bf16 autocast, `torch.set_num_threads` = the core count. Shapes alternate and each is timed
`--repeats` times; the first round is a warm-up. Prints figures; asserts nothing.
Usage: PYTHONPATH=src python benchmarks/bench_chunk_cost.py [--repeats 4]
"""

import argparse
import os
import statistics
import time

SHAPES = [(1, 16), (1, 64), (2, 64), (4, 32), (4, 128), (8, 64), (16, 32), (16, 64), (8, 128), (16, 128)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--repeats", type=int, default=4)
    args = parser.parse_args()

    import torch

    from rlvr.config import Config, resolve
    from rlvr.policy.fastpath import prepare_for_update
    from rlvr.policy.load import add_lora, load_policy
    from rlvr.policy.logprobs import PromptPass

    torch.set_num_threads(os.cpu_count() or 1)
    c = Config.from_dict(resolve("default"))
    model, tokenizer = load_policy(c.model.name)
    lc = c.model.lora
    model = add_lora(model, r=lc.r, alpha=lc.alpha, dropout=lc.dropout, target_modules=lc.target_modules)
    prepare_for_update(model, c.train)
    model.train()
    g = torch.Generator().manual_seed(0)
    prompts = [torch.randint(100, 20000, (100,), generator=g).tolist() for _ in range(4)]
    rows = [prompts[i % 4] for i in range(16)]
    completions = torch.randint(100, 20000, (16, 128), generator=g)
    times: dict[tuple[int, int], list[float]] = {s: [] for s in SHAPES}
    for _ in range(args.repeats + 1):
        for n, t in SHAPES:
            with torch.autocast("cpu", dtype=torch.bfloat16):
                shared = PromptPass(model, prompts, pad_id=tokenizer.pad_token_id, split_graph=True)
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                logp = shared.logprobs(model, rows[:n], completions[:n, :t], torch.ones(n, t))
            logp.sum().backward()
            times[(n, t)].append(time.perf_counter() - start)
            model.zero_grad(set_to_none=True)
    print(
        f"threads {torch.get_num_threads()}; chunk forward + backward against a shared 4-prompt pass (median of "
        f"{args.repeats}, after a warm-up)"
    )
    print("rows x tokens | tokens | seconds")
    medians = {s: statistics.median(v[1:]) for s, v in times.items()}
    for (n, t), sec in medians.items():
        print(f"{n:>4} x {t:<5}  | {n * t:>6} | {sec:.3f}")
    xs = [n * t for n, t in SHAPES]
    ys = [medians[s] for s in SHAPES]
    mx, my = statistics.fmean(xs), statistics.fmean(ys)
    slope = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
    intercept = my - slope * mx
    print(
        f"fit: {intercept * 1e3:.0f} ms + {slope * 1e3:.2f} ms a token -> a chunk costs ~{intercept / slope:.0f} "
        f"tokens (rlvr.policy.update.CHUNK_OVERHEAD_TOKENS)"
    )


if __name__ == "__main__":
    main()
