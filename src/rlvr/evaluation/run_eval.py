"""Evaluate a real model: load it (by name, from memory, or from a run directory), check the split for
contamination and leaks, sample through the rollout sampler, score with the training reward, summarise.

    records, summary = evaluate_model("runs/train", "arithmetic", EvalSettings(split="heldout", n=8))

A run directory (one holding config.yaml and final/merged) is evaluated with the reward and task settings
it was trained with, so "the same verifier the training used" is not left to the user to repeat; its
training split is what contamination is checked against.

Determinism: one torch generator seeded from `seed` feeds every sampling call in order, so the same model,
problems, n and batch size give the same completions. Problems are batched so that one `generate` call
holds about `rows_per_call` sequences: the HF sampler keeps (rows, T, vocab) logits, so a wide batch costs
memory (32 rows x 128 tokens x 49k vocab is ~0.8 GB in float32).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr.config import DEFAULTS
from rlvr.evaluation.driver import evaluate
from rlvr.evaluation.stats import coverage_ks
from rlvr.evaluation.summary import summarize
from rlvr.prompts.chat import encode_prompt
from rlvr.tasks.base import Problem
from rlvr.tasks.hygiene import check_contamination, find_leaks

ROWS_PER_CALL = 32


def is_run_dir(path) -> bool:
    if not isinstance(path, (str, os.PathLike)):  # an in-memory (model, tokenizer) pair
        return False
    p = Path(path)
    return p.is_dir() and (p / "config.yaml").exists()


def read_run(path) -> tuple[Path, dict]:
    """(final/merged folder, resolved config) of a training or SFT run directory; the folder is None for a run
    saved without its merged model (model.save_merged: false), which is evaluated as its adapter on its model."""
    path = Path(path)
    merged = path / "final" / "merged"
    if not (merged / "config.json").exists() and (path / "final" / "adapter" / "adapter_config.json").exists():
        return None, run_config(path)  # model.save_merged: false: the adapter on the run's model (resolve_model)
    if not (merged / "config.json").exists():
        raise FileNotFoundError(
            f"{path} is a run directory without a final model ({merged} is missing); is it still training?"
        )
    return merged, run_config(path)


def is_checkpoint_dir(path) -> bool:
    """A checkpoint of a run (RUN/checkpoints/step-N): evaluated as the run's model at that step."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(path)
    return (p / "trainable.safetensors").exists() and p.parent.name == "checkpoints" and is_run_dir(p.parent.parent)


def is_adapter_dir(path) -> bool:
    """A PEFT adapter folder (adapter_config.json naming its base model), such as TRL's or rlvr's final/adapter."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    p = Path(path)
    return (p / "adapter_config.json").exists() and not (p / "config.json").exists()


def run_config(path) -> dict | None:
    """The resolved config of a run directory, or of the run a checkpoint belongs to; None for anything else."""
    import yaml

    if is_checkpoint_dir(path):
        path = Path(path).parent.parent
    elif not is_run_dir(path):
        return None
    return yaml.safe_load((Path(path) / "config.yaml").read_text())


def checkpoint_policy(path, cfg: dict):
    """(model, tokenizer) of a run at one of its checkpoints: the run's model and LoRA adapter (policy.build.
    with_adapter), the checkpoint's trainable tensors copied in, the adapter merged as the run's final model is
    (policy.load.merged_copy). Where the trainer stored the frozen base in bf16 (policy.fastpath.stores_base_in_bf16)
    the base is rounded the same way first: the last checkpoint then gives the run's final/merged weights exactly."""
    from rlvr.config import Config
    from rlvr.policy.build import with_adapter
    from rlvr.policy.fastpath import stores_base_in_bf16
    from rlvr.policy.load import cast_frozen_base, load_policy, merged_copy
    from rlvr.rundir.checkpoint import load_trainable

    c = Config.from_dict(cfg)
    model, tokenizer = load_policy(c.model.name, c.model.dtype)
    model = with_adapter(model, c)
    if c.model.lora.enabled and stores_base_in_bf16(c.train):
        cast_frozen_base(model, torch.bfloat16)
    load_trainable(Path(path), model)
    return (merged_copy(model) if c.model.lora.enabled else model), tokenizer


