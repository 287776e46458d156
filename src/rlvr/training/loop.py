"""The RLVR loop: sample, verify, compute group advantages, update the policy; log, checkpoint, repeat.

Read it top to bottom. Simplifications, and why:
- Each step's sampling uses a generator seeded by (seed, step), and prompts come from a seeded stream or
  curriculum (rlvr.prompts.stream): a resumed run redoes exactly what the uninterrupted run would have done.
- One rollout batch feeds `mu` optimisation passes (1 by default); with one pass the "old" policy is the
  current one, so the ratio is 1 and no second forward is run.
- The sampler holds its own copy of the weights (merged, possibly bf16) and is synced after each update.
- Rewards, verdicts and lengths are logged over every generated row; the loss sees only the kept rows.
- Launched by torchrun on W ranks, each rank samples and trains on its block of the step's prompts and
  the gradients are summed (rlvr.training.distributed); rank 0 alone writes the run directory. On one rank every
  `comm` call is a no-op. With train.fsdp the policy is sharded over the ranks (FSDP2): saving it then
  gathers the whole weights, with every rank taking part (rlvr.training.fsdp).
"""

from __future__ import annotations

import math
import signal
import time
from pathlib import Path

import torch
from tqdm.auto import tqdm

from rlvr.rundir import checkpoint as ckpt
from rlvr.training import distributed, fsdp
from rlvr.algorithms import algorithm_from_config
from rlvr.training.batch import encode_prompt
from rlvr.config import ConfigError, as_namespace, dump
from rlvr.policy.fastpath import prepare_for_update
from rlvr.training.metrics import rollout_metrics
from rlvr.policy.load import add_lora, load_policy, save_policy
from rlvr.prompts.stream import make_stream, spread_over_bands, step_band_metrics
from rlvr.rundir.files import RunDir, RunDirError
from rlvr.sampling import backend_settings, make_sampler
from rlvr.tasks import DatasetError, load_task
from rlvr.policy.update import update_policy
from rlvr.evaluation.validation import validate
from rlvr.verifiers.compose import build_reward


class TrainingAborted(RuntimeError):
    """The run stopped on purpose (repeated non-finite losses); the last checkpoint is intact."""


# Non-finite losses in a row before the run stops: one is a fluke worth skipping, a streak means the run
# has diverged (or the data is broken) and more steps would only burn time.
MAX_BAD_STEPS = 3


class StopFlag:
    """Ctrl-C / SIGTERM ask the loop to finish the step in flight, checkpoint and exit (130 / 143)."""

    def __init__(self):
        self.signum = None

    def __enter__(self):
        self._old = {s: signal.signal(s, self._set) for s in (signal.SIGINT, signal.SIGTERM)}
        return self

    def _set(self, signum, _frame):
        if self.signum is not None:  # a second Ctrl-C: stop now
            raise KeyboardInterrupt
        self.signum = signum

    def __exit__(self, *exc):
        for s, h in self._old.items():
            signal.signal(s, h)


def make_scheduler(optimizer, train):
    def factor(step):
        warm = min(1.0, (step + 1) / train.warmup_steps) if train.warmup_steps else 1.0
        if train.lr_schedule == "cosine":
            return warm * 0.5 * (1 + math.cos(math.pi * min(step, train.steps) / max(train.steps, 1)))
        return warm
    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def prepare(cfg: dict):
    """Build every component that validates settings, before any file is written."""
    c = as_namespace(cfg)
    algo = algorithm_from_config(cfg["algorithm"])
    reward = build_reward(cfg["reward"])
    try:
        task = load_task(c.task.name, **cfg["task"]["settings"])
    except DatasetError:
        raise
    except ValueError as e:  # an unknown task, band or setting is a config mistake
        raise ConfigError(f"task: {e}") from None
    return c, algo, reward, task


