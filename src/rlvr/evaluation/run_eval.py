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

import time
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import torch
from tqdm.auto import tqdm

from rlvr.config import Config, as_config, merge
from rlvr.environments.build import environment_factory, episodes_of
from rlvr.evaluation.driver import evaluate
from rlvr.evaluation.episodes import evaluate_episodes
from rlvr.evaluation.models import (
    is_adapter_dir,
    is_checkpoint_dir,
    is_run_dir,
    read_run,
    resolve_model,
    run_config,
)
from rlvr.evaluation.stats import coverage_ks
from rlvr.evaluation.summary import summarize
from rlvr.prompts.chat import encode_prompt, prompt_format
from rlvr.tasks.base import Problem
from rlvr.tasks.hygiene import check_contamination, find_leaks

ROWS_PER_CALL = 32


def config_settings(
    cfg: Config, quiet: bool = False, split: str | None = None, limit: int | None = None
) -> EvalSettings:
    """evaluate_model's settings from a resolved config, the same for every model and set it compares: the eval
    section's split, limit, samples per problem, k (eval.ks and the coverage curve's 1, 2, 4, ..., n) and greedy
    pass; the rollout's temperature, length and backend; the seed. `split` / `limit` override the eval section's."""
    e, r = cfg.eval, cfg.rollout
    return EvalSettings(
        split=split or e.split,
        n=e.n,
        ks=tuple(sorted(set(e.ks) | set(coverage_ks(e.n)))),
        temperature=r.temperature,
        max_new_tokens=r.max_new_tokens,
        greedy=e.greedy,
        backend=r.backend,
        seed=cfg.seed,
        limit=(e.limit if limit is None else limit) or None,
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
    queues, chosen = [list(v) for v in by_band.values()], list[int]()
    while len(chosen) < limit:
        for q in queues:
            if q and len(chosen) < limit:
                chosen.append(q.pop(0))
    return [problems[i] for i in sorted(chosen)]


class _Generate:
    """The driver's policy_generate over a rollout sampler: chats -> token ids (in prompt format `fmt`) -> n texts per
    prompt."""

    def __init__(self, sampler, tokenizer, max_new_tokens: int, seed: int, fmt: str = "chat"):
        self.sampler, self.tokenizer, self.max_new_tokens, self.fmt = sampler, tokenizer, max_new_tokens, fmt
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, chats: list[list[dict]], n: int, temperature: float) -> list[list[str]]:
        ids = [encode_prompt(self.tokenizer, chat, self.fmt) for chat in chats]
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
    backend: str | None = None
    seed: int = 0
    limit: int | None = None
    allow_contaminated: bool = False
    rows_per_call: int = ROWS_PER_CALL
    n_boot: int = 2000
    progress: bool = True


# What an evaluation's summary records of how it sampled ("setup"): the settings that change its numbers, so that a
# saved evaluation stands for a new one only where these match (rlvr run reuses its evaluations on a rerun).
SETUP_KEYS = ("split", "n", "temperature", "max_new_tokens", "greedy", "seed", "limit")


def scored_ks(e: EvalSettings) -> list[int]:
    """The k an evaluation reports pass@k for: e.ks up to n, and 1 (none but the greedy pass when n = 0)."""
    return sorted({k for k in e.ks if k <= e.n} | ({1} if e.n else set()))


def eval_setup(e: EvalSettings, task_settings, backend: str | None) -> dict:
    """The summary's record of what was sampled and how (SETUP_KEYS, the task's settings, the backend, the k)."""
    return {
        **{k: getattr(e, k) for k in SETUP_KEYS},
        "task_settings": task_settings,
        "backend": backend,
        "ks": scored_ks(e),
    }


def _split_checked(task_obj, task, e: EvalSettings, train_problems) -> tuple[list[Problem], dict]:
    """The split's problems (e.limit of them, spread over bands) and their hygiene against `train_problems` (None:
    the task's train split); a split without problems is a ValueError, a contaminated one a ContaminationError."""
    problems = limit_problems(task_obj.problems(e.split), e.limit)
    if not problems:
        raise ValueError(f"split {e.split!r} of task {getattr(task_obj, 'name', task)!r} has no problems")
    if train_problems is None:  # what contamination is checked against
        train_problems = task_obj.problems("train")
    return problems, hygiene_report(list(train_problems), problems, e.split, e.allow_contaminated)


