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

from rlvr.config import Config, ConfigError
from rlvr.environments.build import build_tools
from rlvr.environments.episode import replay_episode
from rlvr.environments.figures import transcript
from rlvr.environments.openings import EpisodeOpenings
from rlvr.policy.logprobs import completion_logprobs, real_tokens
from rlvr.prompts.chat import encode_prompt
from rlvr.rundir import checkpoint as ckpt
from rlvr.rundir.files import atomic_write_text, read_jsonl
from rlvr.sampling import build_sampler
from rlvr.tasks.base import DatasetError
from rlvr.training.lifecycle import OpenedRun, StopFlag, exit_on_signal, open_run, resume_step, save_final

# Sequences per sampler call: at most the RL step's P x G (the shape the run is sized for), and at most 32 for
# the HF sampler, which holds (rows, T, vocab) logits; the fast sampler decodes 64 rows ~30% faster than 32.
ROWS_PER_CALL = {"hf": 32}


def sample_budget(cfg: dict) -> int:
    """Completions to sample: sft.samples, else what sft.match_run generated, else the RL config's count."""
    s, r = cfg["sft"], cfg["rollout"]
    if s["samples"] > 0:
        return s["samples"]
    if s["match_run"]:
        import yaml

        run = Path(s["match_run"])
        rows = read_jsonl(run / "metrics.jsonl", skip_torn=True)
        if not rows:
            raise ConfigError(f"sft.match_run: {run} has no metrics.jsonl rows to match")
        g = yaml.safe_load((run / "config.yaml").read_text())["rollout"]["group_size"]
        return int(sum(row.get("dynamic_sampling/generated_groups", r["prompts_per_step"]) for row in rows) * g)
    return cfg["train"]["steps"] * r["prompts_per_step"] * r["group_size"]


def _keep_correct(ro, owners, verdicts, ids, stats: dict, seen: set, kept: list) -> None:
    """Append to `kept` each verifier-correct, stop-terminated completion of the rollout not seen before for its
    problem (whitespace-normalised), counting the correct, truncated and duplicate ones in `stats`."""
    for row, (p, v) in enumerate(zip(owners, verdicts)):
        if v.status != "correct":
            continue
        stats["correct"] += 1
        if ro.finish[row] != "stop":
            stats["correct_truncated"] += 1
            continue
        key = (p.id, " ".join(ro.texts[row].split()))
        if key in seen:
            stats["duplicates"] += 1
            continue
        seen.add(key)
        length = int(ro.mask[row].sum())
        kept.append(
            {
                "problem_id": p.id,
                "band": p.band,
                "prompt": p.prompt,
                "prompt_ids": ids[int(ro.group_ids[row])],
                "completion_ids": ro.completion_ids[row, :length].tolist(),
                "completion": ro.texts[row],
                "extracted": v.extracted,
            }
        )


