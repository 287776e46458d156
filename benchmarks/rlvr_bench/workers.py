"""The child side of `rlvr bench`: one process per framework, stepped by the parent over stdin/stdout.

Run as `python -m rlvr_bench.workers SPEC_JSON`, where SPEC says the framework ("rlvr" or "trl"), the model
folder, the shape (P, G, max new tokens, LoRA), seed, threads and the step count. The child loads
everything, prints one `BENCH {"event": "ready", ...}` line, then for each line "step" on stdin runs exactly
one training step and prints one `BENCH {"event": "step", ...}` line with its timings and token counts. So
the parent can alternate the two frameworks step by step while the waiting one sits blocked on a read (no
CPU), and both see the same machine noise.

`rlvr bench --vs ENGINE` adds sampler-only workers (rlvr_bench.rollouts): "rlvr-sampler" and "engine", whose
steps are one rollout batch each and which also answer "sync" (reload the weights); an "engine" worker runs under
its engine's venv (rlvr_bench.engines).

The TRL worker runs under TRL's own interpreter (a separate venv); it imports only rlvr's task and reward
(pure Python plus math-verify), never rlvr's trainer. Both workers build the same problems in the same order
from the same seeded prompt stream, score with the same reward (`Reward.as_trl()` on the TRL side), and
use the same thread count.

Token counts per step: `gen_tokens` (completion tokens sampled), `prompt_tokens` (the P prompts, each once),
`fwd_tokens` (the tokens the update ran through the model: rlvr's, each distinct prompt of the rows it kept once
and their completions; TRL's, every row's prompt and completion, as each framework computes them), `lengths` (each
row's completion tokens: the live rows of every decode step, for the roofline). rlvr's ready line also names the
sampler class that runs (`sampler`) and, where the fast sampler fell back to hf, its warning (`fallback`).

This module is the children's entry point and rlvr's own worker; what every child shares (the protocol lines, the
bench config, the problems, versions) is rlvr_bench.child, and the parent's end of the pipe rlvr_bench.parent.Worker.

Phases reported per step (seconds): `generate` (the sampler only), `verify` (scoring), `train` (log-probs,
loss, backward, optimizer step), `other` (the rest: weight sync to the sampler, advantages, bookkeeping).
"""

from __future__ import annotations

import json
import os
import sys
import time
import warnings

from rlvr_bench.child import bench_config, emit, peak_rss_bytes, set_threads, versions, wait_for_step

FALLBACK = "rollout.backend=fast does not run this model"  # the fast sampler's warning when it samples with hf


def run_rlvr(spec: dict) -> None:
    """rlvr's trainer, one step at a time: `rlvr.training.step.run_step`, the function the training loop calls."""
    import torch

    from rlvr.training.step import run_step

    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        state = rlvr_state(spec)
    for w in caught:  # still shown (stderr), and the sampler's fallback reported
        warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    n_params = sum(p.numel() for n, p in state.model.named_parameters() if "lora_" not in n)
    emit(
        "ready",
        load_s=time.perf_counter() - t0,
        params=n_params,
        rss=peak_rss_bytes(),
        versions=versions(),
        sampler=type(state.sampler).__name__,
        fallback=next((str(w.message) for w in caught if FALLBACK in str(w.message)), ""),
    )
    for step in range(spec["steps"]):
        if not wait_for_step():
            return
        t0 = time.perf_counter()
        result = run_step(state, step)
        wall = time.perf_counter() - t0
        emit(
            "step",
            **step_figures(result, state.algo.beta),
            wall=wall,
            rss=peak_rss_bytes(),
            threads=torch.get_num_threads(),
        )


def rlvr_state(spec: dict):
    """The trainer's state for the bench shape: `rlvr.training.step.setup` on the bench config, the model loaded
    as the trainer loads it (in the config's model.dtype)."""
    from rlvr.policy.load import load_policy
    from rlvr.training.step import check_components, setup

    parts = check_components(bench_config(spec))
    return setup(parts, load_policy(spec["model"], parts.cfg.model.dtype))


def step_figures(result, beta: float) -> dict:
    """A step's phases (seconds) and token counts, from its metrics line and batch."""
    row, batch = result.row, result.batch
    gen, ver, train = row["time/generate"], row["time/verify"], row["time/train"]
    # rows the update ran a forward on (zero-advantage rows carry no gradient and are skipped; see rlvr.policy.update)
    active = [r for r in range(len(batch)) if batch.mask[r].sum() > 0 and (batch.advantages[r] != 0 or beta > 0)]
    prompts = {tuple(p) for p in batch.prompt_ids}  # the P prompts, each once
    # the update runs each distinct prompt of its rows once (rlvr.policy.logprobs.PromptPass), then the completions
    run_prompts = {tuple(batch.prompt_ids[r]) for r in active}
    return {
        "step": row["step"],
        "generate": gen,
        "verify": ver,
        "train": train,
        "other": row["time/step"] - gen - ver - train,
        "gen_tokens": int(batch.lengths.sum()),
        "lengths": [int(n) for n in batch.lengths],  # each row's completion tokens (the roofline's live rows)
        "prompt_tokens": sum(len(p) for p in prompts),
        "fwd_tokens": sum(map(len, run_prompts)) + sum(int(batch.lengths[r]) for r in active),
        "rows": len(batch),
        "reward": row["reward/mean"],
        "active_rows": result.update.get("active_rows", 0),
    }


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    set_threads(spec["threads"])
    import rlvr

    if spec["framework"] != "rlvr" and rlvr.ONEDNN_CACHE_SET_HERE:
        # a peer runs as its own users run it: oneDNN's default cache, not the cap importing rlvr set
        # (oneDNN reads it at its first primitive, which has not been made yet in this process)
        os.environ.pop("ONEDNN_PRIMITIVE_CACHE_CAPACITY")
    if spec["framework"] == "rlvr":
        run_rlvr(spec)
    elif spec["framework"] == "trl":
        from rlvr_bench.trl_worker import run_trl

        run_trl(spec)
    elif spec["framework"] == "trl-budget":
        from rlvr_bench.trl_worker import run_trl_budget

        run_trl_budget(spec)
    elif spec["framework"] == "rlvr-sampler":  # the sampler-only sides of `rlvr bench --vs ENGINE`
        from rlvr_bench.rollouts import run_rlvr_sampler

        run_rlvr_sampler(spec)
    elif spec["framework"] == "engine":  # under the engine's own venv
        from rlvr_bench.rollouts import run_engine_worker

        run_engine_worker(spec)
    else:
        raise SystemExit(f"unknown framework {spec['framework']!r}")
    emit("done", rss=peak_rss_bytes())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
