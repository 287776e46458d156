"""One RL step as a public function: `run_step(state, step) -> StepResult`. `setup(cfg)` builds the state.

The training loop (rlvr.training.loop) calls it, and so does the bench's rlvr worker, so both run the same step.
What a step does, in order: sync the sampler's weights to the policy; (validation, when asked); sample and
verify the step's batch (dynamic sampling and advantages included: rlvr.training.batch.collect); let the prompt
stream see the results (curricula); update the policy; the metrics line; the LR schedule's step.
"""

from __future__ import annotations

import copy
import itertools
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Protocol

import torch

from rlvr.algorithms import Algorithm, algorithm_from_config
from rlvr.config import Config, ConfigError, RewardConfig, as_config
from rlvr.environments.build import environment_factory, episodes_of
from rlvr.environments.figures import episode_metrics
from rlvr.environments.protocol import Environment
from rlvr.evaluation.demo_choice import greedy
from rlvr.evaluation.demo_choice import measure as measure_demo
from rlvr.evaluation.out_of_domain import check_sets
from rlvr.evaluation.validation import validate
from rlvr.policy.build import build_policy, policy_device
from rlvr.policy.update import UpdateSettings, update_policy
from rlvr.prompts.chat import PromptCache, prompt_format
from rlvr.prompts.stream import CurriculumStream, PromptStream, make_stream, spread_over_bands, step_band_metrics
from rlvr.sampling import build_sampler
from rlvr.sampling.rollouts import Sampler
from rlvr.sampling.scored import draw_generator
from rlvr.tasks import DatasetError, Problem, Task, absolute_paths, load_task
from rlvr.training import distributed
from rlvr.training.batch import RoundFn, StepBatch, collect, rollout_round
from rlvr.training.episodes import EpisodeRound
from rlvr.training.lifecycle import check_registered
from rlvr.training.metrics import step_metrics_row
from rlvr.training.teacher import Teacher, TeacherSpec, build_teacher, distill_batch, distill_metrics, resolve_teacher
from rlvr.verifiers.compose import Reward, build_reward, task_reward
from rlvr.verifiers.controls import ControlReward, control_reward

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class SamplingAhead(Protocol):
    """What the step and the loop ask of rlvr.training.ahead.Ahead, the thread that samples ahead (named here, not
    imported: ahead.py imports this module)."""

    def take(self, step: int) -> StepBatch: ...
    def publish(self, version: int) -> None: ...
    def validate(self, run: Callable[[TrainState], dict[str, float]]) -> dict[str, float]: ...
    def figures(self, step: int) -> dict[str, float]: ...
    def checkpoint(self, done: int) -> tuple[dict, dict]: ...
    def close(self) -> None: ...


@dataclass
class Components:
    """What the settings build without touching a model: checked before any file is written. `cfg` has the task's
    grading filled in (what the run directory records)."""

    cfg: Config
    algo: Algorithm
    reward: Reward | ControlReward  # a control run's reward wraps the real one (rlvr.verifiers.controls)
    task: Task
    # one fresh environment per call, when rollouts are episodes (episode section); None: single-turn rollouts
    new_environment: Callable[[], Environment] | None = None
    teacher: TeacherSpec | None = None  # the distillation teacher (distill section), checked; None without one

    @property
    def resolved(self) -> Config:
        """The config the run records: `cfg` itself (one Config; the name is the loop's)."""
        return self.cfg


@dataclass
class TrainState:
    """Everything a step reads or changes. Built once by `setup`; checkpoints save the model, optimizer,
    scheduler and stream."""

    cfg: Config
    algo: Algorithm
    reward: Reward | ControlReward
    task: Task
    comm: distributed.Comm
    model: torch.nn.Module
    tokenizer: PreTrainedTokenizerBase
    ref_model: torch.nn.Module | None
    optimizer: torch.optim.Optimizer
    scheduler: torch.optim.lr_scheduler.LRScheduler
    sampler: Sampler
    stream: PromptStream | CurriculumStream
    prompt_ids: PromptCache
    update: UpdateSettings
    val_problems: list[Problem] = field(default_factory=list)
    rollout_round: RoundFn = rollout_round  # one round's rows: one completion each, or one episode each
    ahead: SamplingAhead | None = None  # rollout.max_staleness >= 1: the thread sampling ahead (rlvr.training.ahead)
    teacher: Teacher | None = None  # distill.coef > 0: scores each step's rows (rlvr.training.teacher)
    demo: dict | None = None  # demo "auto" measured at setup: the choice's record (rlvr.evaluation.demo_choice)


@dataclass
class StepResult:
    """What one step did. `batch` is this rank's kept rows (what the loss saw); `seen` the global batch's kept
    rows; `generated` every row the global batch generated (metrics, samples, curriculum); `update` the
    update's figures; `row` the metrics line."""

    batch: StepBatch
    seen: StepBatch
    generated: StepBatch
    update: dict
    row: dict


