"""The RLVR loop: sample, verify, compute group advantages, update the policy; log, checkpoint, repeat.

Read it top to bottom. Simplifications, and why:
- Each step's sampling uses a generator seeded by (seed, step), and prompts come from a seeded stream or
  curriculum (rlvr.prompts.stream): a resumed run redoes exactly what the uninterrupted run would have done.
- One rollout batch feeds `mu` optimisation passes (1 by default); with one pass the "old" policy is the
  current one, so the ratio is 1 and no second forward is run.
- The sampler holds its own copy of the weights (merged, possibly bf16) and is synced after each update.
- The step itself is `rlvr.training.step.run_step`; this file is what surrounds it: the run directory,
  resume, the time budget, signals, checkpoints, the metrics and samples lines, the progress bar, the warnings (and
  the stop) for steps without learning signal (rlvr.training.signal_watch), and the
  experiment trackers of log.report_to (rlvr.rundir.trackers), which get each line after the run directory has it.
- Rewards, verdicts and lengths are logged over every generated row; the loss sees only the kept rows.
- Launched by torchrun on W ranks, each rank samples and trains on its block of the step's prompts and
  the gradients are summed (rlvr.training.distributed); rank 0 alone writes the run directory and feeds
  the trackers. On one rank every `comm` call is a no-op. With train.fsdp the policy is sharded over the ranks
  (FSDP2): saving it then gathers the whole weights, with every rank taking part (rlvr.rundir.fsdp).
"""

from __future__ import annotations

import json
import math
import shutil
import time
from contextlib import nullcontext
from pathlib import Path

from tqdm.auto import tqdm

from rlvr.config import Config
from rlvr.evaluation.demo_choice import read_back, record_demo
from rlvr.rundir import checkpoint as ckpt
from rlvr.rundir import fsdp
from rlvr.rundir.files import RunDir, atomic_write_text
from rlvr.rundir.trackers import Trackers
from rlvr.training import ahead, contention, distributed
from rlvr.training.episodes import recorded_prompts
from rlvr.training.lifecycle import (
    StopFlag,
    TrainingAborted,
    checkpoint_due,
    exit_on_signal,
    open_run,
    resume_step,
    save_final,
)
from rlvr.training.metrics import sample_rows
from rlvr.training.run_report import reporting
from rlvr.training.signal_watch import SignalWatch
from rlvr.training.step import TrainState, check_components, run_step, setup

# Non-finite losses in a row before the run stops: one is a fluke worth skipping, a streak means the run
# has diverged (or the data is broken) and more steps would only burn time.
MAX_BAD_STEPS = 3


def train(
    cfg: Config | dict,
    *,
    resume: bool = False,
    overwrite: bool = False,
    allow_config_change: bool = False,
    policy=None,
    quiet: bool = False,
    report: bool = True,
) -> Path:
    """Run RLVR training as configured; returns the run directory. `rlvr train` is this call, and so is the Python
    API's `from rlvr import train`: the same run directory, RUN/report.md and RUN/plots/ included, written when
    training ends or stops by a signal (rlvr.training.run_report). `report=False` leaves the report to a caller
    that reports the run itself (the main job's phases). `policy` = (model, tokenizer) overrides loading by name
    (tests use a tiny random model)."""
    parts = check_components(cfg)
    if resume:  # demo "auto" as the run measured it at its start (its demo.json): the same prompt, the same config
        cfg, demo = read_back(parts.cfg, parts.cfg.output_dir)
        parts = check_components(cfg) if demo is not None else parts
    with reporting(parts.resolved.output_dir) if report else nullcontext():
        return _train(parts, resume, overwrite, allow_config_change, policy, quiet)


def _train(parts, resume: bool, overwrite: bool, allow_config_change: bool, policy, quiet: bool) -> Path:
    """The run itself: the run directory, the steps, final/."""
    cfg = parts.resolved  # the run records the grading it uses, the task's own when the config names none
    comm = distributed.setup()  # scale-out: W ranks under torchrun, else one
    ahead.check(parts.cfg, comm)
    # data parallel: rank 0 alone owns the run directory and the trackers
    opened = open_run(
        cfg,
        cfg.output_dir,
        resume=resume,
        overwrite=overwrite,
        allow_config_change=allow_config_change,
        policy=policy,
        is_main=comm.is_main,
    )
    comm.barrier()  # the others wait until the run directory is ready
    sampling_ahead = None
    try:
        state = _start(parts, policy, comm, opened.run, resume)
        if state.demo is not None and opened.run is not None:  # demo "auto", measured on the loaded start model
            record_demo(opened.run, state.demo)
        start = _resume(opened.run, state, opened.resume_from) if resume else 0
        # rollout.max_staleness >= 1: a thread samples the next batches from older weights (None when 0)
        state.ahead = sampling_ahead = ahead.start(state, start, opened.resume_from if resume else None)
        done = _loop(state, opened.run, opened.trackers, start, quiet)
        if sampling_ahead is not None:
            sampling_ahead.close()  # before the final save: a batch past the run's end is not needed
        prompts = recorded_prompts(state.task, state.tokenizer, state.rollout_round)  # an episode's opening
        save_final(opened.run, state.model, state.tokenizer, state.cfg, prompts, done, comm=comm)
    finally:
        if sampling_ahead is not None:
            sampling_ahead.close()
        opened.trackers.finish()
    return opened.path


