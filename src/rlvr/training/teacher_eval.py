"""The held-out reverse KL to a distillation teacher: how far a model's own samples are from what the teacher would
write, before and after training (the main job's report with a teacher, docs/distillation.md).

For each held-out problem the model samples one completion at the training temperature (its sampler's log-probs
recorded); the teacher scores the same ids. A problem's value is its completion's mean d_t = log pi_model(o_t) -
log pi_teacher(o_t) over its tokens (a one-sample estimate of the per-token reverse KL on that prompt); the figure is
the mean over problems with a percentile bootstrap interval over problems (rlvr.evaluation.stats). An adapter teacher
is scored here as its whole model (its base with the adapter merged): the same function it computes in training.
"""

from __future__ import annotations

import torch

from rlvr.config import Config
from rlvr.training.batch import unscored_batch
from rlvr.training.teacher import Teacher, TeacherSpec

EVAL_SEED = 12_345  # the sampling draw of every model's KL pass: the same for each model compared


def whole_teacher(spec: TeacherSpec, cfg: Config, tokenizer) -> Teacher:
    """The teacher as a model on its own (no policy to switch adapters on): adapters merged into their base."""
    from rlvr.evaluation.models import adapter_policy
    from rlvr.policy.load import load_policy
    from rlvr.policy.teacher import ModelTeacher

    if spec.form == "server":
        from rlvr.sampling.remote_teacher import RemoteTeacher

        return RemoteTeacher(cfg.distill.urls, spec.where, tokenizer)
    whole, _ = adapter_policy(spec.where) if spec.form == "adapter" else load_policy(spec.where, cfg.model.dtype)
    return ModelTeacher(whole, torch.device("cpu"), spec.label)


def heldout_reverse_kl(model_ref, teacher: Teacher, cfg: Config, problems, limit: int = 0) -> dict:
    """{"value", "lo", "hi", "problems", "tokens"}: the model's held-out reverse KL to `teacher` (see the module
    docstring) over `problems` (the first `limit`, spread as given; 0: all). model_ref: what rlvr eval takes."""
    from rlvr.evaluation.models import resolve_model
    from rlvr.evaluation.stats import bootstrap_ci
    from rlvr.policy.update import UpdateSettings
    from rlvr.prompts.chat import PromptCache, prompt_format
    from rlvr.sampling import build_sampler, draw_settings
    from rlvr.sampling.scored import draw_generator

    model, tokenizer, task, *_ = resolve_model(model_ref, cfg.task.name, cfg.task.settings)
    chosen = problems[:limit] if limit else list(problems)
    fmt = prompt_format(cfg.model.prompt_format, tokenizer, str(model_ref))
    ids = [PromptCache(tokenizer, task, fmt)(p) for p in chosen]
    sampler = build_sampler(cfg.rollout, model, tokenizer, prompt_format=fmt)
    ro = sampler.generate(ids, 1, **draw_settings(cfg.rollout), generator=draw_generator(EVAL_SEED, 0))
    batch = unscored_batch(ro, chosen)  # one sample a problem
    settings = UpdateSettings.from_config(cfg, tokenizer.pad_token_id)
    d = (batch.sampler_logp - teacher.logprobs(batch, settings)) * batch.mask
    n = batch.mask.sum(-1)
    per_problem = [float(d[i].sum() / n[i]) for i in range(len(chosen)) if n[i] > 0]
    value, lo, hi = bootstrap_ci(per_problem, seed=cfg.seed)
    return {"value": value, "lo": lo, "hi": hi, "problems": len(per_problem), "tokens": int(n.sum())}


def kl_markdown(figures: dict[str, dict], teacher_label: str) -> str:
    """The report's table: each model's held-out reverse KL to the teacher with its interval."""
    lines = [
        f"Held-out reverse KL to the teacher ({teacher_label}): each model's own sample of each problem, scored by "
        "both; nats per token, mean over problems [95% bootstrap CI]. Lower: closer to what the teacher would write.",
        "",
        "| model | reverse KL | problems | tokens |",
        "|---|---|---|---|",
    ]
    for name, f in figures.items():
        lines.append(f"| {name} | {f['value']:.3f} [{f['lo']:.3f}, {f['hi']:.3f}] | {f['problems']} | {f['tokens']} |")
    return "\n".join(lines) + "\n"


__all__ = ["EVAL_SEED", "whole_teacher", "heldout_reverse_kl", "kl_markdown"]