def check_components(cfg: Config | dict) -> Components:
    """Build every component that validates settings, before any file is written. A dict (the Python API's
    train(cfg)) is checked as the command line checks a file (rlvr.config.as_config)."""
    cfg = as_config(cfg)
    algo = algorithm_from_config(cfg.algorithm)
    policy_device(cfg.model.device)  # a GPU asked for and not there: refused before any file
    task, resolved, reward = configured_reward(cfg)
    if not task.problems("train"):  # a heldout-only jsonl config, say: one line, not the stream's traceback
        raise ConfigError(
            f"task {cfg.task.name!r} has no train problems; training needs a train split "
            "(jsonl: task.settings.splits.train, or task.settings.path to cut one file by id)"
        )
    make_stream(cfg.curriculum, task.problems("train"), cfg.seed)  # the curriculum's kind, keys and bands
    check_sets(cfg)  # eval.out_of_domain: the sets the main job and `rlvr eval` will load
    reward = control_reward(reward, cfg.reward.control, cfg.seed)  # a control run's reward
    cfg = copy.deepcopy(cfg)  # the run's own: the caller's Config is not changed, nor shared
    cfg = replace(cfg, reward=resolved, task=replace(cfg.task, settings=absolute_paths(cfg.task.settings)))
    new_environment = environment_factory(cfg.episode, task, reward)  # its mistakes too, before any model
    return Components(cfg, algo, reward, task, new_environment, resolve_teacher(cfg))


def configured_reward(cfg: Config) -> tuple[Task, RewardConfig, Reward]:
    """(task, the reward section resolved against it, its Reward) of a resolved config: what a run grades with, for
    training, SFT and `rlvr serve --config / --run`. Mistakes are ConfigErrors (bad data a DatasetError), the names of
    registry entries first (check_registered)."""
    check_registered(cfg)
    if cfg.reward.terms:
        build_reward(cfg.reward)  # the reward's own mistakes first, named as before
    task = load_configured_task(cfg)
    resolved, reward = task_reward(cfg.reward, task)
    return task, resolved, reward


def load_configured_task(cfg: Config) -> Task:
    """The config's task; an unknown task, band or setting is a config mistake (exit 2), bad data a DatasetError."""
    try:
        return load_task(cfg.task.name, **cfg.task.settings)
    except (DatasetError, ConfigError):
        raise
    except ValueError as e:
        raise ConfigError(f"task: {e}") from None


def setup(parts: Components, policy=None, comm: distributed.Comm | None = None) -> TrainState:
    """The policy (with LoRA), the reference for KL when needed, AdamW over the trainable weights, the LR
    schedule, the sampler, the prompt stream. `policy` = (model, tokenizer) overrides loading by name. With
    train.fsdp on several ranks the model is sharded (the reference, when there is one, is not)."""
    c, comm = parts.cfg, comm or distributed.Comm()
    model, tokenizer = build_policy(c, policy)
    # With LoRA the reference is the base model with the adapter switched off: no second copy in memory.
    ref_model = _frozen_copy(model) if parts.algo.beta > 0 and not c.model.lora.enabled else None
    comm.broadcast_params([p for p in model.parameters() if p.requires_grad])  # every rank starts from rank 0's
    teacher = build_teacher(parts.teacher, c, model, tokenizer) if parts.teacher else None
    # before sharding: a remote sampler checks each server against a forward of the whole model (a forward of the
    # sharded one here, before the first step, left FSDP's parameters unfit for loading a checkpoint)
    fmt = prompt_format(c.model.prompt_format, tokenizer, c.model.name, episodes_of(c.episode))
    sampler = build_sampler(c.rollout, model, tokenizer, prompt_format=fmt)
    # demo "auto": the start model's own answers with and without the demonstration (rlvr.evaluation.demo_choice)
    demo = None
    if getattr(parts.task, "demo_options", None) and not parts.new_environment:
        distributed.sync_sampler(comm, sampler, model)  # servers hold the policy only once it is pushed
        demo = measure_demo(parts.task, greedy(sampler, tokenizer, c.rollout.max_new_tokens, fmt), parts.reward)
    if c.train.fsdp and comm.world > 1:  # the shards replace the parameters: the optimizer is made after
        distributed.shard_model(model, comm)
    trainable = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(trainable, lr=c.train.lr, weight_decay=c.train.weight_decay)
    val = spread_over_bands(parts.task.problems("validation"), c.log.eval_problems) if c.log.eval_every else []
    return TrainState(
        c,
        parts.algo,
        parts.reward,
        parts.task,
        comm,
        model,
        tokenizer,
        ref_model,
        optimizer,
        make_scheduler(optimizer, c.train),
        sampler,
        make_stream(c.curriculum, parts.task.problems("train"), c.seed),
        PromptCache(tokenizer, parts.task, fmt),
        UpdateSettings.from_config(c, tokenizer.pad_token_id),
        val,
        EpisodeRound(parts.new_environment, tokenizer, c.episode) if parts.new_environment else rollout_round,
        teacher=teacher,
        demo=None if demo is None else demo.to_dict(),
    )


