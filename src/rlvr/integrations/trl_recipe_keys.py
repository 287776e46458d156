"""The tables behind rlvr.integrations.trl_recipe, as data: TRL's defaults for keys a recipe leaves out, the keys
copied as they are, the keys with no rlvr counterpart and why, and the reward functions rlvr maps (or cannot)."""

from __future__ import annotations

# What TRL 1.16 uses for a key the recipe leaves out, for the keys that change what is learned.
TRL_DEFAULTS = {
    "learning_rate": 1e-6,
    "beta": 0.0,
    "epsilon": 0.2,
    "loss_type": "dapo",
    "scale_rewards": "group",
    "importance_sampling_level": "token",
    "num_iterations": 1,
    "num_generations": 8,
    "max_completion_length": 512,
    "temperature": 1.0,
    "per_device_train_batch_size": 8,
    "gradient_accumulation_steps": 1,
    "lr_scheduler_type": "linear",
}
# open-r1's GRPOScriptArguments default when a recipe names no reward functions
OPEN_R1_REWARDS = ["accuracy", "format", "tag_count"]
OPEN_R1_KEYS = (
    "system_prompt",
    "dataset_prompt_column",
    "dataset_configs",
    "num_processes",
    "vllm_device",
    "callbacks",
    "benchmarks",
    "hub_model_revision",
    "code_language",
    "e2b_router_url",
)

# recipe key -> (rlvr key, type): copied as they are
DIRECT = {
    "model_name_or_path": ("model.name", str),
    "num_generations": ("rollout.group_size", int),
    "max_completion_length": ("rollout.max_new_tokens", int),
    "temperature": ("rollout.temperature", float),
    "top_p": ("rollout.top_p", float),
    "top_k": ("rollout.top_k", int),
    "learning_rate": ("train.lr", float),
    "num_iterations": ("train.updates_per_batch", int),
    "max_grad_norm": ("train.max_grad_norm", float),
    "weight_decay": ("train.weight_decay", float),
    "gradient_checkpointing": ("train.gradient_checkpointing", bool),
    "seed": ("seed", int),
    "output_dir": ("output_dir", str),
    "lora_r": ("model.lora.r", int),
    "lora_alpha": ("model.lora.alpha", int),
    "lora_dropout": ("model.lora.dropout", float),
    "save_steps": ("log.checkpoint_every", int),
    "save_total_limit": ("log.keep_checkpoints", int),
    "beta": ("algorithm.beta", float),
    "vllm_gpu_memory_utilization": ("rollout.vllm.gpu_memory_utilization", float),
    "vllm_max_model_length": ("rollout.vllm.max_model_len", int),
    "use_peft": ("model.lora.enabled", bool),
}