def adapter_policy(path):
    """(model, tokenizer) of a PEFT adapter folder: its base model (an embedded name, folder or hub id, as
    adapter_config.json names it) with the adapter merged."""
    import json

    from peft import PeftModel

    from rlvr.policy.load import load_policy, peft_quietly

    base = json.loads((Path(path) / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if not base:
        raise ValueError(f"{path}/adapter_config.json names no base_model_name_or_path")
    model, tokenizer = load_policy(base, "float32")
    with peft_quietly():
        return PeftModel.from_pretrained(model, str(path)).merge_and_unload(), tokenizer


def run_as_adapter(path, cfg: dict):
    """(model, tokenizer) of a run directory (its resolved config `cfg`) as its base model plus its final LoRA
    adapter (peft), for the remote backend, whose servers hold the base model and take the policy as an adapter."""
    from peft import PeftModel

    from rlvr.policy.load import load_policy, peft_quietly

    path = Path(path)
    if not (path / "final" / "adapter" / "adapter_config.json").exists():
        raise ValueError(
            f"{path} has no final/adapter (trained without LoRA?): the remote backend samples a run as "
            f"an adapter on the servers' base model; evaluate it with a local backend"
        )
    model, tokenizer = load_policy(cfg["model"]["name"], "float32")
    with peft_quietly():
        return PeftModel.from_pretrained(model, str(path / "final" / "adapter")), tokenizer


def config_settings(cfg: dict, quiet: bool = False, split: str | None = None, limit: int | None = None) -> EvalSettings:
    """evaluate_model's settings from a resolved config, the same for every model and set it compares: the eval
    section's split, limit, samples per problem, k (eval.ks and the coverage curve's 1, 2, 4, ..., n) and greedy
    pass; the rollout's temperature, length and backend; the seed. `split` / `limit` override the eval section's."""
    e, r = cfg["eval"], cfg["rollout"]
    return EvalSettings(
        split=split or e["split"],
        n=e["n"],
        ks=tuple(sorted(set(e["ks"]) | set(coverage_ks(e["n"])))),
        temperature=r["temperature"],
        max_new_tokens=r["max_new_tokens"],
        greedy=e["greedy"],
        backend=r["backend"],
        seed=cfg["seed"],
        limit=(e["limit"] if limit is None else limit) or None,
        progress=not quiet,
    )


def limit_problems(problems: Sequence[Problem], limit: int | None) -> list[Problem]:
    """The first `limit` problems taken evenly across bands (round robin in band order), kept in their
    original order, so that a small evaluation still reports every band."""
    if not limit or limit >= len(problems):
        return list(problems)
    by_band: dict[str, list[int]] = {}
    for i, p in enumerate(problems):
        by_band.setdefault(p.band, []).append(i)
    queues, chosen = [list(v) for v in by_band.values()], []
    while len(chosen) < limit:
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    return [problems[i] for i in sorted(chosen)]


class _Generate:
    """The driver's policy_generate over a rollout sampler: chats -> token ids -> n texts per prompt."""

    def __init__(self, sampler, tokenizer, max_new_tokens: int, seed: int):
        self.sampler, self.tokenizer, self.max_new_tokens = sampler, tokenizer, max_new_tokens
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, chats: list[list[dict]], n: int, temperature: float) -> list[list[str]]:
        ids = [encode_prompt(self.tokenizer, chat) for chat in chats]
        ro = self.sampler.generate(
            ids, n, max_new_tokens=self.max_new_tokens, temperature=temperature, generator=self.generator
        )
        return [ro.texts[i * n : (i + 1) * n] for i in range(len(chats))]


class _Tracked:
    """The reward, counting verdicts into a progress bar: running pass@1 of the sampled pass, then greedy.
    The driver scores every sampled batch before any greedy one, so the first `n_sampled` rows are sampled."""

    def __init__(self, reward, bar, n_sampled: int):
        self.reward, self.bar, self.n_sampled = reward, bar, n_sampled
        self.seen = {"sampled": [0, 0], "greedy": [0, 0]}

    def __call__(self, completions, problems):
        result = self.reward(completions, problems)
        for v in result.verdicts:
            done = self.seen["sampled"][1] + self.seen["greedy"][1]
            counts = self.seen["sampled" if done < self.n_sampled else "greedy"]
            counts[0] += v.status == "correct"
            counts[1] += 1
        post = {mode: f"{c / t:.3f}" for mode, (c, t) in self.seen.items() if t}
        self.bar.set_postfix({("pass@1" if k == "sampled" else k): v for k, v in post.items()})
        self.bar.update(len(completions))
        return result


def resolve_model(model_or_path, task, task_settings: dict | None, reward_cfg: dict | None, as_adapter: bool = False):
    """Returns (model, tokenizer, task object, task settings, reward config, training problems or None, label).

    A run directory supplies its reward config, and its task settings when `task` is its task's name
    (or None); its training split is returned for the contamination check. `as_adapter`: a run directory is loaded
    as its base model plus its adapter (run_as_adapter) instead of its merged model."""
    from rlvr.policy.load import load_policy, merged_copy
    from rlvr.tasks import load_task

    settings = dict(task_settings or {})
    run_train = None
    if isinstance(model_or_path, tuple):
        (model, tokenizer), label = model_or_path, "in-memory model"
    elif is_run_dir(model_or_path):
        merged, cfg = read_run(model_or_path)
        if as_adapter or merged is None:
            model, tokenizer = run_as_adapter(model_or_path, cfg)
            model = model if as_adapter else merged_copy(model)
        else:
            model, tokenizer = load_policy(str(merged), "float32")
        label = str(model_or_path)
        task, settings, reward_cfg, run_train = _as_run(cfg, task, settings, reward_cfg)
    elif is_checkpoint_dir(model_or_path):
        cfg = run_config(model_or_path)
        model, tokenizer = checkpoint_policy(model_or_path, cfg)
        task, settings, reward_cfg, run_train = _as_run(cfg, task, settings, reward_cfg)
        label = str(model_or_path)
    else:
        model, tokenizer = (
            adapter_policy(model_or_path)
            if is_adapter_dir(model_or_path)
            else load_policy(str(model_or_path), "float32")
        )
        label = str(model_or_path)
    if task is None:
        raise ValueError("no task given (only a run directory records its own)")
    task_obj = load_task(task, **settings) if isinstance(task, str) else task
    return model, tokenizer, task_obj, settings, reward_cfg or DEFAULTS["reward"], run_train, label


def _as_run(cfg: dict, task, settings: dict, reward_cfg: dict | None):
    """(task, settings, reward config, training problems) of a model that a run trained: its reward and, when the
    task is the run's own (or not given), its task settings; its training split for the contamination check."""
    from rlvr.tasks import load_task

    run_train = load_task(cfg["task"]["name"], **cfg["task"]["settings"]).problems("train")
    if task is None or task == cfg["task"]["name"]:
        task, settings = cfg["task"]["name"], {**cfg["task"]["settings"], **settings}
    return task, settings, reward_cfg or cfg["reward"], run_train


def hygiene_report(train: Sequence[Problem], problems: Sequence[Problem], split: str, allow_contaminated: bool) -> dict:
    """Contamination against the training data (refused unless allowed) and gold-in-prompt leaks."""
    overlaps = check_contamination(train, problems, name=f"split {split!r}", allow_contaminated=allow_contaminated)
    leaks = find_leaks(problems)
    return {
        "train_problems": len(train),
        "contaminated": len({o.eval_id for o in overlaps}),
        "overlaps": [asdict(o) for o in overlaps[:20]],
        "leaks": len(leaks),
        "leak_examples": [asdict(x) for x in leaks[:10]],
    }


@dataclass(frozen=True)
class EvalSettings:
    """How an evaluation samples and scores. n samples per problem (0: the greedy decode alone) scored as pass@k for
    each k in ks (those above n dropped), plus one greedy decode; backend None takes the rollout section's; limit
    takes that many problems evenly across bands; rows_per_call bounds a generate call (CPU memory)."""

    split: str = "heldout"
    n: int = 8
    ks: tuple = (1, 4, 8)
    temperature: float = 1.0
    max_new_tokens: int = 128
    greedy: bool = True
    backend: str | None = "hf"
    seed: int = 0
    limit: int | None = None
    allow_contaminated: bool = False
    rows_per_call: int = ROWS_PER_CALL
    n_boot: int = 2000
    progress: bool = True


def _sample_and_score(sampler, tokenizer, reward, task_obj, problems, ks, e: EvalSettings) -> list:
    """Every problem's n samples and greedy decode through the sampler, each scored (strictly and leniently) by
    the reward, behind one progress bar."""
    total = len(problems) * (e.n + int(e.greedy))
    with tqdm(total=total, desc=f"rlvr eval {e.split}", unit="completion", disable=not e.progress) as bar:
        return evaluate(
            _Generate(sampler, tokenizer, e.max_new_tokens, e.seed),
            _Tracked(reward, bar, len(problems) * e.n),
            problems,
            n=e.n,
            ks=ks,
            temperature=e.temperature,
            greedy=e.greedy,
            to_messages=task_obj.messages,
            batch_size=max(1, e.rows_per_call // max(e.n, 1)),
            lenient_format=getattr(task_obj, "answer_format", None) or "boxed",
            lenient_reward=reward,
        )


def evaluate_model(
    model_or_path,
    task=None,
    settings: EvalSettings = EvalSettings(),
    *,
    task_settings: dict | None = None,
    reward_cfg: dict | None = None,
    rollout: dict | None = None,
    train_problems: Sequence[Problem] | None = None,
):
    """Evaluate a model on one split of a task (as `settings` say); returns (records, summary).

    model_or_path: an embedded name, local folder or hub id; a run directory; or (model, tokenizer).
    task: a task name (with task_settings) or a task object; None only with a run directory.
    reward_cfg: the reward section (default: the run's, else the task's own grader).
    train_problems: what contamination is checked against (default: the run's, else the task's train split).
    rollout: the rollout section whose backend (where settings.backend is None), backend settings (remote urls, vLLM's
    engine) and dtype the sampler takes (default: the run's, else the built-in defaults).
    The summary is evaluation.summarize's dict plus "setup" (what was run, wall time) and "hygiene".
    Raises ContaminationError before any sampling when the split overlaps the training data.
    """
    from rlvr.sampling import build_sampler
    from rlvr.verifiers.compose import task_reward

    e = settings
    ks = sorted({k for k in e.ks if k <= e.n} | ({1} if e.n else set()))  # n = 0: the greedy pass alone
    if rollout is None:
        rollout = (run_config(model_or_path) or DEFAULTS)["rollout"]
    backend = e.backend or rollout["backend"]
    # the remote servers hold the base model: a run directory is evaluated as its adapter on that base
    model, tokenizer, task_obj, task_settings, reward_cfg, run_train, label = resolve_model(
        model_or_path, task, task_settings, reward_cfg, as_adapter=backend == "remote"
    )
    reward_cfg, reward = task_reward(reward_cfg, task_obj)
    problems = limit_problems(task_obj.problems(e.split), e.limit)
    if not problems:
        raise ValueError(f"split {e.split!r} of task {getattr(task_obj, 'name', task)!r} has no problems")
    if train_problems is None:  # what contamination is checked against
        train_problems = run_train if run_train is not None else task_obj.problems("train")
    hygiene = hygiene_report(list(train_problems), problems, e.split, e.allow_contaminated)
    t0 = time.perf_counter()
    model.eval()
    sampler = build_sampler(rollout, model, tokenizer, backend=backend)
    if backend == "remote" and not sampler.base_only:
        sampler.sync(model)  # push the adapter once: the model does not change during an evaluation
    records = _sample_and_score(sampler, tokenizer, reward, task_obj, problems, ks, e)
    summary = summarize(records, ks=ks, n_boot=e.n_boot, seed=e.seed, label=f"{label} on {e.split}")
    summary["setup"] = {
        "model": label,
        "task": getattr(task_obj, "name", str(task)),
        "task_settings": task_settings,
        **{k: getattr(e, k) for k in ("split", "n", "temperature", "max_new_tokens", "greedy")},
        "backend": backend,
        "seed": e.seed,
        "limit": e.limit,
        "reward": reward_cfg,
        "wall_s": round(time.perf_counter() - t0, 2),
    }
    summary["hygiene"] = hygiene
    return records, summary


__all__ = [
    "EvalSettings",
    "evaluate_model",
    "config_settings",
    "limit_problems",
    "is_run_dir",
    "is_checkpoint_dir",
    "is_adapter_dir",
    "run_config",
    "read_run",
    "hygiene_report",
]
