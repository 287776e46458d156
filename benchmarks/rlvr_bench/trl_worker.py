"""The TRL side of `rlvr bench`: TRL's `GRPOTrainer` on rlvr's task, prompts and reward, stepped by the parent.

Runs under TRL's interpreter (its own venv, with math-verify installed; rlvr itself is put on PYTHONPATH by
the parent), so rlvr never depends on TRL. Settings chosen to make TRL do the same work as rlvr's default
preset: P prompts x G completions per optimizer step (one generation batch per step, micro-batches of 16),
the same LoRA (r, alpha, all linear layers), bf16 autocast, learning rate, temperature, max new tokens,
`loss_type="grpo"` (each sequence's token mean, as rlvr's GRPO preset), `beta=0` (no reference pass, as
rlvr), the weights loaded in the config's model.dtype (float32, rlvr's default; bf16 under `rlvr bench --model`, as
rlvr's side loads them), and the prompt order of rlvr's seeded stream (`shuffle_dataset=False`). Gradient checkpointing, on
by default in TRL, is off unless asked for: neither side needs it for memory at this size, and leaving it on
would make TRL recompute every forward.

Timing hooks wrap TRL's own methods (no change to what they do): `_generate_single_turn` (sampling),
`_calculate_rewards` (scoring) and `_generate_and_score_completions` (the whole rollout phase); a callback
blocks at the start of each optimizer step until the parent says "step", and reports at its end.
"""

from __future__ import annotations

import time

from rlvr_bench.child import bench_config, emit, load_model, peak_rss_bytes, step_problems, versions, wait_for_step


def _dataset(task, steps):
    from datasets import Dataset

    rows = [{"prompt": task.messages(p), "answer": p.answer} for problems in steps for p in problems]
    return Dataset.from_list(rows)


def _trainer_class():
    from trl import GRPOTrainer

    class TimedGRPOTrainer(GRPOTrainer):
        """GRPOTrainer with phase timers around three of its methods."""

        def _reset_timers(self):
            self.bench = {
                "generate": 0.0,
                "verify": 0.0,
                "rollout": 0.0,
                "gen_tokens": 0,
                "prompt_tokens": 0,
                "fwd_tokens": 0,
                "rows": 0,
                "reward": 0.0,
                "lengths": [],
            }

        def _generate_single_turn(self, *args, **kwargs):
            t0 = time.perf_counter()
            out = super()._generate_single_turn(*args, **kwargs)
            self.bench["generate"] += time.perf_counter() - t0
            return out

        def _calculate_rewards(self, *args, **kwargs):
            t0 = time.perf_counter()
            rewards = super()._calculate_rewards(*args, **kwargs)
            self.bench["verify"] += time.perf_counter() - t0
            weights = self.reward_weights.to(rewards.device)
            self.bench["reward"] = float((rewards.nan_to_num(0.0) * weights).sum(1).mean())
            return rewards

        def _generate_and_score_completions(self, inputs):
            t0 = time.perf_counter()
            out = super()._generate_and_score_completions(inputs)
            self.bench["rollout"] += time.perf_counter() - t0
            self.bench["gen_tokens"] += int(out["completion_mask"].sum())
            # prompts arrive repeated G times; count each once, as rlvr's prefill does
            self.bench["prompt_tokens"] += int(out["prompt_mask"].sum()) // self.num_generations
            self.bench["rows"] += int(out["completion_mask"].shape[0])
            self.bench["lengths"] += [int(n) for n in out["completion_mask"].sum(1)]
            # TRL's update runs every row through the model, zero advantage or not
            self.bench["fwd_tokens"] += int(out["prompt_mask"].sum()) + int(out["completion_mask"].sum())
            return out

    return TimedGRPOTrainer


def _callback():
    import torch
    from transformers import TrainerCallback

    class StepGate(TrainerCallback):
        """Waits for the parent before each optimizer step; reports the step's figures after it."""

        def __init__(self):
            self.trainer, self.t0, self.stopped = None, 0.0, False

        def on_step_begin(self, args, state, control, **kwargs):
            if not wait_for_step():
                self.stopped = True
                control.should_training_stop = True
            self.trainer._reset_timers()
            self.t0 = time.perf_counter()

        def on_step_end(self, args, state, control, **kwargs):
            wall = time.perf_counter() - self.t0
            b = self.trainer.bench
            emit(
                "step",
                step=state.global_step - 1,
                wall=wall,
                generate=b["generate"],
                verify=b["verify"],
                train=wall - b["rollout"],
                other=b["rollout"] - b["generate"] - b["verify"],
                gen_tokens=b["gen_tokens"],
                prompt_tokens=b["prompt_tokens"],
                fwd_tokens=b["fwd_tokens"],
                rows=b["rows"],
                lengths=b["lengths"],
                active_rows=b["rows"],
                reward=b["reward"],
                rss=peak_rss_bytes(),
                threads=torch.get_num_threads(),
            )
            if self.stopped:
                control.should_training_stop = True

    return StepGate()