def make_scheduler(optimizer, train):
    """transformers' linear warm-up over train.warmup_steps, then constant or cosine decay to 0 at train.steps.
    As transformers counts it, the first warm-up step has a learning rate of 0."""
    from transformers import get_constant_schedule_with_warmup, get_cosine_schedule_with_warmup

    if train.lr_schedule == "cosine":
        return get_cosine_schedule_with_warmup(optimizer, train.warmup_steps, max(train.steps, 1))
    return get_constant_schedule_with_warmup(optimizer, train.warmup_steps)


def run_step(state: TrainState, step: int, *, validate_now: bool = False) -> StepResult:
    """One RL step (on this rank); see the module docstring for its order."""
    comm, pad_id = state.comm, state.tokenizer.pad_token_id
    t0 = time.perf_counter()
    state.model.eval()
    validate_now = validate_now and comm.is_main and bool(state.val_problems)
    if state.ahead is None:
        distributed.sync_sampler(comm, state.sampler, state.model)
        val = _validation(state) if validate_now else {}
        batch = sample_batch(state, step)
    else:  # rollout.max_staleness >= 1: sampled ahead from older weights, on another thread (rlvr.training.ahead)
        val = state.ahead.validate(_validation) if validate_now else {}
        batch = state.ahead.take(step)
    if state.teacher is not None:  # on the trainer's thread, the policy's weights at rest: what was sampled, scored
        distill_batch(state.teacher, batch, state.cfg.distill, state.update)
    seen = distributed.gather_batch(comm, batch, pad_id=pad_id)  # the global batch (metrics, curriculum)
    generated = seen.all_generated
    if state.ahead is None:  # sampled ahead, the sampling thread showed the stream each batch, in this same order
        state.stream.observe(step, generated)
    state.model.train()
    t1 = time.perf_counter()
    upd = (
        update_policy(
            state.model,
            state.optimizer,
            batch,
            state.algo,
            state.update,
            ref_model=state.ref_model,
            comm=comm if comm.world > 1 else None,
        )
        if len(seen)
        else {"skipped": 1}
    )
    t2 = time.perf_counter()
    if state.ahead is not None:  # the weights of version step + 1, for the batch of step + 1 + k
        state.ahead.publish(step + 1)
    row = {
        **step_metrics_row(step, seen, generated, upd, state.scheduler.get_last_lr()[0], t1 - t0, t2 - t1),
        **distill_metrics(seen.stats),
        **step_band_metrics(generated),
        **(episode_metrics(generated.episodes) if generated.episodes else {}),
        **val,
        **(state.ahead.figures(step) if state.ahead is not None else {}),
    }
    _schedule_step(state.scheduler, skipped=bool(upd.get("skipped")) or not upd.get("active_rows"))
    return StepResult(batch, seen, generated, upd, row)


def sample_batch(state: TrainState, step: int) -> StepBatch:
    """Step `step`'s batch (this rank's block) from the sampler as it is now: the step's seeded generator, the
    stream's prompts (fresh ones each round of dynamic sampling), then rollouts, verdicts and advantages."""
    c, comm = state.cfg, state.comm
    generator = draw_generator(c.seed, step + comm.seed_offset)  # as the SFT baseline's rounds draw
    rounds = itertools.count()

    def next_prompts():  # dynamic sampling draws fresh prompts each round
        problems = state.stream.take(c.rollout.prompts_per_step, step, next(rounds))
        return problems, [state.prompt_ids(p) for p in problems]

    # with a teacher every group carries its per-token signal: dynamic sampling would drop what it can learn from
    algo = replace(state.algo, dynamic_sampling=False) if state.teacher is not None else state.algo
    args = (state.sampler, next_prompts, state.reward, algo, c.rollout, generator, state.tokenizer.pad_token_id)
    return collect(*args, comm, round_fn=state.rollout_round)


def _validation(state: TrainState) -> dict:
    """Greedy validation of the sampler's current weights on the validation problems (val/* figures)."""
    prompt_ids = [state.prompt_ids(p) for p in state.val_problems]
    return validate(state.sampler, state.val_problems, prompt_ids, state.reward, state.cfg.rollout.max_new_tokens)


def _schedule_step(scheduler, skipped: bool) -> None:
    """The LR schedule counts every step, updated or not, so that the LR at step N is the same whatever was skipped
    (and a resume is exact). A step whose batch held no informative group (no row with a non-zero advantage), or
    whose loss was not finite, skips the optimizer on purpose; torch cannot tell that from a misordered call and
    warns that lr_scheduler.step() came before optimizer.step(): on such a step, and only then, that one warning
    is ignored."""
    import warnings

    with warnings.catch_warnings():
        if skipped:
            warnings.filterwarnings("ignore", message=r"Detected call of `lr_scheduler.step\(\)` before")
        scheduler.step()


def _frozen_copy(model):
    import copy

    ref = copy.deepcopy(model).eval()
    for p in ref.parameters():
        p.requires_grad_(False)
    return ref


__all__ = [
    "Components",
    "TrainState",
    "StepResult",
    "check_components",
    "setup",
    "run_step",
    "sample_batch",
    "make_scheduler",
]