def train(cfg: dict, *, resume: bool = False, overwrite: bool = False, allow_config_change: bool = False,
          policy=None, quiet: bool = False) -> Path:
    """Run RLVR training as configured; returns the run directory. `policy` = (model, tokenizer) overrides
    loading by name (tests use a tiny random model)."""
    c, algo, reward, task = prepare(cfg)
    comm = distributed.setup()  # scale-out: W ranks under torchrun, else one
    run = None  # data parallel: rank 0 alone owns the run directory; the others wait until it is ready
    if comm.is_main:
        run = RunDir(c.output_dir, resume=resume, overwrite=overwrite)
        _check_config(run, cfg, resume, allow_config_change)
    comm.barrier()
    run_path = Path(c.output_dir)
    model, tokenizer, ref_model, optimizer, scheduler, sampler = _setup_policy(c, algo, policy, comm)
    stream = make_stream(cfg["curriculum"], task.problems("train"), c.seed)
    start = _resume(run_path, run, comm, model, optimizer, scheduler, stream) if resume else 0
    prompt_cache: dict[str, list[int]] = {}

    def encode(problem):
        if problem.id not in prompt_cache:
            prompt_cache[problem.id] = encode_prompt(tokenizer, task.messages(problem))
        return prompt_cache[problem.id]
    val_problems = spread_over_bands(task.problems("validation"), c.log.eval_problems) if c.log.eval_every else []
    step, round_ = start, 0

    def next_prompts():
        nonlocal round_
        problems = stream.take(c.rollout.prompts_per_step, step, round_)
        round_ += 1
        return problems, [encode(p) for p in problems]

    bad_steps, started = 0, time.perf_counter()
    bar = tqdm(range(start, c.train.steps), initial=start, total=c.train.steps, desc="rlvr train",
               disable=quiet or not comm.is_main)
    with StopFlag() as stop:
        for step in bar:
            t0, round_ = time.perf_counter(), 0
            model.eval()
            distributed.sync_sampler(comm, sampler, model)
            # data parallel: ranks decide together (their clocks differ)
            last = comm.any(step + 1 == c.train.steps or (c.train.time_budget_min and
                                                          time.perf_counter() - started > 60 * c.train.time_budget_min))
            val = (validate(sampler, val_problems, [encode(p) for p in val_problems], reward, c.rollout.max_new_tokens)
                   if comm.is_main and val_problems and (step % c.log.eval_every == 0 or last) else {})
            generator = torch.Generator().manual_seed(c.seed * 1_000_003 + step + comm.seed_offset)
            # data parallel: `batch` is this rank's block; `seen` the global batch (metrics, curriculum)
            batch = distributed.collect(comm, sampler, next_prompts, reward, algo, c.rollout, generator,
                                        pad_id=tokenizer.pad_token_id)
            seen = distributed.gather_batch(comm, batch, pad_id=tokenizer.pad_token_id)
            generated = seen.stats.get("generated", seen)
            stream.observe(step, generated)
            model.train()
            t1 = time.perf_counter()
            upd = update_policy(model, optimizer, batch, algo, pad_id=tokenizer.pad_token_id,
                                temperature=c.rollout.temperature, micro_batch_size=c.train.micro_batch_size,
                                micro_batch_tokens=c.train.micro_batch_tokens,
                                max_grad_norm=c.train.max_grad_norm, autocast=c.train.autocast, mu=c.train.updates_per_batch,
                                norm_len=c.rollout.max_new_tokens, ref_model=ref_model,
                                comm=comm if comm.world > 1 else None) if len(seen) else {"skipped": 1}
            t2 = time.perf_counter()
            row = {**_metrics_row(step, seen, generated, upd, scheduler.get_last_lr()[0], t1 - t0, t2 - t1),
                   **step_band_metrics(generated), **val}
            scheduler.step()
            stopping = comm.any(stop.signum is not None)
            if comm.is_main:
                run.append(run.metrics_path, [row])
            if comm.is_main and c.log.samples_every and step % c.log.samples_every == 0:
                run.append(run.samples_path, _sample_rows(step, generated))
            bar.set_postfix(_progress(row))
            _budget_eta(bar, c.train, step + 1 - start, time.perf_counter() - started)
            bad_steps = bad_steps + 1 if upd.get("skipped") and len(seen) else 0
            # `stopping` is read once per step (and agreed by all ranks), so a signal landing between the save
            # and the exit below cannot exit without a checkpoint: it is then handled after the next step.
            due = (c.log.checkpoint_every and (step + 1) % c.log.checkpoint_every == 0) or last or stopping
            full = fsdp.gather_checkpoint(model, optimizer) if due and comm.sharded else None  # all ranks at once
            if due and comm.is_main:
                ckpt.save_checkpoint(run.path / "checkpoints", step + 1, model=model, optimizer=optimizer,
                                     scheduler=scheduler, loop_state={"step": step + 1, "prompts": stream.state_dict(),
                                                                      "world_size": comm.world},
                                     keep=c.log.keep_checkpoints, full=full)
            if bad_steps >= MAX_BAD_STEPS:
                bar.close()
                kept = ckpt.latest_complete(run_path / "checkpoints")
                raise TrainingAborted(f"step {step}: non-finite loss or gradient {bad_steps} steps in a row; "
                                      f"the update was skipped each time; lower train.lr or check the data; "
                                      f"last checkpoint: {kept or 'none'}")
            if stopping:
                bar.close()
                comm.barrier()
                code = 130 if stop.signum == signal.SIGINT else 143
                if comm.is_main:
                    print(f"stopped by signal at step {step + 1}; checkpoint saved; resume with --resume {run_path}")
                raise SystemExit(code)
            if last:
                break
    if comm.sharded:  # every rank gathers, rank 0 writes
        fsdp.save_policy(model, tokenizer, run.path / "final" if run else None, is_main=comm.is_main)
    elif comm.is_main:
        save_policy(model, tokenizer, run.path / "final")
    comm.barrier()
    return run_path


