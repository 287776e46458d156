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
and their completions; TRL's, every row's prompt and completion, as each framework computes them).

Phases reported per step (seconds): `generate` (the sampler only), `verify` (scoring), `train` (log-probs,
loss, backward, optimizer step), `other` (the rest: weight sync to the sampler, advantages, bookkeeping).
"""

from __future__ import annotations

import json
import os
import resource
import sys
import time

PREFIX = "BENCH "


def emit(event: str, **fields) -> None:
    """One protocol line on the real stdout (libraries print there too; the parent keeps only these)."""
    sys.__stdout__.write(PREFIX + json.dumps({"event": event, **fields}) + "\n")
    sys.__stdout__.flush()


def wait_for_step() -> bool:
    """Block until the parent asks for a step; False when it says stop (or closed the pipe)."""
    line = sys.stdin.readline()
    return line.strip() == "step"


def peak_rss_bytes() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


def set_threads(n: int) -> None:
    import torch

    torch.set_num_threads(n)


def bench_config(spec: dict) -> dict:
    """rlvr's default preset reshaped to the benchmark: the config both workers read their settings from."""
    from rlvr.config import resolve

    return resolve(
        "default",
        [
            f"seed={spec['seed']}",
            f"rollout.prompts_per_step={spec['prompts']}",
            f"rollout.group_size={spec['group']}",
            f"rollout.max_new_tokens={spec['max_new_tokens']}",
            f"model.lora.enabled={str(spec['lora']).lower()}",
            f"train.autocast={'bfloat16' if spec['bf16'] else 'none'}",
            f"rollout.backend={spec['sampler']}",
            *spec.get("sets", ()),  # KEY=VALUE on top (benchmarks/step_profile.py's variants)
        ],
    )


def step_problems(cfg: dict, n_steps: int):
    """The task and the problems of each step, as rlvr's seeded prompt stream draws them: n_steps lists of P."""
    from rlvr.prompts.stream import make_stream
    from rlvr.tasks import load_task

    task = load_task(cfg["task"]["name"], **cfg["task"]["settings"])
    stream = make_stream({}, task.problems("train"), cfg["seed"])
    return task, [stream.take(cfg["rollout"]["prompts_per_step"], s, 0) for s in range(n_steps)]


def load_model(path: str):
    """The peers' model (TRL, vLLM workers): plain `from_pretrained`, as their users load it; rlvr's own worker
    goes through `rlvr.policy.load.load_policy` like the trainer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    return model, tokenizer


def run_rlvr(spec: dict) -> None:
    """rlvr's trainer, one step at a time: `rlvr.training.step.run_step`, the function the training loop calls."""
    import torch

    from rlvr.training.step import run_step

    t0 = time.perf_counter()
    state = rlvr_state(spec)
    n_params = sum(p.numel() for n, p in state.model.named_parameters() if "lora_" not in n)
    emit("ready", load_s=time.perf_counter() - t0, params=n_params, rss=peak_rss_bytes(), versions=_versions())
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
    as the trainer loads it."""
    from rlvr.policy.load import load_policy
    from rlvr.training.step import check_components, setup

    return setup(check_components(bench_config(spec)), load_policy(spec["model"]))


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
        "prompt_tokens": sum(len(p) for p in prompts),
        "fwd_tokens": sum(map(len, run_prompts)) + sum(int(batch.lengths[r]) for r in active),
        "rows": len(batch),
        "reward": row["reward/mean"],
        "active_rows": result.update.get("active_rows", 0),
    }


def _versions() -> dict:
    import torch
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    for name in ("peft", "trl"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            pass
    return out


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
