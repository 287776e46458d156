"""The config's sections as dataclasses (`Config` and its parts): their defaults are rlvr.config.DEFAULTS, their
fields' metadata (rlvr.config.fields) the choices, ranges, open keys and registries that the checks read.
A section is built from its checked dict by `build`; `walk` lists every leaf's dotted key and field."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields

from rlvr.config.fields import auto_or_range, choice, each, in_range, open_field, registered


@dataclass
class LoraConfig:
    enabled: bool = True
    r: int = in_range(16, 1)
    alpha: int = in_range(32, 0, above=True)
    dropout: float = in_range(0.0, 0.0, 1.0)
    target_modules: str | list = field(default="all-linear", metadata={"open": True})


@dataclass
class ModelConfig:
    name: str = "smollm2-135m-instruct"  # embedded GGUF default, a local folder, a .gguf file, or a hub id
    dtype: str = choice("float32", "bfloat16", "float16")  # master weights; compute may autocast
    device: str = choice("auto", "cpu", "cuda")  # where the trainer's policy lives; auto = cuda when torch sees one
    # the merged model's dtype in final/merged: "auto" = the dtype the model's own weights are stored in (bf16 for
    # the embedded default), else the training dtype (model.dtype)
    save_dtype: str = choice("auto", "float32", "bfloat16", "float16")
    save_merged: bool = True  # final/merged beside final/adapter (LoRA); false: the adapter alone (rlvr eval merges it)
    # how prompts are written (rlvr.prompts.chat): "chat" through the tokenizer's chat template, "plain" as plain text
    # for a base model (the R1-Zero frame), "auto" = chat when the tokenizer has a chat template, else plain
    prompt_format: str = choice("auto", "chat", "plain")
    lora: LoraConfig = field(default_factory=LoraConfig)


@dataclass
class TaskConfig:
    name: str = "arithmetic"
    settings: dict = open_field(dict)  # checked by the task's loader (rlvr.tasks.load_task)


@dataclass
class RewardConfig:
    # weighted terms, checked by rlvr.verifiers.compose.build_reward; empty = the task's own grader (task.grader:
    # math in the task's answer form + boxed format for answer tasks, python_tests for code tasks)
    terms: list = open_field(list)
    allow_dominant_shaping: bool = False
    workers: int = in_range(2, 0)
    timeout_s: float = in_range(5.0, 0.0, above=True)
    # where verification runs when workers > 0: local processes, or "ray" (optional extra)
    engine: str = choice("local", "ray")
    # a control run's reward instead of the real one (rlvr.verifiers.controls): "random_rate" pays Bernoulli(p) at the
    # policy's own success rate p each batch, "format_only" the format term alone; verdicts stay the real verifier's
    control: str = registered("none", "reward control", where="on_reward")  # rlvr.verifiers.controls.CONTROLS


@dataclass
class VllmConfig:
    """backend "vllm" only (rlvr.sampling.vllm, docs/performance.md): vLLM's engine on the trainer's GPU.
    gpu_memory_utilization: the fraction of the GPU vLLM takes (the trainer needs the rest); dtype: the engine's
    weights; max_model_len 0 = the model's own; weight_sync: "full" (merged weights each step) or "lora" (the
    adapter, applied by vLLM)."""

    gpu_memory_utilization: float = in_range(0.3, 0.0, 1.0, above=True)
    dtype: str = choice("bfloat16", "float16", "float32", "auto")
    enforce_eager: bool = False
    max_model_len: int = in_range(0, 0)
    weight_sync: str = choice("full", "lora")


@dataclass
class RolloutConfig:
    # rlvr.sampling.BACKENDS. "fast" runs the families of rlvr.sampling.families (Llama, the embedded default's, Mistral,
    # Qwen2, Qwen3, SmolLM3, Gemma 3); any other model samples with "hf", which one warning says at start-up
    # (rlvr.sampling.fast)
    backend: str = registered("fast", "sampler backend")
    prompts_per_step: int = in_range(4, 1)  # P
    group_size: int = in_range(8, 1)  # G
    max_new_tokens: int = in_range(128, 1)
    temperature: float = in_range(1.0, 0.0, above=True)  # log-probs are of logits / temperature
    top_p: float = in_range(1.0, 0.0, 1.0, above=True)
    top_k: int = in_range(0, 0)
    # local samplers' compute dtype; "float32" is the reference path (docs/performance.md); "auto" = bfloat16 where the
    # CPU has it in hardware, else float32 (rlvr.machine), made concrete when the config resolves
    dtype: str = choice("auto", "bfloat16", "float32")
    # backend "remote" only (rlvr.sampling.remote, docs/scaling.md): vLLM server addresses, and a folder
    # every server can read the pushed LoRA adapters from ("" = a temporary folder on this machine)
    urls: list = field(default_factory=list)
    adapter_dir: str = ""
    vllm: VllmConfig = field(default_factory=VllmConfig)
    # k >= 1: step s samples (while the trainer updates) from the weights after max(0, s-k) updates (training.ahead)
    max_staleness: int = in_range(0, 0)  # 0: synchronous, each step samples from the weights it trains


@dataclass
class EpisodeConfig:
    """Multi-turn rollouts (rlvr.environments, docs/environments.md): "none" = one answer per prompt; "tool" = the
    task's question with `tools` offered, tool outputs back each turn, the first turn without a call graded as the
    answer; "retry" = a wrong answer gets its verdict back and another try, up to `attempts`, the reward of a right
    answer at attempt k times discount ** (k - 1). An episode ends when the environment says done, after max_turns
    policy turns or past max_total_tokens ids after the prompt; max_new_tokens (rollout) bounds each turn."""

    environment: str = registered("none", "environment")  # rlvr.environments.build.ENVIRONMENTS
    tools: list = each(registry="tool")  # rlvr.environments.build.TOOLS
    call_format: str = registered("hermes", "tool call format")  # rlvr.environments.calls.TOOL_CALL_PARSERS
    max_turns: int = in_range(4, 1)
    max_total_tokens: int = in_range(512, 1)
    tool_timeout_s: float = in_range(5.0, 0.0, above=True)  # the python tool's hard deadline per call
    step_timeout_s: float = in_range(30.0, 0.0)  # an environment step's deadline (0: none); past it, status timeout
    # a round's environment steps run on this many threads, so one slow tool call holds the round for its own time,
    # not for the sum of every row's (1: one after another)
    step_workers: int = in_range(8, 1)
    attempts: int = in_range(3, 1)
    discount: float = in_range(0.5, 0.0, 1.0)
    # environments others wrote: trl / openenv: the class (package.module:Class) and its constructor's arguments;
    # trl's reward functions; who grades the final answer: its owner, rlvr's verifier for the task, or both
    source: str = ""
    args: dict = open_field(dict)
    reward_funcs: list = each(plugin=True)
    grader: str = choice("environment", "task", "both")


# train.lr "auto": a LoRA adapter is few parameters and wants a larger step than a full fine-tune (every preset with
# LoRA trains at 2e-4); without LoRA, the rate this default was before LoRA's, 1e-5 (full fine-tuning runs 1e-6 to
# 1e-5; a 1.5B model wants the low end: set it)
LORA_LR = 2e-4
FULL_FINE_TUNING_LR = 1e-5


@dataclass
class TrainConfig:
    steps: int = in_range(20, 1)
    # "auto" = LORA_LR with model.lora.enabled, else FULL_FINE_TUNING_LR, made concrete when the config resolves
    lr: float = auto_or_range(0.0, above=True)
    lr_schedule: str = choice("constant", "cosine")  # after train.warmup_steps of linear warm-up
    warmup_steps: int = in_range(0, 0)
    weight_decay: float = in_range(0.0, 0.0)
    max_grad_norm: float = in_range(1.0, 0.0, above=True)
    # at most this many rows, and (if > 0) this many completion tokens counting padding, a forward/backward:
    # they bound the update's memory. Rows are sorted by length across groups and cut where padding would
    # cost more than another chunk (rlvr.policy.update.micro_batches); a row longer than the token cap goes alone.
    micro_batch_size: int = in_range(8, 1)
    micro_batch_tokens: int = in_range(0, 0)
    updates_per_batch: int = in_range(1, 1)  # mu: optimisation passes over each rollout batch
    autocast: str = choice("auto", "none", "bfloat16")  # "auto" as rollout.dtype: bf16 where the CPU has it, else none
    # attention in the update: "auto" = rlvr's CPU kernel on the CPU (rlvr.policy.attention), the model's own on
    # a GPU; "rlvr"; "model" = whatever the model was loaded with (sdpa)
    attention: str = choice("auto", "rlvr", "model")
    # recompute each decoder layer's activations in the backward instead of keeping them: a third to a half
    # more update time for a fraction of its memory (docs/performance.md has both)
    gradient_checkpointing: bool = False
    time_budget_min: float = in_range(0.0, 0.0)  # stop (and save) after this many minutes of training; 0 = no limit
    # stop (and save) after this many steps in a row without an informative group; 0 = never (rlvr.training.
    # signal_watch). Such a step makes no update. 10: at the presets' 8 prompts x 8 samples, a model that solves 2%
    # of its samples has 10 in a row with probability 2e-6 (at 1%: 0.002), while a run that cannot learn stops
    # within a minute on the default preset instead of spending its whole budget
    stop_without_signal: int = in_range(10, 0)
    # shard the policy over the ranks with torch's FSDP2 (models that do not fit one device); a no-op on one
    # rank. Pair it with rollout.backend: remote (a local sampler holds the whole model). docs/scaling.md
    fsdp: bool = False
    # the main job (rlvr run): SFT first and RL from its merged model, instead of RL from the start model beside SFT
    init_from_sft: bool = False


@dataclass
class EvalConfig:
    """Held-out evaluation in the main job (rlvr run): the same split, samples per problem and verifier for
    every model compared. limit = problems per split (spread over bands); 0 = all."""

    split: str = "heldout"
    n: int = in_range(4, 1)
    ks: list = field(default_factory=lambda: [1, 4])
    limit: int = in_range(0, 0)
    greedy: bool = True
    # task sets evaluated beside the in-domain bands (same models, samples per problem and seed, each set graded
    # by its own task's grader): [{name, settings, split, limit, label}], e.g. the CHAMP numeric subset or
    # reasoning-gym families not trained on. Checked by rlvr.evaluation.out_of_domain.
    out_of_domain: list = field(default_factory=list, metadata={"open": True})
    # control runs the main job trains beside RLVR (rlvr run --controls): same budget, seed and settings, under
    # reward.control = each of these, or (no_tools) single-turn without tools; the report shows RLVR minus each per
    # band (rlvr.training.controls). CONTROLS' entries that change the reward or the episode (not none, RLVR itself)
    controls: list = each(registry="reward control", where="is_control_run")


@dataclass
class LogConfig:
    samples_every: int = in_range(5, 0)
    checkpoint_every: int = in_range(10, 0)
    # also a checkpoint once this many minutes have passed since the last (0: steps alone), so a kill costs at most about
    # this much, however long a step or short the run is (checkpoint_every 10 never saves a 9-step run before its end)
    checkpoint_minutes: float = in_range(10.0, 0.0)
    keep_checkpoints: int = in_range(2, 0)
    eval_every: int = in_range(0, 0)  # greedy accuracy on validation problems every N steps (0 = never)
    eval_problems: int = in_range(60, 1)  # how many validation problems (spread over the bands)
    # C of mismatch/outside_frac: the share of trained tokens whose ratio pi_train / pi_sampler lies outside
    # [1/C, C] (rlvr.algorithms.mismatch; 2 = the cap verl's corrections use by default)
    mismatch_cap: float = in_range(2.0, 1.0, above=True)
    # your own quiet run's RL steps per minute for this config on this machine (0 = none; no preset carries one: a
    # figure from another machine says nothing about this one): the reports warn when a run trains at less than half
    # of it, naming what the run ruled out (other processes' load, emulated bf16; rlvr.training.contention)
    quiet_steps_per_min: float = 0.0
    # Experiment trackers that also get every step's metrics line, the config, the samples and, in `rlvr run`, the
    # held-out tables and plots (rank 0 only; metrics.jsonl stays the source of truth). rlvr.rundir.trackers
    report_to: list = each(registry="tracker")  # rlvr.rundir.trackers.TRACKERS
    project: str = "rlvr"  # MLflow experiment, trackio / W&B project
    run_name: str = ""  # the run's name in the trackers; "" = the output directory's name


@dataclass
class SftConfig:
    """The supervised baseline (`rlvr sft`, rlvr.training.sft), read with the sections above: same model, LoRA,
    task, reward, rollout settings and seed, so that it differs from the RL run only in how it learns."""

    source: str = choice("samples", "reference")  # rejection sampling from the start model, or reference traces
    samples: int = in_range(0, 0)  # completions to sample; 0 = as many as the RL run samples (steps x P x G)
    match_run: str = ""  # an RL run directory: sample as many completions as its metrics.jsonl generated
    group_size: int = in_range(0, 0)  # samples per training prompt; 0 = rollout.group_size
    reference_field: str = "trace"  # source "reference": the dataset column holding a worked solution
    reference: str = ""  # or package.module:attr, a function (problem) -> trace (rlvr.training.reference_traces)
    epochs: int = in_range(2, 1)  # passes over the kept completions
    max_examples: int = in_range(0, 0)  # at most this many kept completions or traces, a seeded choice; 0 = all
    batch_size: int = in_range(8, 1)  # completions per optimizer step (micro-batched by train.micro_batch_size)
    lr: float = in_range(1e-4, 0.0, above=True)  # supervised LoRA fine-tuning wants a larger step than the RL update
    output_dir: str = ""  # "" = <output_dir>-sft, so one config gives the RL and SFT runs side by side


@dataclass
class DistillConfig:
    """On-policy distillation (rlvr.algorithms.distill, docs/distillation.md): a teacher scores the policy's own sampled
    tokens, and each token's advantage becomes A_it = A_i - coef * clip(sampler_logp_it - teacher_logp_it, -clip, clip)
    (the sampled reverse KL to the teacher, per token; A_i the verifier's group advantage, or 0 without `verifier`).
    teacher: "" (off), a run directory or PEFT adapter folder trained on the policy's own base (scored by switching to
    that adapter: no second model in memory), a model folder or hub id with the policy's tokenizer (loaded frozen), or
    with `urls` the model name `vllm serve` serves there. coef 0 leaves the run exactly as without a teacher."""

    teacher: str = ""
    coef: float = in_range(0.0, 0.0)  # lambda: the teacher's per-token term's weight in the advantage
    clip: float = in_range(2.0, 0.0, above=True)  # nats: |log ratio| beyond this counts as this, per token
    verifier: bool = True  # keep the verifier's group advantage beside the teacher's term; false: distillation alone
    urls: list = field(default_factory=list)  # vLLM servers of the teacher (OpenAI-compatible, prompt log-probs)
    # "constant": a control run whose term carries no per-token information: each token gets the mean of the step's
    # clipped terms (the same size, a constant negative advantage), to tell the teacher's knowledge from its size
    control: str = choice("none", "constant")
    # which rows the teacher scores: "all", or "no_signal": only the groups whose correctness term is the same on every
    # sample (none solved, or all did), where the verifier says nothing about the answers; the other groups train on
    # the verifier's advantage alone, and the teacher's prefill (most of a step with a larger teacher on a CPU) is
    # spent only where it is the signal (docs/distillation.md, "The teacher's cost")
    rows: str = choice("all", "no_signal")


@dataclass
class Config:
    """A whole resolved config, typed: built at the entry (cli, as_config), read as `cfg.train.lr` everywhere after."""

    seed: int = 0
    output_dir: str = "runs/train"
    model: ModelConfig = field(default_factory=ModelConfig)
    task: TaskConfig = field(default_factory=TaskConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    # a preset name plus any field overrides, checked by rlvr.algorithms.algorithm_from_config
    algorithm: dict = open_field(lambda: {"preset": "grpo"})
    # Prompt selection by difficulty band: {} draws uniformly from the train split; otherwise
    # {"kind": "fixed" | "schedule" | "adaptive", ...} as rlvr.prompts.curriculum.build_curriculum reads it.
    curriculum: dict = open_field(dict)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    episode: EpisodeConfig = field(default_factory=EpisodeConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = field(default_factory=EvalConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sft: SftConfig = field(default_factory=SftConfig)
    distill: DistillConfig = field(default_factory=DistillConfig)

    @classmethod
    def from_dict(cls, cfg: dict) -> Config:
        """The typed view of a config that `resolve` (or `merge`) validated."""
        return build(cls, cfg)

    def to_dict(self) -> dict:
        """The plain nested dict (DEFAULTS' key order) that config.yaml records and the trackers receive."""
        return asdict(self)


def build(cls, values: dict):
    """A section instance from its validated dict (this module's annotations are strings: the class names)."""
    sub = {f.name: SECTIONS.get(f.type) for f in fields(cls) if f.name in values}
    return cls(**{k: build(s, values[k]) if s else copy.deepcopy(values[k]) for k, s in sub.items()})


def walk(cls, prefix=""):
    """(dotted key, field) of every leaf and open field of a section class."""
    for f in fields(cls):
        if f.type in SECTIONS:
            yield from walk(SECTIONS[f.type], f"{prefix}{f.name}.")
        else:
            yield f"{prefix}{f.name}", f


SECTIONS: dict[object, type] = {c.__name__: c for c in (LoraConfig, ModelConfig, TaskConfig, RewardConfig, VllmConfig)}
SECTIONS |= {c.__name__: c for c in (RolloutConfig, EpisodeConfig, TrainConfig, EvalConfig, LogConfig, SftConfig)}
SECTIONS |= {DistillConfig.__name__: DistillConfig}
