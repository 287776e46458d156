"""Where the update's time goes, the update alone: the default preset's model (LoRA, the update's fast path, the
dtype `auto` picks here) trained on one bench-shape batch (4 prompts x 8 completions of 128 tokens, or of random lengths with
--mean-length as a real model's stop early; every row with a nonzero advantage, so every row trains, as in `rlvr
bench`'s random-weights steps) through rlvr.policy.update.
update_policy, as the step calls it.

    PYTHONPATH=src:benchmarks python benchmarks/update_profile.py [--threads 2] [--steps 3] [--profile]
        [--set KEY=VALUE ...] [--json OUT]

Prints the matmul probe in the update's dtype, the update's seconds (after a warm-up), its forward tokens a second
and its share of the probe (4 N FLOP a forward token: N the linear layers' parameters, each distinct prompt once, as
the update runs it; the figure `rlvr bench` prints). With --profile, one more update under torch's profiler: the top
operators by their own CPU time and the `aten::mm` / `addmm` / `bmm` calls by class (the frozen base's linears, the
head, LoRA's products: a dimension equal to the rank; attention's batched products), each class's FLOP over its time.
`--set` changes the config as `rlvr train --set` does; `--fused` applies rlvr_bench.shared_input (q|k|v and gate|up as
one matmul each: an experiment rlvr's update does not apply); `--ab N` times it against the separate layers in turn,
N rounds, in one process; `--ab N --vs KEY=VALUE ...` times the --set config against the same with those sets on top
(the update's settings, e.g. train.micro_batch_tokens) instead. Asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import rlvr  # noqa: F401  # before torch: OpenMP's wait as rlvr sets it (rlvr/__init__.py)


def build(sets: list[str], threads: int, mean_length: float = 0.0):
    import torch

    from rlvr.algorithms.presets import algorithm_from_config
    from rlvr.algorithms.step_batch import StepBatch
    from rlvr.config import Config, resolve
    from rlvr.policy.build import build_policy
    from rlvr.policy.update import UpdateSettings

    torch.set_num_threads(threads)
    c = Config.from_dict(resolve("default", sets))
    model, tokenizer = build_policy(c)
    model.train()
    g = torch.Generator().manual_seed(0)
    P, G, T = 4, 8, 128
    prompts = [torch.randint(100, 20000, (100,), generator=g).tolist() for _ in range(P)]
    B = P * G
    adv = torch.randn(B, generator=g)
    if mean_length:  # a real model's rows stop early: lengths drawn from an exponential of that mean, in [4, T]
        lengths = (torch.empty(B).exponential_(1 / mean_length, generator=g)).round().clamp(4, T).long()
    else:
        lengths = torch.full((B,), T)
    mask = (torch.arange(T)[None] < lengths[:, None]).float()
    batch = StepBatch(
        problems=[None] * B,  # type: ignore[list-item]  # the update reads none of a row's problem
        prompt_ids=[prompts[i // G] for i in range(B)],
        completion_ids=torch.randint(100, 20000, (B, T), generator=g),
        mask=mask,
        sampler_logp=torch.full((B, T), -2.0),
        group_ids=torch.arange(B) // G,
        lengths=lengths,
        finish=["length"] * B,
        texts=[""] * B,
        verdicts=[],
        rewards=torch.zeros(B),
        terms={},
        advantages=adv,
    )
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=1e-6)
    settings = UpdateSettings.from_config(c, tokenizer.pad_token_id)
    algo = algorithm_from_config(c.algorithm)
    linear_params = sum(
        m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear) and m.weight.shape[0] > 16
    )
    tokens = P * 100 + int(lengths.sum())  # each distinct prompt once, every completion token
    return c, model, optimizer, batch, algo, settings, linear_params, tokens


def probe(dtype, n: int = 2048, reps: int = 5) -> float:
    import torch

    a, b = torch.randn(n, n, dtype=dtype), torch.randn(n, n, dtype=dtype)
    a @ b
    start = time.perf_counter()
    for _ in range(reps):
        a @ b
    return 2 * n**3 * reps / (time.perf_counter() - start) / 1e9


def classify(name: str, shapes, rank: int, vocab: int) -> str | None:
    """The class of one matmul call from its input shapes, or None for an op that is not a matmul."""
    if name == "aten::bmm":
        return "attention's batched products"
    if name not in ("aten::mm", "aten::addmm"):
        return None
    dims = [d for s in shapes if s for d in s]
    if rank in dims:
        return "LoRA's products (a dimension of the rank)"
    if vocab in dims:
        return "the head"
    return "the frozen base's linears"


def flops(name: str, shapes) -> float:
    s = [x for x in shapes if x]
    if name == "aten::bmm" and len(s) >= 2:
        (b, m, k), (_, _, n) = s[0], s[1]
        return 2.0 * b * m * k * n
    if name == "aten::mm" and len(s) >= 2:
        (m, k), (_, n) = s[0], s[1]
        return 2.0 * m * k * n
    if name == "aten::addmm" and len(s) >= 3:
        (m, k), (_, n) = s[1], s[2]
        return 2.0 * m * k * n
    return 0.0


def ab(model, optimizer, batch, algo, settings, rounds: int, probe_s: float, vs=None) -> None:
    """Interleaved A/B in one process on one batch, medians and each variant's share of the probe (probe_s: the
    nominal FLOP's seconds at the probe's rate). With `vs` (UpdateSettings): the --set config against it (--vs);
    without: the fused groups (rlvr_bench.shared_input) against the separate layers, undone and redone between
    updates."""
    import statistics

    from rlvr.policy.update import update_policy
    from rlvr_bench.shared_input import fuse_shared_inputs, separate_shared_inputs

    variants: dict[str, tuple[Callable[[Any], object], Any]]
    if vs is not None:
        variants = {"--set": (lambda m: None, settings), "--vs": (lambda m: None, vs)}
    else:
        variants = {"fused": (fuse_shared_inputs, settings), "separate": (separate_shared_inputs, settings)}
    times: dict[str, list[float]] = {v: [] for v in variants}
    for r in range(rounds + 1):  # round 0: each variant's warm-up
        for variant, (apply, s) in variants.items():
            apply(model)
            start = time.perf_counter()
            update_policy(model, optimizer, batch, algo, s)
            if r:
                times[variant].append(time.perf_counter() - start)
    for variant, ts in times.items():
        med = statistics.median(ts)
        print(
            f"{variant}: median {med:.3f} s over {rounds} ({', '.join(f'{t:.2f}' for t in ts)}), "
            f"{probe_s / med:.1%} of the probe"
        )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--profile", action="store_true")
    p.add_argument(
        "--mean-length", type=float, default=0.0, help="completions of random lengths with this mean (0: all 128)"
    )
    p.add_argument("--set", action="append", default=[], dest="sets")
    p.add_argument(
        "--fused", action="store_true", help="q|k|v and gate|up as one matmul each (rlvr_bench.shared_input)"
    )
    p.add_argument(
        "--ab", type=int, default=0, help="N rounds of fused then separate updates in turn, after a warm-up of each"
    )
    p.add_argument(
        "--vs",
        action="append",
        default=[],
        help="with --ab: KEY=VALUE sets on top of --set for the second variant (the update's settings: train.*)",
    )
    p.add_argument("--json", default="")
    args = p.parse_args()

    import torch

    from rlvr.policy.update import update_policy

    c, model, optimizer, batch, algo, settings, n_params, tokens = build(args.sets, args.threads, args.mean_length)
    if args.fused:
        from rlvr_bench.shared_input import fuse_shared_inputs

        fuse_shared_inputs(model)
    dtype = torch.bfloat16 if c.train.autocast == "bfloat16" else torch.float32
    gflops = probe(dtype)
    if args.ab:
        vs = None
        if args.vs:
            from rlvr.config import Config, resolve
            from rlvr.policy.update import UpdateSettings

            vs = UpdateSettings.from_config(Config.from_dict(resolve("default", args.sets + args.vs)), settings.pad_id)
        ab(model, optimizer, batch, algo, settings, args.ab, 4 * n_params * tokens / 1e9 / gflops, vs)
        return
    update_policy(model, optimizer, batch, algo, settings)  # warm-up
    times = []
    for _ in range(args.steps):
        start = time.perf_counter()
        update_policy(model, optimizer, batch, algo, settings)
        times.append(time.perf_counter() - start)
    mean = sum(times) / len(times)
    share = 4 * n_params * tokens / mean / 1e9 / gflops
    out = {
        "sets": args.sets,
        "fused": args.fused,
        "dtype": str(dtype),
        "threads": args.threads,
        "probe_gflops": gflops,
        "update_s": times,
        "tokens": tokens,
        "mean_length": args.mean_length,
        "share": share,
    }
    print(
        f"{' '.join(args.sets) or 'defaults'}: {dtype}, {args.threads} threads, probe {gflops:.0f} GFLOP/s; update "
        f"{mean:.2f} s ({', '.join(f'{t:.2f}' for t in times)}), {tokens / mean:.0f} forward tok/s, "
        f"{share:.1%} of the probe"
    )
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
            update_policy(model, optimizer, batch, algo, settings)
        events = prof.key_averages()
        total = sum(e.self_cpu_time_total for e in events) / 1e6
        print(f"\nprofiled update: {total:.2f} s of own CPU time; top operators")
        print("| operator | self s | calls | share |\n|---|---|---|---|")
        ops = sorted(events, key=lambda e: -e.self_cpu_time_total)[:25]
        for e in ops:
            s = e.self_cpu_time_total / 1e6
            print(f"| {e.key} | {s:.3f} | {e.count} | {s / total:.1%} |")
        out["ops"] = [[e.key, e.self_cpu_time_total / 1e6, e.count] for e in ops]
        vocab = model.get_output_embeddings().weight.shape[0]
        classes: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0])
        for e in prof.key_averages(group_by_input_shape=True):
            cls = classify(e.key, e.input_shapes, c.model.lora.r, vocab)
            if cls:
                acc = classes[cls]
                acc[0] += flops(e.key, e.input_shapes) * e.count
                acc[1] += e.self_cpu_time_total / 1e6
                acc[2] += e.count
        print("\n| class | GFLOP | self s | calls | GFLOP/s | of the probe |\n|---|---|---|---|---|---|")
        for cls, (f, s, n) in sorted(classes.items(), key=lambda kv: -kv[1][1]):
            rate = f / s / 1e9 if s else 0.0
            print(f"| {cls} | {f / 1e9:.0f} | {s:.2f} | {n} | {rate:.0f} | {rate / gflops:.0%} |")
        out["classes"] = {k: v for k, v in classes.items()}
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()