def _start(parts, policy, comm, run: RunDir | None, resume: bool) -> TrainState:
    """setup(); Ctrl-C while it loads (before any step) removes a fresh run's directory, which holds only its
    config, so that a plain rerun is not refused as "output directory exists"."""
    try:
        return setup(parts, policy, comm)
    except KeyboardInterrupt:
        if run is not None and not resume:
            shutil.rmtree(run.path, ignore_errors=True)
        raise


def _loop(state: TrainState, run: RunDir | None, trackers: Trackers, start: int, quiet: bool) -> int:
    """Steps from `start` until train.steps, the time budget, a signal or a diverged run; returns the steps done."""
    c, comm, run_path = state.cfg, state.comm, Path(state.cfg.output_dir)
    bad_steps, started, done = 0, time.perf_counter(), start
    saved_at = started  # log.checkpoint_minutes counts from here, then from each checkpoint
    first = prev = contention.snapshot() if comm.is_main else None  # what other processes take (rank 0 reports)
    watch = SignalWatch.open(run, c, start, state.task) if run is not None else None  # no learning signal (rank 0)
    bar = tqdm(
        range(start, c.train.steps),
        initial=start,
        total=c.train.steps,
        desc="rlvr train",
        disable=quiet or not comm.is_main,
    )
    with StopFlag() as stop:
        for step in bar:
            # data parallel: ranks decide together (their clocks differ)
            last = comm.any(
                step + 1 == c.train.steps
                or last_in_budget(c.train.time_budget_min, time.perf_counter() - started, step - start)
            )
            result = run_step(
                state, step, validate_now=bool(c.log.eval_every) and (step % c.log.eval_every == 0 or last)
            )
            done = step + 1
            # train.stop_without_signal: this step ends the run as the budget's last would (checkpoint, final/)
            last = comm.any(watch is not None and watch.see(step, result.row)) or last
            stopping = comm.any(stop.signum is not None)
            if run is not None:  # rank 0, which holds the run directory
                prev = _note_contention(result.row, prev)
                _log_step(run, trackers, c, step, result)
                if last or stopping:  # the training phase's figures, before a signal's exit
                    _write_contention(run, state, first, prev, done - start, time.perf_counter() - started)
            bar.set_postfix(_progress(result.row))
            _budget_eta(bar, c.train, step + 1 - start, time.perf_counter() - started)
            bad_steps = bad_steps + 1 if result.update.get("skipped") and len(result.seen) else 0
            # `stopping` is read once per step (and agreed by all ranks), so a signal landing between the save
            # and the exit below cannot exit without a checkpoint: it is then handled after the next step.
            # every rank takes part in a save, so they agree on the clock's verdict too
            if comm.any(checkpoint_due(step + 1, c.log, time.perf_counter() - saved_at)) or last or stopping:
                _save_checkpoint(run, state, step + 1)
                saved_at = time.perf_counter()
            if bad_steps >= MAX_BAD_STEPS:
                bar.close()
                raise TrainingAborted(
                    f"step {step}: non-finite loss or gradient {bad_steps} steps in a row; "
                    f"the update was skipped each time; lower train.lr or check the data; "
                    f"last checkpoint: {ckpt.latest_complete(run_path / 'checkpoints') or 'none'}"
                )
            if stopping:
                bar.close()
                exit_on_signal(stop.signum, step + 1, run_path, comm)
            if last:
                break
    return done


def _note_contention(row: dict, before):
    """The step's time/other_cpu_share (rlvr.training.contention) into its metrics line; returns the new snapshot."""
    now = contention.snapshot()
    figures = contention.other_cpu(before, now)
    if figures is not None:
        row["time/other_cpu_share"] = figures["other_share"]
    return now