_REPORTING = (
    "reporting or hub upload: rlvr writes metrics.jsonl, samples.jsonl and a model card in final/, and uploads nothing"
)
_LAUNCH = "launcher or hardware setting: rlvr runs one process per rank (torchrun; train.fsdp shards)"
_EVAL = (
    "TRL's eval loop: rlvr measures greedy validation accuracy every log.eval_every steps and evaluates with rlvr eval"
)
# recipe key -> why it has no rlvr counterpart
UNMAPPED = {
    **dict.fromkeys(
        (
            "hub_model_id",
            "hub_strategy",
            "push_to_hub",
            "hub_model_revision",
            "run_name",
            "wandb_entity",
            "wandb_project",
            "wandb_run_group",
            "wandb_log_unique_prompts",
            "logging_dir",
            "log_level",
            "logging_first_step",
            "logging_strategy",
            "log_completions",
            "num_completions_to_print",
            "log_completions_hub_repo",
            "log_unique_prompts",
            "callbacks",
            "save_strategy",
            "logging_steps",
        ),
        _REPORTING,
    ),
    **dict.fromkeys(
        (
            "num_processes",
            "deepspeed",
            "ddp_timeout",
            "ddp_find_unused_parameters",
            "use_liger_kernel",
            "use_liger_loss",
            "torch_compile",
            "dataloader_num_workers",
            "ds3_gather_for_generation",
            "vllm_device",
            "vllm_tensor_parallel_size",
            "vllm_enable_sleep_mode",
            "vllm_model_impl",
            "use_cpu",
            "tf32",
            "model_init_kwargs",
            "trust_remote_code",
            "vllm_server_timeout",
            "vllm_group_port",
        ),
        _LAUNCH,
    ),
    "attn_implementation": "train.attention picks rlvr's CPU kernel or the model's own (sdpa); flash-attention is not a choice",
    "gradient_checkpointing_kwargs": "rlvr's train.gradient_checkpointing takes no options (non-reentrant)",
    "fp16": "rlvr's autocast is bfloat16 or none (train.autocast)",
    **dict.fromkeys(
        (
            "do_eval",
            "eval_strategy",
            "per_device_eval_batch_size",
            "num_generations_eval",
            "dataset_test_split",
            "benchmarks",
            "eval_on_start",
        ),
        _EVAL,
    ),
    "max_prompt_length": "rlvr does not truncate prompts (a task's prompts are short by construction)",
    "num_train_epochs": "rlvr counts optimizer steps (train.steps); an epoch is the train split's size / prompts per step",
    "overwrite_output_dir": "rlvr refuses an existing run directory unless you pass --overwrite",
    "resume_from_checkpoint": "rlvr train --resume RUN_DIR continues a run from its newest complete checkpoint",
    "chat_template": "rlvr prompts through the tokenizer's own chat template (and saves the training prompt with the model)",
    "shuffle_dataset": "rlvr's seeded prompt stream decides the order (uniform, or by curriculum)",
    "generation_kwargs": "rlvr's samplers take temperature, top_p and top_k",
    "repetition_penalty": "not in rlvr's samplers",
    "min_p": "not in rlvr's samplers",
    "delta": "two-sided clipping (delta) is not one of rlvr's losses",
    "top_entropy_quantile": "entropy-masked tokens are not one of rlvr's losses",
    "sync_ref_model": "rlvr's KL reference is the base model (the adapter switched off); it is never synced",
    "ref_model_mixup_alpha": "rlvr's reference is never synced",
    "ref_model_sync_steps": "rlvr's reference is never synced",
    "reward_model_name_or_path": "a learned reward model: rlvr rewards only with verifiers",
    "lr_scheduler_kwargs": "rlvr's cosine decays to 0 (no min_lr_rate)",
    "disable_dropout": "rlvr's LoRA dropout is model.lora.dropout",
    "cache_implementation": "rlvr's samplers manage their own caches",
    "max_completion_len": "used only by soft_overlong_punishment",
    "soft_punish_cache": "used only by soft_overlong_punishment",
}


_TAGS = {"kind": "boxed_format", "answer_format": "tags"}
# a recipe's reward function -> (rlvr term name, term settings, a note or "")
# TRL's accuracy reward runs math-verify over the whole reply, so it pays any number in the text: a truncated reply
# with no answer that repeats a number from the question scores correct. rlvr's grader reads only the final answer
# (the box, or the <answer> tag in the tags format): the conversion takes the safe grader and says so.
_ACCURACY = (
    "accuracy -> rlvr's math grader, which reads only the final answer (the box, or the <answer> tag): "
    "TRL's accuracy reward parses the whole reply and pays any number in it (a truncated reply that repeats a "
    "number from the question scores correct there, no_answer here); set require_boxed: false on the "
    "accuracy term for TRL's behaviour"
)
REWARDS = {
    "accuracy": ("accuracy", {"kind": "math"}, _ACCURACY),
    "accuracy_reward": ("accuracy", {"kind": "math"}, _ACCURACY),
    "reasoning_accuracy_reward": (
        "accuracy",
        {"kind": "math"},
        "reasoning_accuracy_reward -> math on the <answer> tag (the reasoning is not read)",
    ),
    "format": (
        "format",
        _TAGS,
        "format -> one <think> block then one <answer> tag (rlvr does not require open-r1's newlines)",
    ),
    "tag_count": (
        "tag_count",
        _TAGS,
        "tag_count (0.25 per well-placed tag) -> 0 or 1 for the whole <think>/<answer> format",
    ),
    "think_format_reward": (
        "think_format",
        _TAGS,
        "think_format_reward -> rlvr's tags format, which also wants the <answer> tag",
    ),
}
OVERLONG = ("soft_overlong_punishment", "get_soft_overlong_punishment")
_CODE = (
    "open-r1's code rewards run tests in E2B / Morph sandboxes from `verification_info`; rlvr's python_tests / "
    "stdio verifiers read `tests` in rlvr's sandbox: convert the data, then add such a term"
)
REWARDS_UNMAPPED = {
    "reasoning_steps": "rewards step-by-step wording, not correctness: no rlvr verifier",
    "cosine": "length-scaled accuracy: rlvr keeps correctness binary (see algorithm.overlong for length shaping)",
    "repetition_penalty": "an n-gram repetition penalty: no rlvr verifier",
    "length": "Kimi's length reward: no rlvr verifier",
    **dict.fromkeys(("code", "binary_code", "ioi_code", "cf_code", "code_format"), _CODE),
}
