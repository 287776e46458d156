"""Page faults and kernel time by phase of rlvr's training step: the weight sync, sampling and the update, as
`rlvr bench` runs them (its config and model), each phase's calls wrapped with `resource.getrusage`.

    PYTHONPATH=src:benchmarks python benchmarks/step_faults.py [--model NAME_OR_DIR] [--steps 6] [--threads 2]

Prints, per measured step (the first is a warm-up): minor page faults, kernel seconds and wall seconds of each phase
and of the whole step, and the process's resident size after each update. Asserts nothing (docs/performance.md,
"The update on the AVX512-BF16 kind, profiled").
"""

from __future__ import annotations

import argparse
import resource
import time

import rlvr  # noqa: F401  # before torch: OpenMP's wait as rlvr sets it


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="smollm2-135m-instruct", help="embedded model name or a transformers folder")
    p.add_argument("--steps", type=int, default=6)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()

    import torch

    import rlvr.training.step as step_module
    from rlvr.policy import memory
    from rlvr.policy.load import resolve_model_path
    from rlvr_bench.workers import rlvr_state

    torch.set_num_threads(args.threads)
    totals: dict[str, list[float]] = {}

    def add(tag: str, r0, r1, seconds: float) -> None:
        acc = totals.setdefault(tag, [0.0, 0.0, 0.0])
        acc[0] += r1.ru_minflt - r0.ru_minflt
        acc[1] += r1.ru_stime - r0.ru_stime
        acc[2] += seconds

    def wrap(owner, name: str, tag: str) -> None:
        fn = getattr(owner, name)

        def timed(*a, **k):
            r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            try:
                return fn(*a, **k)
            finally:
                add(tag, r0, resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0)
                if tag == "update":
                    print(f"  resident after the update: {(memory.resident_bytes() or 0) / 2**30:.2f} GB")

        setattr(owner, name, timed)

    wrap(step_module.distributed, "sync_sampler", "sync")
    wrap(step_module, "sample_batch", "sample")
    wrap(step_module, "update_policy", "update")
    spec = {
        "model": resolve_model_path(args.model),
        "seed": 0,
        "prompts": 4,
        "group": 8,
        "max_new_tokens": 128,
        "lora": True,
        "bf16": True,
        "sampler": "fast",
    }
    state = rlvr_state(spec)
    for step in range(args.steps):
        if step == 1:
            totals.clear()  # step 0 is the warm-up
        r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
        step_module.run_step(state, step)
        add("step", r0, resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - t0)
    n = max(args.steps - 1, 1)
    print("| phase | minor faults a step | kernel s | wall s |\n|---|---|---|---|")
    for tag, (faults, sys_s, wall) in totals.items():
        print(f"| {tag} | {faults / n:,.0f} | {sys_s / n:.2f} | {wall / n:.2f} |")


if __name__ == "__main__":
    main()