def _sample_and_score(sampler, tokenizer, reward, task_obj, problems, ks, e: EvalSettings, episode, new_env, fmt):
    """(records, episode figures or None): every problem's n samples and greedy decode through the sampler, each
    scored (strictly and leniently) by the reward, or, with an environment, n + 1 episodes graded by it; behind
    one progress bar."""
    total = len(problems) * (e.n + int(e.greedy))
    batch_size = max(1, e.rows_per_call // max(e.n, 1))
    with tqdm(total=total, desc=f"rlvr eval {e.split}", unit="completion", disable=not e.progress) as bar:
        if new_env is not None:
            return evaluate_episodes(
                sampler,
                tokenizer,
                new_env,
                problems,
                episode,
                n=e.n,
                greedy=e.greedy,
                temperature=e.temperature,
                max_new_tokens=e.max_new_tokens,
                seed=e.seed,
                batch_size=batch_size,
                bar=bar,
            )
        records = evaluate(
            _Generate(sampler, tokenizer, e.max_new_tokens, e.seed, fmt),
            _Tracked(reward, bar, len(problems) * e.n),
            problems,
            n=e.n,
            ks=ks,
            temperature=e.temperature,
            greedy=e.greedy,
            to_messages=task_obj.messages,
            batch_size=batch_size,
            lenient_format=getattr(task_obj, "answer_format", None) or "boxed",
            lenient_reward=reward,
        )
    return records, None


def eval_config(model_or_path, sets: Sequence[str] = ()) -> Config:
    """The config an evaluation of `model_or_path` runs with, built as `rlvr train` builds one: the run's own config
    (a run directory or one of its checkpoints: its reward, rollout and episode sections), else the defaults (the
    task's own grader, single-turn), then each --set merged over it and checked (rlvr.config.merge)."""
    from rlvr.yaml_io import parse_set

    cfg = (run_config(model_or_path) or as_config({})).to_dict()
    for item in sets:
        cfg = merge(cfg, parse_set(item))
    return as_config(cfg)


def evaluate_model(
    model_or_path,
    task=None,
    settings: EvalSettings = EvalSettings(),
    *,
    cfg: Config | None = None,
    task_settings: dict | None = None,
    train_problems: Sequence[Problem] | None = None,
):
    """Evaluate a model on one split of a task (as `settings` say); returns (records, summary).

    model_or_path: an embedded name, local folder or hub id; a run directory; or (model, tokenizer).
    task: a task name (with task_settings) or a task object; None only with a run directory.
    cfg: the config whose reward section grades, whose rollout section gives the sampler its backend (where
    settings.backend is None), backend settings (remote urls, vLLM's engine) and dtype, and whose episode section
    says whether every sample is an episode (default: eval_config(model_or_path): the run's, else the defaults).
    train_problems: what contamination is checked against (default: the run's, else the task's train split).
    The summary is evaluation.summarize's dict plus "setup" (what was run, wall time, demo auto's choice) and
    "hygiene". Raises ContaminationError before any sampling when the split overlaps the training data."""
    from rlvr.evaluation.demo_choice import greedy, measure
    from rlvr.policy.build import policy_device
    from rlvr.sampling import BACKENDS, build_sampler
    from rlvr.verifiers.compose import task_reward

    e, cfg = settings, cfg or eval_config(model_or_path)
    ks, backend = scored_ks(e), e.backend or cfg.rollout.backend
    # servers that hold the base model (remote): a run directory is evaluated as its adapter on that base
    on_servers = BACKENDS.get(backend).adapter_on_servers
    model, tokenizer, task_obj, task_settings, run_train, label = resolve_model(
        model_or_path, task, task_settings, as_adapter=on_servers
    )
    if not isinstance(model_or_path, tuple):  # loaded here: onto model.device (a caller's model stays where it is)
        model.to(policy_device(cfg.model.device))
    fmt = prompt_format(cfg.model.prompt_format, tokenizer, label, episodes_of(cfg.episode))
    reward_cfg, reward = task_reward(cfg.reward, task_obj)
    problems, hygiene = _split_checked(task_obj, task, e, train_problems if train_problems is not None else run_train)
    t0 = time.perf_counter()
    model.eval()
    sampler = build_sampler(cfg.rollout, model, tokenizer, backend=backend, prompt_format=fmt)
    if on_servers and not getattr(sampler, "base_only", False):  # a remote sampler's: servers of the base model
        sampler.sync(model)  # push the adapter once: the model does not change during an evaluation
    new_env = environment_factory(episode := cfg.episode, task_obj, reward)
    # demo "auto" on a model no run has measured: its own answers with and without (rlvr.evaluation.demo_choice)
    demo = None if new_env else measure(task_obj, greedy(sampler, tokenizer, e.max_new_tokens, fmt), reward)
    records, figures = _sample_and_score(sampler, tokenizer, reward, task_obj, problems, ks, e, episode, new_env, fmt)
    summary = summarize(records, ks=ks, n_boot=e.n_boot, seed=e.seed, label=f"{label} on {e.split}")
    summary["setup"] = {
        "model": label,
        "task": getattr(task_obj, "name", str(task)),
        **eval_setup(e, task_settings, backend),
        "prompt_format": fmt,  # chat or plain (rlvr.prompts.chat): model.prompt_format for this model's tokenizer
        # what a local sampler computed in (rollout.dtype, `auto` resolved for this machine); None for a server's
        "sampler_dtype": str(sampler.dtype).removeprefix("torch.") if hasattr(sampler, "dtype") else None,
        **{"reward": asdict(reward_cfg), "wall_s": round(time.perf_counter() - t0, 2)},
        **({"demo": demo.to_dict()} if demo is not None else {}),
    }
    if figures:  # an environment task: tool use and what ended the episodes, per pass
        summary["episodes"], summary["setup"]["episode"] = figures, asdict(episode)
    summary["hygiene"] = hygiene
    return records, summary


__all__ = [
    "EvalSettings",
    "SETUP_KEYS",
    "eval_setup",
    "scored_ks",
    "evaluate_model",
    "eval_config",
    "config_settings",
    "limit_problems",
    "is_run_dir",
    "is_checkpoint_dir",
    "is_adapter_dir",
    "run_config",
    "read_run",
    "hygiene_report",
]