def collect_correct(
    sampler, tokenizer, task, reward, problems, *, budget: int, group_size: int, rollout, seed: int, progress=None
) -> tuple[list[dict], dict]:
    """Sample `budget` completions (group_size per prompt, prompts in a seeded order, cycling if needed) and
    keep the verifier-correct, stop-terminated, distinct ones. Returns (examples, stats); an example is
    {problem_id, band, prompt, prompt_ids, completion_ids, completion, extracted}."""
    order = list(range(len(problems)))
    random.Random(f"{seed}-sft").shuffle(order)
    rows = rollout.prompts_per_step * rollout.group_size
    per_call = max(1, min(rows, ROWS_PER_CALL.get(rollout.backend, rows)) // group_size)
    kept, seen = [], set()
    stats = {"generated": 0, "correct": 0, "correct_truncated": 0, "duplicates": 0, "prompts": 0}
    position, n_round = 0, 0
    while stats["generated"] < budget:
        want = min(per_call, math.ceil((budget - stats["generated"]) / group_size))
        batch = [problems[order[(position + i) % len(order)]] for i in range(want)]
        position, n_round = position + want, n_round + 1
        ids = [encode_prompt(tokenizer, task.messages(p)) for p in batch]
        generator = torch.Generator().manual_seed(seed * 1_000_003 + n_round)
        ro = sampler.generate(
            ids,
            group_size,
            max_new_tokens=rollout.max_new_tokens,
            temperature=rollout.temperature,
            top_p=rollout.top_p,
            top_k=rollout.top_k,
            generator=generator,
        )
        owners = [batch[g] for g in ro.group_ids.tolist()]
        verdicts = reward(ro.texts, owners).verdicts
        _keep_correct(ro, owners, verdicts, ids, stats, seen, kept)
        stats["generated"] += len(owners)
        stats["prompts"] += len(batch)
        if progress is not None:
            progress.update(len(owners))
            progress.set_postfix({"correct": f"{stats['correct'] / stats['generated']:.3f}", "kept": len(kept)})
    stats["kept"], stats["problems_kept"] = len(kept), len({e["problem_id"] for e in kept})
    return kept, stats


def reference_examples(tokenizer, task, problems, field: str, tools: dict | None = None) -> list[dict]:
    """The dataset's own worked solutions (problem.meta[field]) as completions: a text ends in the stop token; a
    list of chat messages (a tool-use trace: the assistant's turns and the tools' answers) becomes the ids an episode
    would have sampled, the tools' ids masked out (completion_mask), its opening showing `tools` as episodes do."""
    out = []
    for p in problems:
        trace = p.meta.get(field) if isinstance(p.meta, dict) else None
        if not trace:
            continue
        if isinstance(trace, list):
            ep = replay_episode(tokenizer, task.messages(p), trace, tools or {})
            prompt_ids, ids, mask, text = ep.prompt_ids, ep.ids, ep.mask, transcript(ep)
        else:
            prompt_ids, text = encode_prompt(tokenizer, task.messages(p)), str(trace)
            ids = tokenizer(text, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
            mask = [1.0] * len(ids)
        out.append(
            {
                "problem_id": p.id,
                "band": p.band,
                "prompt": p.prompt,
                "prompt_ids": prompt_ids,
                "completion_ids": ids,
                "completion_mask": mask,
                "completion": text,
                "extracted": None,
            }
        )
    if not out:
        raise DatasetError(f"sft.source=reference: no training problem has a {field!r} column")
    return out


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
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=train.autocast == "bfloat16"):
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
    log.checkpoint_every steps and on Ctrl-C / SIGTERM (then exits 130 / 143); a resume continues from the newest
    one. Returns the number of steps taken."""
    from rlvr.training.step import make_scheduler

    plan = batch_plan(examples, c.sft.epochs, c.sft.batch_size, c.seed)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=c.sft.lr, weight_decay=c.train.weight_decay)
    scheduler = make_scheduler(optimizer, dataclasses.replace(c.train, steps=len(plan)))
    saved = None
    if opened.resume_from is not None:
        saved = ckpt.load_checkpoint(opened.resume_from, model=model, optimizer=optimizer, scheduler=scheduler)
    start = resume_step(opened.run, saved)
    model.train()
    with StopFlag() as stop, tqdm(total=len(plan), initial=start, desc="rlvr sft", disable=quiet) as bar:
        for step in range(start, len(plan)):
            t0 = time.perf_counter()
            epoch, batch = plan[step]
            figures = sft_step(model, [examples[i] for i in batch], optimizer, scheduler, trainable, c.train, pad_id)
            row = {"step": step, "epoch": epoch, **figures, "time/step": time.perf_counter() - t0}
            opened.run.append(opened.run.metrics_path, [row])
            opened.trackers.log_step(row)
            bar.update(1)
            bar.set_postfix({"loss": f"{figures['loss']:.3f}"})
            every = c.log.checkpoint_every and (step + 1) % c.log.checkpoint_every == 0
            if (every and step + 1 < len(plan)) or stop.signum is not None:
                ckpt.save_checkpoint(
                    opened.path / "checkpoints",
                    step + 1,
                    model=model,
                    optimizer=optimizer,
                    scheduler=scheduler,
                    loop_state={"step": step + 1},
                    keep=c.log.keep_checkpoints,
                )
            if stop.signum is not None:
                bar.close()
                exit_on_signal(stop.signum, step + 1, opened.path)
    return len(plan)


def sft_output_dir(cfg: dict) -> str:
    return cfg["sft"]["output_dir"] or f"{cfg['output_dir'].rstrip('/')}-sft"


def sft(
    cfg: dict,
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
    from rlvr.policy.build import load_seeded, make_trainable
    from rlvr.training.step import load_configured_task
    from rlvr.verifiers.compose import task_reward

    task = load_configured_task(cfg)
    resolved, reward = task_reward(cfg["reward"], task)
    cfg = {**cfg, "reward": resolved}
    c = Config.from_dict(cfg)
    problems = task.problems("train")
    if not problems:
        raise DatasetError(f"task {c.task.name!r} has no training problems")
    budget = sample_budget(cfg) if c.sft.source == "samples" else 0
    opened = open_run(
        cfg,
        c,
        sft_output_dir(cfg),
        resume=resume,
        overwrite=overwrite,
        allow_config_change=allow_config_change,
        policy=policy,
    )
    try:
        # the starting model samples first; its LoRA adapter is added after, for the fine-tune
        model, tokenizer = load_seeded(c, policy)
        examples, stats = kept_examples(opened, c, model, tokenizer, task, reward, problems, budget, quiet)
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
    if c.sft.source == "reference" and c.episode.environment != "none":
        return EpisodeOpenings(task, tokenizer, tools=build_tools(c.episode))
    return task


def take_examples(examples: list[dict], limit: int, seed: int) -> list[dict]:
    """At most `limit` of the examples (0 = all): a seeded choice kept in the data's order, so the bands stay as
    mixed as they are in the data. The reference traces of a large task cost more fine-tuning than a baseline needs."""
    if not limit or len(examples) <= limit:
        return examples
    chosen = sorted(random.Random(f"{seed}-sft-examples").sample(range(len(examples)), limit))
    return [examples[i] for i in chosen]


def kept_examples(opened: OpenedRun, c: Config, model, tokenizer, task, reward, problems, budget: int, quiet: bool):
    """(examples, stats): the completions to fine-tune on, sampled and kept (or the dataset's traces), written to
    kept.jsonl (readable) and kept_ids.jsonl (with token ids); a resumed run reads them back instead."""
    ids_path = opened.path / "kept_ids.jsonl"
    if opened.resume_from is not None and ids_path.exists():
        examples = read_jsonl(ids_path)
        return examples, json.loads((opened.path / "sft_data.json").read_text())
    t0 = time.perf_counter()
    if c.sft.source == "reference":
        tools = build_tools(c.episode) if c.episode.environment != "none" else {}
        examples, stats = reference_examples(tokenizer, task, problems, c.sft.reference_field, tools), {}
    else:
        sampler = build_sampler(c.rollout, model.eval(), tokenizer)
        with tqdm(total=budget, desc="rlvr sft: sampling", unit="completion", disable=quiet) as bar:
            examples, stats = collect_correct(
                sampler,
                tokenizer,
                task,
                reward,
                problems,
                budget=budget,
                group_size=c.sft.group_size or c.rollout.group_size,
                rollout=c.rollout,
                seed=c.seed,
                progress=bar,
            )
        del sampler
    available = len(examples)
    examples = take_examples(examples, c.sft.max_examples, c.seed)
    stats.update(
        {
            "source": c.sft.source,
            "budget_completions": budget,
            "examples_available": available,
            "examples": len(examples),
            "time/collect": time.perf_counter() - t0,
        }
    )
    readable = [{k: v for k, v in e.items() if not k.endswith(("_ids", "_mask"))} for e in examples]
    atomic_write_text(opened.path / "kept.jsonl", "".join(json.dumps(e) + "\n" for e in readable))
    atomic_write_text(opened.path / "sft_data.json", json.dumps(stats, indent=2) + "\n")
    atomic_write_text(ids_path, "".join(json.dumps(e) + "\n" for e in examples))  # last: its presence marks done
    return examples, stats


__all__ = [
    "sft",
    "collect_correct",
    "reference_examples",
    "completion_nll",
    "sample_budget",
    "sft_output_dir",
    "batch_plan",
    "fine_tune",
    "take_examples",
]