def _setup_policy(c, algo, policy, comm):
    """Model (with LoRA), reference for KL when needed, AdamW over the trainable weights, LR schedule, sampler.
    With train.fsdp on several ranks the model is sharded (the reference, when there is one, is not)."""
    torch.manual_seed(c.seed)
    model, tokenizer = policy or load_policy(c.model.name, c.model.dtype)
    if c.model.lora.enabled:
        lc = c.model.lora
        model = add_lora(model, r=lc.r, alpha=lc.alpha, dropout=lc.dropout, target_modules=lc.target_modules)
    prepare_for_update(model, c.train)
    # With LoRA the reference is the base model with the adapter switched off: no second copy in memory.
    ref_model = _frozen_copy(model) if algo.beta > 0 and not c.model.lora.enabled else None
    comm.broadcast_params([p for p in model.parameters() if p.requires_grad])  # every rank starts from rank 0's
    if c.train.fsdp and comm.world > 1:  # the shards replace the parameters: the optimizer is made after
        distributed.shard_model(model, comm)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=c.train.lr, weight_decay=c.train.weight_decay)
    eos = model.config.eos_token_id
    stop_ids = sorted({tokenizer.eos_token_id, *([eos] if isinstance(eos, int) else eos or [])})
    sampler = make_sampler(c.rollout.backend, model, tokenizer, stop_ids=stop_ids, dtype=c.rollout.dtype,
                           **backend_settings(c.rollout))
    return model, tokenizer, ref_model, optimizer, make_scheduler(optimizer, c.train), sampler


def _budget_eta(bar, train, steps_done: int, elapsed_s: float) -> None:
    """With a time budget the run ends on the clock, not at train.steps: size the bar to the steps the
    budget leaves room for at the mean step time so far, so its ETA is the budget's."""
    if bar.disable or not train.time_budget_min or steps_done <= 0:
        return
    left = max(0.0, 60 * train.time_budget_min - elapsed_s)
    # steps that start inside the budget, then the one that starts past it (it runs, then the loop ends)
    expected = bar.n + 1 + math.ceil(left / (elapsed_s / steps_done)) + 1
    if expected < bar.total:
        bar.total = expected
        bar.refresh()


def _progress(row: dict) -> dict:
    """The progress bar's figures: reward, informative groups, verdicts, step time, validation accuracy."""
    out = {"reward": f"{row['reward/mean']:.3f}", "nzv": f"{row['groups/nonzero_var_frac']:.2f}",
           "correct": f"{row['verdict/correct_frac']:.2f}", "no_ans": f"{row['verdict/no_answer_frac']:.2f}",
           "s/step": f"{row['time/step']:.1f}"}
    if "val/accuracy" in row:
        out["val"] = f"{row['val/accuracy']:.2f}"
    return out


def _metrics_row(step, batch, generated, upd, lr, t_rollout, t_train) -> dict:
    """The step's line: rollout figures over every generated row, update figures over the kept batch."""
    row = {"step": step, **rollout_metrics(generated)}
    row.update({k: v for k, v in upd.items() if k not in ("train_tokens",)})
    gen_time = batch.stats["time/generate"]
    row.update({
        "lr": lr, "time/generate": gen_time, "time/verify": batch.stats["time/verify"], "time/train": t_train,
        "time/step": t_rollout + t_train,
        "throughput/gen_tok_s": batch.stats["gen_tokens"] / max(gen_time, 1e-9),
        "throughput/train_tok_s": upd.get("train_tokens", 0) / max(t_train, 1e-9),
        "dynamic_sampling/generated_groups": batch.stats["dynamic_sampling/generated_groups"],
        "dynamic_sampling/kept_groups": batch.stats["dynamic_sampling/kept_groups"],
    })
    return row


def _sample_rows(step, batch) -> list[dict]:
    return [{"step": step, "problem_id": p.id, "band": p.band, "prompt": p.prompt, "gold": p.answer,
             "completion": text, "extracted": v.extracted, "status": v.status, "reward": float(r)}
            for p, text, v, r in zip(batch.problems, batch.texts, batch.verdicts, batch.rewards.tolist())]


def _check_config(run: RunDir, cfg: dict, resume: bool, allow_change: bool) -> None:
    import yaml

    path = run.path / "config.yaml"
    if resume:
        saved = yaml.safe_load(path.read_text())
        changed = sorted(_diff(saved, cfg))
        if changed and not allow_change:
            raise ConfigError(f"--resume: config differs from the saved run in {', '.join(changed)}; "
                              f"pass --allow-config-change to accept")
    run.write_config(dump(cfg))


def _diff(a, b, prefix=""):
    if isinstance(a, dict) and isinstance(b, dict):
        for k in set(a) | set(b):
            yield from _diff(a.get(k), b.get(k), f"{prefix}{k}.")
    elif a != b:
        yield prefix[:-1]


def _resume(run_path: Path, run: RunDir | None, comm, model, optimizer, scheduler, stream) -> int:
    """Every rank loads the same checkpoint; rank 0 (the one holding `run`) trims the logs."""
    path = ckpt.latest_complete(run_path / "checkpoints")
    if path is None:
        if run is not None:
            run.truncate_after(-1)
        return 0
    state = ckpt.load_checkpoint(path, model=model, optimizer=optimizer, scheduler=scheduler)
    distributed.check_resume(comm, state)
    stream.load_state_dict(state["prompts"])
    if run is not None:
        run.truncate_after(state["step"] - 1)
    return state["step"]


def _frozen_copy(model):
    import copy

    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


__all__ = ["train", "TrainingAborted", "RunDirError", "MAX_BAD_STEPS"]
