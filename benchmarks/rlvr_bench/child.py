"""What every child process of `rlvr bench` shares: its end of the line protocol (rlvr_bench.workers says what the
lines are), and the settings, problems, model and versions each side reads the same way.

A leaf: the workers (rlvr_bench.workers, trl_worker, rollouts) and the engines' modules import it, and it imports
nothing of rlvr_bench, so the harness's modules import one another without a circle.
"""

from __future__ import annotations

import json
import resource
import sys

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
    """rlvr's default preset (or spec["config"], a preset or config file) reshaped to the benchmark: the config both
    workers read their settings from."""
    from rlvr.config import resolve

    return resolve(
        spec.get("config") or "default",
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


def load_model(path: str, dtype: str = "float32"):
    """The peers' model (TRL, vLLM workers): plain `from_pretrained` in `dtype`, as their users load it; rlvr's own
    worker goes through `rlvr.policy.load.load_policy` like the trainer."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    return model, tokenizer


def versions() -> dict:
    import torch
    import transformers

    out = {"torch": torch.__version__, "transformers": transformers.__version__}
    for name in ("peft", "trl"):
        try:
            out[name] = __import__(name).__version__
        except ImportError:
            pass
    return out