def trl_config(spec: dict, cfg: dict, out_dir: str):
    from trl import GRPOConfig

    from rlvr.algorithms import algorithm_from_config
    from rlvr.algorithms.advantages import OVERLONG_SHAPINGS

    r, t = cfg["rollout"], cfg["train"]
    # truncated completions out of the loss where rlvr's overlong setting takes them out (overlong: filter)
    masks_truncated = OVERLONG_SHAPINGS.get(algorithm_from_config(cfg["algorithm"]).overlong).masks_truncated
    micro = min(t["micro_batch_size"], r["prompts_per_step"] * r["group_size"])
    return GRPOConfig(
        output_dir=out_dir,
        use_cpu=True,
        bf16=spec["bf16"],
        seed=cfg["seed"],
        report_to="none",
        max_steps=spec["steps"],
        learning_rate=t["lr"],
        lr_scheduler_type="constant",
        max_grad_norm=t["max_grad_norm"],
        weight_decay=t["weight_decay"],
        per_device_train_batch_size=micro,
        gradient_accumulation_steps=r["prompts_per_step"] * r["group_size"] // micro,
        num_generations=r["group_size"],
        max_completion_length=r["max_new_tokens"],
        temperature=r["temperature"],
        top_p=r["top_p"],
        top_k=r["top_k"],
        loss_type="grpo",
        beta=0.0,
        mask_truncated_completions=masks_truncated,
        shuffle_dataset=False,
        gradient_checkpointing=spec.get("trl_gradient_checkpointing", False),
        save_strategy="no",
        logging_steps=1,
        disable_tqdm=True,
        dataloader_num_workers=0,
    )


def build_trainer(spec: dict, out_dir: str, callbacks: list):
    """TRL's GRPOTrainer on the bench config's task, prompt stream, reward, LoRA and shape, for spec["steps"] steps."""
    from rlvr.config import reward_config
    from rlvr.verifiers.compose import task_reward

    cfg = bench_config(spec)
    task, steps = step_problems(cfg, spec["steps"])
    reward = task_reward(reward_config(cfg["reward"]), task)[1]
    model, tokenizer = load_model(spec["model"], cfg["model"]["dtype"])  # the dtype rlvr's side loads in
    peft_config = None
    if spec["lora"]:
        from peft import LoraConfig

        lc = cfg["model"]["lora"]
        peft_config = LoraConfig(
            r=lc["r"],
            lora_alpha=lc["alpha"],
            lora_dropout=lc["dropout"],
            target_modules=lc["target_modules"],
            task_type="CAUSAL_LM",
            bias="none",
        )
    args = trl_config(spec, cfg, out_dir)
    args.reward_weights = reward.weights
    trainer = _trainer_class()(
        model=model,
        processing_class=tokenizer,
        reward_funcs=reward.as_trl(),
        args=args,
        train_dataset=_dataset(task, steps),
        peft_config=peft_config,
        callbacks=callbacks,
    )
    trainer._reset_timers()
    return trainer, sum(p.numel() for p in model.parameters())


def run_trl(spec: dict) -> None:
    import tempfile

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="rlvr-bench-trl-") as out_dir:
        gate = _callback()
        trainer, n_params = build_trainer(spec, out_dir, [gate])
        gate.trainer = trainer
        emit("ready", load_s=time.perf_counter() - t0, params=n_params, rss=peak_rss_bytes(), versions=versions())
        trainer.train()


def _budget_callback(out, budget_min: float, save_every: int):
    from transformers import TrainerCallback

    from rlvr.training.loop import last_in_budget

    class BudgetClock(TrainerCallback):
        """Stops training on the wall clock by rlvr's rule (rlvr.training.loop.last_in_budget): a step is the last
        when the one after it would end past the budget, at the mean step time so far.
        Saves the LoRA adapter every `save_every` steps and after the last, with the minutes trained so far."""

        def __init__(self):
            self.trainer, self.t0, self.step_t0, self.last = None, 0.0, 0.0, False

        def on_train_begin(self, args, state, control, **kwargs):
            self.t0 = time.perf_counter()

        def on_step_begin(self, args, state, control, **kwargs):
            self.step_t0 = time.perf_counter()
            self.last = last_in_budget(budget_min, self.step_t0 - self.t0, state.global_step)
            self.trainer._reset_timers()

        def on_step_end(self, args, state, control, **kwargs):
            import json

            now = time.perf_counter()
            b, step = self.trainer.bench, state.global_step
            row = {
                "step": step,
                "minutes": (now - self.t0) / 60,
                "time/step": now - self.step_t0,
                "time/generate": b["generate"],
                "time/verify": b["verify"],
                "reward/mean": b["reward"],
                "gen_tokens": b["gen_tokens"],
            }
            with open(out / "metrics.jsonl", "a") as fh:
                fh.write(json.dumps(row) + "\n")
            if step % save_every == 0 or self.last or step >= args.max_steps:
                self.trainer.model.save_pretrained(out / "checkpoints" / f"step-{step}")
                with open(out / "checkpoints.jsonl", "a") as fh:
                    fh.write(json.dumps({"step": step, "minutes": row["minutes"]}) + "\n")
            if self.last:
                control.should_training_stop = True

    return BudgetClock()


def run_trl_budget(spec: dict) -> None:
    """`rlvr bench --vs trl --budget`: TRL's GRPOTrainer trained for spec["budget_min"] minutes of wall clock (at most
    spec["steps"] steps), its adapter saved as it goes under spec["out"] (checkpoints/step-N, checkpoints.jsonl
    with the minutes each was saved at, metrics.jsonl per step), for evaluation afterwards."""
    from pathlib import Path

    out = Path(spec["out"])
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    clock = _budget_callback(out, spec["budget_min"], spec["save_every"])
    trainer, n_params = build_trainer(spec, str(out / "trainer"), [clock])
    clock.trainer = trainer
    emit("ready", load_s=time.perf_counter() - t0, params=n_params, rss=peak_rss_bytes(), versions=versions())
    trainer.train()