def _write_contention(run: RunDir, state: TrainState, first, last, steps: int, train_s: float) -> None:
    """RUN/contention.json: this session's steps, steps per minute, the CPU others took while it trained and the
    settings it computed in emulated bf16."""
    emulated = contention.emulated_bf16(state.cfg, state.sampler, state.model)
    figures = contention.run_figures(first, last, steps, train_s, emulated)
    atomic_write_text(run.path / "contention.json", json.dumps(figures, indent=2) + "\n")


def _log_step(run: RunDir, trackers: Trackers, c, step: int, result) -> None:
    """The metrics line every step; the samples (every generated row) every log.samples_every steps; the same
    to the trackers, after the run directory has them."""
    samples = sample_rows(step, result.generated) if c.log.samples_every and step % c.log.samples_every == 0 else None
    run.append(run.metrics_path, [result.row])
    if samples is not None:
        run.append(run.samples_path, samples)
    trackers.log_step(result.row, samples)


def _save_checkpoint(run: RunDir | None, state: TrainState, step: int) -> None:
    """Under FSDP every rank gathers the whole weights together; rank 0 (the one holding `run`) writes."""
    comm = state.comm
    full = fsdp.gather_checkpoint(state.model, state.optimizer) if comm.sharded else None
    # sampled ahead: the stream as it was after this step's batch, and the weights the pending batches sample from
    stream, tensors = state.ahead.checkpoint(step) if state.ahead is not None else (state.stream.state_dict(), None)
    if run is not None:  # rank 0
        run.check_ours()  # a folder reused while this run was stopping gets none of its checkpoints
        ckpt.save_checkpoint(
            run.path / "checkpoints",
            step,
            model=state.model,
            optimizer=state.optimizer,
            scheduler=state.scheduler,
            loop_state={"step": step, "prompts": stream, "world_size": comm.world},
            keep=state.cfg.log.keep_checkpoints,
            full=full,
            tensors=tensors,
        )


def last_in_budget(budget_min: float, elapsed_s: float, steps_done: int) -> bool:
    """Whether the step about to start is the last the time budget (minutes; 0 = none) has room for: at the mean
    step time so far, the one after it would end past the budget. Deciding on a step's expected end rather than its
    start keeps a recipe with long steps inside the budget: with 5-minute steps and 15 minutes, 3 steps, not the 4-5
    that start before minute 15 (a retry arm in docs/log/2026-12-02.md ran 10 minutes over that way). The first step
    always runs; steps that slow down can still end one step late."""
    if not budget_min or steps_done <= 0:
        return False
    return elapsed_s + 2 * elapsed_s / steps_done > 60 * budget_min


def _budget_eta(bar, train, steps_done: int, elapsed_s: float) -> None:
    """With a time budget the run ends on the clock, not at train.steps: size the bar to the steps the
    budget leaves room for at the mean step time so far, so its ETA is the budget's."""
    if bar.disable or not train.time_budget_min or steps_done <= 0:
        return
    left = max(0.0, 60 * train.time_budget_min - elapsed_s)
    # the step in flight, then the steps that end inside the budget (last_in_budget)
    expected = min(bar.n + 1 + math.floor(left / (elapsed_s / steps_done)), train.steps)
    if expected != bar.total:  # steps speed up as completions shorten: the estimate may grow as well as shrink
        bar.total = expected
        bar.refresh()


def _progress(row: dict) -> dict:
    """The progress bar's figures: reward, informative groups, verdicts, step time, validation accuracy."""
    out = {
        "reward": f"{row['reward/mean']:.3f}",
        "nzv": f"{row['groups/nonzero_var_frac']:.2f}",
        "correct": f"{row['verdict/correct_frac']:.2f}",
        "no_ans": f"{row['verdict/no_answer_frac']:.2f}",
        "s/step": f"{row['time/step']:.1f}",
    }
    if "val/accuracy" in row:
        out["val"] = f"{row['val/accuracy']:.2f}"
    return out


def _resume(run: RunDir | None, state: TrainState, path: Path | None) -> int:
    """Every rank loads the same checkpoint (`path`, the newest complete one); rank 0 (the one holding `run`)
    trims the logs."""
    saved = None
    if path is not None:
        saved = ckpt.load_checkpoint(path, model=state.model, optimizer=state.optimizer, scheduler=state.scheduler)
        distributed.check_resume(state.comm, saved)
        state.stream.load_state_dict(saved["prompts"])
    return resume_step(run, saved)


__all__ = ["train", "TrainingAborted", "MAX_BAD_STEPS", "last_in_budget"]
