"""How fast decoding could possibly go on this machine: the time to read the default model's weights once per
decode step, against what the fast sampler takes on real GRPO-shaped batches.

A decode step with a few dozen rows is bound by reading the weights, not by arithmetic: every step multiplies
the rows by all 134.5M bf16 weights (269 MB). Two floors are timed:
- the **read floor**: one pass over 269 MB of bf16 at the rate the machine reads memory (the best of a
  matrix-vector product and an integer max over a buffer that size): no exact bf16 sampler can step faster;
- the **linear floor**: exactly the weight matmuls of a step (the sampler's own pre-packed bf16 weights, in
  its order: q|k|v, o, gate|up and down for every layer, then the head) for 1 to 64 rows, nothing else.
From them:
- the most tokens/s a step of n rows can give, as a fraction of the bf16 matmul probe (2 x 134.5M FLOP a
  token), the measure of issue 9's "40% of the bf16 ceiling";
- where a real step's time goes above the linear floor: one decode step of n rows at generation step 40 after
  100-token prompts (4 prompts x 8 samples, rows dropped at random down to n), whole; the same forward with the
  attention replaced by a no-op; the floor; and the token draw alone;
- for real batches of the bench shape (4 prompts x 8 completions, at most 128 new tokens, temperature 1, the
  arithmetic task's prompts), the batch's tokens/s at each floor (a floor step for every decode step, at its
  number of active rows, plus the measured prefill) beside the sampler's own, and the sampler's rate as a fraction
  of the roofline at the rows alive (rlvr_bench.roofline: each step at the larger of the read floor and the
  compute floor, the step's weight FLOPs at the bf16 probe's rate; `rlvr bench --vs ENGINE` prints the same
  fraction for each engine).
Prints figures; asserts nothing.

Usage: PYTHONPATH=src python benchmarks/bench_decode_floor.py [--batches 3] [--reps 20] [--dtype auto] [--model M]
    [--threads N]

The weights' dtype is what rollout.dtype `auto` picks (bf16 where the CPU computes it in hardware, else float32), or
--dtype: the floors, the probe and the roofline are then that dtype's (float32: 4 bytes a weight, float32 matmuls).
"""

