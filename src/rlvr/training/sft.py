"""The supervised baseline: rejection-sampling fine-tuning (RFT), or SFT on a dataset's reference traces.

    run = sft(resolve("default"))     # -> runs/train-sft/{config.yaml, metrics.jsonl, kept.jsonl, final/}

1. Collect. Sample G completions per training prompt from the starting model (the rollout settings of the RL
   run), score them with the RL run's reward, and keep those whose correctness verdict is "correct" and that
   ended with a stop token (a truncated one would teach the model not to stop), deduplicated per problem by
   whitespace-normalised text. With `sft.source: reference` the dataset's traces are the data instead.
2. Fine-tune. The same LoRA as the RL run; the loss is the mean next-token negative log-likelihood over the
   completion tokens of the optimizer batch; prompt tokens are context only and never targets.

Matched compute: the RL run's cost on CPU is dominated by sampling, so the budget is the number of sampled
completions: `sft.samples`, or (0) what the RL config samples (train.steps x prompts_per_step x group_size),
or what a finished RL run (`sft.match_run`) actually generated, dynamic-sampling extra rounds included.
The fine-tuning pass then costs sft.epochs forward/backward passes over the kept completions, which is
at most what the RL update spends on the same completions once each.
"""

from __future__ import annotations

import dataclasses
import json
import math
import random
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr.config import Config, as_config
from rlvr.environments.build import build_tools, episodic
from rlvr.environments.openings import EpisodeOpenings
from rlvr.policy.logprobs import autocast, completion_logprobs, real_tokens
from rlvr.rundir import checkpoint as ckpt
from rlvr.rundir.files import atomic_write_text
from rlvr.tasks.base import DatasetError
from rlvr.training.lifecycle import (
    OpenedRun,
    StopFlag,
    checkpoint_due,
    exit_on_signal,
    open_run,
    resume_step,
    save_final,
)
from rlvr.training.reference_traces import written_for
from rlvr.training.sft_data import kept_examples, sample_budget


def completion_nll(
    model,
    prompts: list[list[int]],
    completion_ids: torch.Tensor,
    mask: torch.Tensor,
    *,
    pad_id: int,
    num_tokens: float,
    attend: torch.Tensor | None = None,
) -> torch.Tensor:
    """Sum over completion tokens of -log p(token | prompt, earlier tokens), divided by num_tokens.

    prompts: b lists of ids; completion_ids, mask (the target tokens), attend (every real token, a tool's output
    included; None: the targets): (b, T). Prompt tokens are never targets; padding positions are zeroed with where
    (not multiplied), so a non-finite value there cannot leak in.
    With num_tokens = the optimizer batch's token count, micro-batch losses sum to the batch's token mean.
    """
    logp, _ = completion_logprobs(model, prompts, completion_ids, mask, pad_id=pad_id, attend=attend)
    return -torch.where(mask > 0, logp, torch.zeros_like(logp)).sum() / num_tokens


def pad_examples(examples: list[dict], pad_id: int):
    """(prompts, completion_ids (b, T), mask (b, T), attend (b, T)) right-padded to the longest completion: mask is
    an example's completion_mask (0 on a tool's ids) where it has one, attend 1 on every id of the completion."""
    t = max(len(e["completion_ids"]) for e in examples)
    ids = torch.full((len(examples), t), pad_id, dtype=torch.long)
    mask = torch.zeros(len(examples), t)
    for i, e in enumerate(examples):
        ids[i, : len(e["completion_ids"])] = torch.tensor(e["completion_ids"])
        mask[i, : len(e["completion_ids"])] = torch.tensor(e.get("completion_mask") or [1.0] * len(e["completion_ids"]))
    attend = real_tokens(torch.tensor([len(e["completion_ids"]) for e in examples]), t)
    return [e["prompt_ids"] for e in examples], ids, mask, attend


def batch_plan(examples: list[dict], epochs: int, batch_size: int, seed: int) -> list[tuple[int, list[int]]]:
    """Every optimizer step's (epoch, example indices): `epochs` passes in seeded order, `batch_size` per step. A
    function of the seed alone, so a resumed run takes the same batches from any step."""
    plan = []
    for epoch in range(epochs):
        order = list(range(len(examples)))
        random.Random(f"{seed}-sft-epoch-{epoch}").shuffle(order)
        plan += [(epoch, order[start : start + batch_size]) for start in range(0, len(order), batch_size)]
    return plan


def sft_step(model, rows: list[dict], optimizer, scheduler, trainable, train, pad_id: int) -> dict:
    """One optimizer step on `rows`: loss = the token-mean NLL of the batch, micro-batched exactly."""
    from rlvr.policy.update import micro_batches

    num_tokens = float(sum(sum(e.get("completion_mask") or [1.0] * len(e["completion_ids"])) for e in rows))
    optimizer.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for chunk in micro_batches(
        list(range(len(rows))),
        [len(e["completion_ids"]) for e in rows],
        train.micro_batch_size,
        train.micro_batch_tokens,
    ):
        prompts, ids, mask, attend = pad_examples([rows[i] for i in chunk], pad_id)
        with autocast(model, train.autocast):
            loss = completion_nll(model, prompts, ids, mask, pad_id=pad_id, num_tokens=num_tokens, attend=attend)
        loss.backward()
        loss_sum += float(loss.detach())
    grad_norm = float(torch.nn.utils.clip_grad_norm_(trainable, train.max_grad_norm))
    lr = scheduler.get_last_lr()[0]
    if math.isfinite(loss_sum) and math.isfinite(grad_norm):
        optimizer.step()
    scheduler.step()
    return {"loss": loss_sum, "grad_norm": grad_norm, "lr": lr, "tokens": int(num_tokens), "rows": len(rows)}