import argparse
import os


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batches", type=int, default=3, help="real 4 x 8 x 128 batches to sample")
    parser.add_argument("--reps", type=int, default=20, help="timed repeats of each floor step")
    parser.add_argument(
        "--dtype",
        choices=("auto", "bfloat16", "float32"),
        default="auto",
        help="the sampler's weights and the probe's matmuls; auto = what rollout.dtype auto picks on this machine "
        "(bf16 where the CPU has it in hardware, else float32: emulated bf16 has no roofline worth the name)",
    )
    parser.add_argument("--model", default="smollm2-135m-instruct", help="embedded model name or a folder")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="torch threads")
    args = parser.parse_args()

    import torch

    from rlvr.machine import auto_dtype
    from rlvr.policy.load import load_policy
    from rlvr.prompts.chat import encode_prompt
    from rlvr.sampling import llama, make_sampler, stop_ids
    from rlvr.tasks import load_task
    from rlvr_bench.parent import matmul_gflops, median_ms
    from rlvr_bench.roofline import batch_roofline_s, live_rows, read_floor_s

    threads = args.threads
    torch.set_num_threads(threads)
    model, tokenizer = load_policy(args.model)
    model.eval()
    name = auto_dtype(args.dtype, "float32")
    dt = getattr(torch, name)
    w = llama.load_weights(model, dt)
    n_params = sum(p.numel() for p in model.parameters())  # tied head counted once, as the FLOP convention
    # every linear layer of the decoder and the output head, at the sampler's bytes a weight
    size = torch.tensor([], dtype=dt).element_size()
    weight_bytes = size * sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear))
    probe = matmul_gflops(2048, name, threads)
    print(
        f"{threads} threads; {name} matmul probe {probe:.0f} GFLOP/s; {n_params / 1e6:.1f}M parameters; "
        f"{weight_bytes / 1e6:.0f} MB of {name} weights read per decode step"
    )

    read_s = read_floor_s(weight_bytes, args.reps)
    print(f"read floor: {read_s * 1e3:.1f} ms a step ({weight_bytes / read_s / 1e9:.1f} GB/s)")

    H = model.config.hidden_size
    inner = model.config.intermediate_size

    def floor_step(n: int) -> float:
        """Median seconds of one decode step's weight matmuls for n rows (the sampler's linear, its weights)."""
        x, xi = torch.randn(n, H).to(dt), torch.randn(n, inner).to(dt)

        def step():
            for layer in w.layers:
                w.linear(x, layer.wqkv, layer.bqkv)
                w.linear(x, layer.wo)  # its input is Hq x D wide, which is H for this model
                w.linear(x, layer.wgu)
                w.linear(xi, layer.wd)
            w.linear(x, w.lm_head)

        return median_ms(step, args.reps) / 1e3

    assert model.config.num_attention_heads * w.head_dim == H, "the floor step feeds o_proj an H-wide input"
    floors = {n: floor_step(n) for n in range(1, 65)}
    flop_per_token = 2 * n_params
    pct = lambda tps: 100 * tps * flop_per_token / (probe * 1e9)  # noqa: E731
    print(
        f"\n{'rows':>5} {'linear floor ms':>16} {'GB/s':>6} {'max tok/s':>10} {'% of probe':>11}"
        f" {'read-floor tok/s':>17} {'% of probe':>11}"
    )
    for n in (1, 4, 8, 16, 24, 32, 48, 64):
        tps = n / floors[n]
        print(
            f"{n:>5} {floors[n] * 1e3:>16.1f} {weight_bytes / floors[n] / 1e9:>6.1f} {tps:>10.0f} {pct(tps):>10.1f}%"
            f" {n / read_s:>17.0f} {pct(n / read_s):>10.1f}%"
        )

    print(f"\none decode step, ms (generation step 40, 100-token prompts; median of {args.reps}):")
    print(f"{'rows':>5} {'whole':>7} {'no attention':>13} {'floor':>7} {'draw':>6}   attention + cache   other ops")
    for n in (8, 16, 32):
        whole, no_attention, draw = _step_parts(w, n, args.reps, model.config.vocab_size)
        print(
            f"{n:>5} {whole:>7.1f} {no_attention:>13.1f} {floors[n] * 1e3:>7.1f} {draw:>6.1f}   "
            f"{whole - no_attention - draw:>17.1f}   {no_attention - floors[n] * 1e3:>9.1f}"
        )

    task = load_task("arithmetic", seed=0)
    problems = task.problems("train")
    sampler = make_sampler("fast", model, tokenizer, stop_ids=stop_ids(model.config, tokenizer), dtype=name)
    print("\nreal batches, 4 prompts x 8 completions, at most 128 new tokens, temperature 1 (batch 0 = warm-up):")
    print(
        f"{'batch':>5} {'tokens':>7} {'steps':>6} {'decode s':>9} {'linear floor s':>15} {'decode/floor':>13} "
        f"{'tok/s':>6} {'linear-floor tok/s':>19} {'read-floor tok/s':>17} {'% of probe':>11} {'% of roofline':>14}"
    )
    for b in range(args.batches + 1):
        prompts = [encode_prompt(tokenizer, task.messages(p)) for p in problems[4 * b : 4 * b + 4]]
        ro = sampler.generate(
            prompts, 8, max_new_tokens=128, temperature=1.0, generator=torch.Generator().manual_seed(b)
        )
        lengths = [int(n) for n in ro.mask.sum(dim=1)]
        steps = max(lengths)
        active = live_rows(lengths)  # step t decodes the rows still running after t tokens
        roof_s = batch_roofline_s(lengths, sum(len(p) for p in prompts), n_params, read_s, probe)
        floor_s = sum(floors[min(n, 64)] for n in active if n)
        read_tps = tokens_at(lengths, len(active) * read_s + ro.timings["prefill"])
        decode_s, tokens = ro.timings["decode"], sum(lengths)
        print(
            f"{b:>5} {tokens:>7} {steps:>6} {decode_s:>9.2f} {floor_s:>15.2f} {decode_s / floor_s:>13.2f} "
            f"{tokens / ro.seconds:>6.0f} {tokens_at(lengths, floor_s + ro.timings['prefill']):>19.0f}"
            f" {read_tps:>17.0f} {pct(read_tps):>10.1f}% {100 * roof_s / ro.seconds:>13.1f}%"
        )


def tokens_at(lengths: list[int], seconds: float) -> float:
    return sum(lengths) / seconds


def _step_parts(w, n: int, reps: int, vocab: int) -> tuple[float, float, float]:
    """Median ms of one decode step of n rows (the sampler's forward, cascade attention, head and draw), of the
    same forward and head with a no-op attention, and of the draw alone."""
    import torch

    from rlvr.sampling import llama
    from rlvr.sampling.cascade import CascadeCache
    from rlvr.sampling.distribution import sample_tokens
    from rlvr_bench.parent import median_ms

    P, G, step = 4, 8, 40
    g = torch.Generator().manual_seed(n)
    cache = CascadeCache(len(w.layers), P, G, w.n_kv, w.head_dim, [100] * P, w.dtype, kernel=w.fused)
    for t in (cache.pk, cache.pv, cache.gk, cache.gv):
        t.copy_(torch.randn(t.shape, generator=g))
    keep = torch.zeros(P * G, dtype=torch.bool)
    keep[torch.randperm(P * G, generator=g)[:n]] = True
    cache.keep(keep)
    cache.begin_step(step)
    tokens, positions = torch.randint(100, 20000, (n,), generator=g), torch.full((n,), 100 + step)
    logits = torch.randn(n, vocab, generator=g).to(w.dtype)

    def whole():
        hidden = llama.forward(w, tokens, positions, cache.attend)
        sample_tokens(llama.logits(w, hidden, upcast=False), temperature=1.0, generator=g)

    def no_attention():
        llama.logits(w, llama.forward(w, tokens, positions, lambda i, q, k, v: q.reshape(q.shape[0], -1)), upcast=False)

    def draw():
        sample_tokens(logits, temperature=1.0, generator=g)

    return tuple(median_ms(f, reps) for f in (whole, no_attention, draw))


if __name__ == "__main__":
    main()