def fine_tune(model, examples: list[dict], c: Config, opened: OpenedRun, pad_id: int, quiet: bool) -> int:
    """sft.epochs passes over the examples in seeded order, sft.batch_size per optimizer step; one metrics line per
    step (loss = token-mean NLL of that batch), to the run directory and the trackers. Checkpoints every
    log.checkpoint_every steps, every log.checkpoint_minutes and on Ctrl-C / SIGTERM (then exits 130 / 143); a resume
    continues from the newest one. Returns the number of steps taken."""
    from rlvr.training.step import make_scheduler

    run = opened.run
    if run is None:  # SFT runs on one process, the one that holds the run directory
        raise ValueError("fine_tune: SFT needs the run directory (one process)")
    plan = batch_plan(examples, c.sft.epochs, c.sft.batch_size, c.seed)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=c.sft.lr, weight_decay=c.train.weight_decay)
    scheduler = make_scheduler(optimizer, dataclasses.replace(c.train, steps=len(plan)))
    saved = None
    if opened.resume_from is not None:
        saved = ckpt.load_checkpoint(opened.resume_from, model=model, optimizer=optimizer, scheduler=scheduler)
    start, saved_at = resume_step(opened.run, saved), time.perf_counter()
    model.train()
    with StopFlag() as stop, tqdm(total=len(plan), initial=start, desc="rlvr sft", disable=quiet) as bar:
        for step in range(start, len(plan)):
            t0 = time.perf_counter()
            epoch, batch = plan[step]
            figures = sft_step(model, [examples[i] for i in batch], optimizer, scheduler, trainable, c.train, pad_id)
            row = {"step": step, "epoch": epoch, **figures, "time/step": time.perf_counter() - t0}
            run.append(run.metrics_path, [row])
            opened.trackers.log_step(row)
            bar.update(1)
            bar.set_postfix({"loss": f"{figures['loss']:.3f}"})
            due = checkpoint_due(step + 1, c.log, time.perf_counter() - saved_at)
            if (due and step + 1 < len(plan)) or stop.signum is not None:
                ckpt.save_checkpoint(
                    opened.path / "checkpoints",
                    step + 1,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    loop_state={"step": step + 1},
                    keep=c.log.keep_checkpoints,
                )
                saved_at = time.perf_counter()
            if stop.signum is not None:
                bar.close()
                exit_on_signal(stop.signum, step + 1, opened.path)
    return len(plan)


def sft_output_dir(cfg: Config) -> str:
    return cfg.sft.output_dir or f"{cfg.output_dir.rstrip('/')}-sft"


def sft(
    cfg: Config | dict,
    policy=None,
    quiet: bool = False,
    overwrite: bool = False,
    resume: bool = False,
    allow_config_change: bool = False,
) -> Path:
    """Run the supervised baseline as configured (rlvr.config.resolve, with its `sft` section); returns the
    run directory. `policy` = (model, tokenizer) overrides loading by name (tests use a tiny model). The run's
    lifecycle is the RL loop's (rlvr.training.lifecycle): checks before anything is written, trackers, checkpoints,
    Ctrl-C / SIGTERM, `resume` from the newest checkpoint (the kept completions are read back, not sampled again)."""
    from rlvr.policy.build import load_seeded, make_trainable, policy_device
    from rlvr.training.step import configured_reward

    cfg = as_config(cfg)  # a dict (the Python API) checked as the command line checks a file
    policy_device(cfg.model.device)  # a GPU asked for and not there: refused before any file
    task, resolved, reward = configured_reward(cfg)
    c = dataclasses.replace(cfg, reward=resolved)
    problems = task.problems("train")
    if not problems:
        raise DatasetError(f"task {c.task.name!r} has no training problems")
    budget = sample_budget(c) if c.sft.source == "samples" else 0
    written = written_for(c, task, reward, problems)  # sft.reference's traces: a failing function leaves no run dir
    opened = open_run(
        c,
        sft_output_dir(c),
        resume=resume,
        overwrite=overwrite,
        allow_config_change=allow_config_change,
        policy=policy,
    )
    try:
        # the starting model samples first; its LoRA adapter is added after, for the fine-tune
        model, tokenizer = load_seeded(c, policy)
        examples, stats = kept_examples(opened, c, model, tokenizer, task, reward, problems, budget, quiet, written)
        model = make_trainable(model, c)
        t1 = time.perf_counter()
        steps = 0
        if examples:
            steps = fine_tune(model, examples, c, opened, tokenizer.pad_token_id, quiet)
        elif not quiet:
            print("rlvr sft: no verifier-correct completions were sampled; the final model is the starting model")
        stats.update({"steps": steps, "time/train": time.perf_counter() - t1})
        atomic_write_text(opened.path / "sft_data.json", json.dumps(stats, indent=2) + "\n")
        save_final(
            opened.run, model, tokenizer, c, _recorded_prompts(c, task, tokenizer), steps, kind=f"SFT ({c.sft.source})"
        )
    finally:
        opened.trackers.finish()
    return opened.path


def _recorded_prompts(c: Config, task, tokenizer):
    """The task as final/ records its prompts: reference traces of an episode task open with the tools shown."""
    if c.sft.source == "reference" and episodic(c.episode):
        return EpisodeOpenings(task, tokenizer, tools=build_tools(c.episode))
    return task


__all__ = ["sft", "completion_nll", "pad_examples", "sft_output_dir", "batch_plan", "fine_tune"]
