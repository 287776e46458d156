"""A TRL GRPOConfig / open-r1 GRPO recipe -> an rlvr config, with every key it could not map and why.

    rlvr convert-config trl RECIPE.yaml > rlvr.yaml      # the report goes to stderr and into the file's header
    rlvr train --from-trl RECIPE.yaml [--set ...]        # the same conversion, then training

What maps (TRL 1.16's names; open-r1 recipes are GRPOConfig plus its model, data and reward keys):
- model: model_name_or_path, dtype / torch_dtype, use_peft, lora_r, lora_alpha, lora_dropout, lora_target_modules;
- sampling: num_generations (G), max_completion_length, temperature, top_p, top_k, use_vllm / vllm_mode and
  vLLM's memory and length settings;
- the algorithm (preset grpo with explicit fields): beta, epsilon, epsilon_high, loss_type (grpo, dapo, bnpo,
  dr_grpo), scale_rewards, importance_sampling_level, mask_truncated_completions, num_iterations;
- the batch: prompts per step = per_device_train_batch_size x gradient_accumulation_steps x num_processes /
  num_generations (one optimizer step, as TRL counts it); per_device_train_batch_size is the micro-batch;
- the schedule: learning_rate, lr_scheduler_type (constant, cosine), warmup_steps / warmup_ratio, max_steps, bf16,
  max_grad_norm, weight_decay, gradient_checkpointing, seed, output_dir, save_steps, save_total_limit, eval_steps;
- the task: dataset_name (+ config, train split, prompt column, system_prompt) -> the hub task, gold in `solution`;
  a local .jsonl file -> the jsonl task;
- rewards: reward_funcs + reward_weights -> reward terms through rlvr's verifiers (accuracy -> math on the final
  answer only, not TRL's whole-reply parse, named in the notes; format /
  tag_count / think_format_reward -> the format term in the <think>/<answer> tags format, which the task then
  asks for; soft_overlong_punishment -> the algorithm's soft overlong shaping).
Keys a recipe leaves out that change what is learned take TRL 1.16's defaults (loss_type dapo, learning_rate 1e-6,
num_generations 8, max_completion_length 512, ...), listed in the report. A shaping weight above rlvr's 10% rule
(open-r1 weighs format like accuracy) is kept as given and reported, with `reward.allow_dominant_shaping: true`
so that rlvr accepts it; it is not silently changed.
"""

from __future__ import annotations

from rlvr.config import DEFAULTS, ConfigError, merge
from rlvr.integrations.conversion import Conversion, read_recipe, render, report
from rlvr.integrations.trl_recipe_fields import refusal
from rlvr.integrations.trl_recipe_keys import (
    DIRECT,
    OPEN_R1_KEYS,
    REWARDS,
    TRL_DEFAULTS,
    UNMAPPED,
)
from rlvr.integrations.trl_recipe_rewards import map_rewards
from rlvr.integrations.trl_recipe_task import map_task
from rlvr.policy.load import EMBEDDED

# the keys rlvr's tables name (older TRL and open-r1 versions read some that TRL 1.16 does not)
KNOWN = frozenset(DIRECT) | frozenset(UNMAPPED) | frozenset(TRL_DEFAULTS) | frozenset(OPEN_R1_KEYS)
# the hub id of each model rlvr embeds -> its embedded name
EMBEDDED_BY_HUB_ID = {hub_id: name for name, (_, _, hub_id) in EMBEDDED.items()}


def convert(recipe: dict) -> Conversion:
    """Map a recipe (the YAML mapping) to an rlvr config; see the module doc. The result merges into rlvr's
    defaults (the config `rlvr train` accepts) or ConfigError names what does not."""
    if not isinstance(recipe, dict):
        raise ConfigError("a TRL / open-r1 recipe is a YAML mapping of GRPOConfig keys")
    conv, open_r1 = Conversion(), [k for k in OPEN_R1_KEYS if k in recipe]
    if open_r1:
        conv.notes.append(f"read as an open-r1 recipe (it has {', '.join(open_r1)})")
    used = sorted(k for k in TRL_DEFAULTS if k not in recipe)
    if used:
        conv.notes.append(
            "TRL 1.16 defaults for keys the recipe leaves out: " + ", ".join(f"{k}={TRL_DEFAULTS[k]}" for k in used)
        )
    r = {**TRL_DEFAULTS, **recipe}
    handled = set()
    for handler in (_model, _batch, _algorithm, _schedule, _sampler, map_task, map_rewards, _logging):
        try:
            handled |= handler(r, conv, bool(open_r1))
        except ConfigError:
            raise
        except (TypeError, ValueError) as e:  # a value of the wrong type for what the key means
            raise ConfigError(f"recipe: a value of the wrong type ({e})") from None
    for key in recipe:
        if key in handled:
            continue
        if key in DIRECT:
            dotted, kind = DIRECT[key]
            conv.set(dotted, _typed(key, recipe[key], kind))
        elif refusal(key, KNOWN):  # a misspelling, mostly: TRL's default would stand in for it without a word
            conv.refused.append((key, refusal(key, KNOWN)))
        else:
            conv.unmapped.append((key, UNMAPPED.get(key, "a TRL / open-r1 key with no rlvr counterpart")))
    for key, (dotted, kind) in DIRECT.items():  # TRL defaults of directly mapped keys
        if key in TRL_DEFAULTS and key not in recipe and key not in handled:
            conv.set(dotted, _typed(key, TRL_DEFAULTS[key], kind))
    merge(DEFAULTS, conv.config)  # refuses any key or value rlvr train would (the registry names set here are rlvr's)
    return conv


def _typed(key: str, value, kind):
    try:
        return kind(value) if kind is not bool else bool(value)
    except (TypeError, ValueError):
        raise ConfigError(f"recipe key {key}: {value!r} is not a {kind.__name__}") from None


def _model(r: dict, conv: Conversion, open_r1: bool) -> set:
    """dtype, LoRA on or off, target modules, the embedded default's note."""
    dtype = r.get("dtype", r.get("torch_dtype"))
    if dtype in ("float32", "bfloat16", "float16"):
        conv.set("model.dtype", dtype)
    elif dtype is not None:
        conv.unmapped.append(
            (
                "dtype" if "dtype" in r else "torch_dtype",
                f"{dtype!r}: rlvr's model.dtype is float32, bfloat16 or float16",
            )
        )
    if "lora_target_modules" in r:
        mods = r["lora_target_modules"]
        conv.set("model.lora.target_modules", mods if isinstance(mods, (str, list)) else str(mods))
    if "use_peft" not in r:
        conv.notes.append(
            "the recipe fine-tunes every weight (TRL's default use_peft: false); rlvr keeps its LoRA "
            "default: set model.lora.enabled=false for a full fine-tune"
            if not any(k.startswith("lora_") for k in r)
            else "lora_* keys given: LoRA on"
        )
    if r.get("model_revision", "main") != "main":
        conv.unmapped.append(("model_revision", "rlvr loads a hub model's main revision"))
    keys = {"dtype", "torch_dtype", "lora_target_modules", "model_revision"}
    embedded = EMBEDDED_BY_HUB_ID.get(str(r.get("model_name_or_path")))
    if embedded:  # the same model without the hub: the converted config runs offline
        conv.set("model.name", embedded)
        conv.notes.append(
            f"model_name_or_path {r['model_name_or_path']} -> model.name {embedded}, rlvr's embedded copy of this "
            "model, which runs offline (a dequantized Q4_1 copy: close to the hub's weights, not the same; "
            f"--set model.name={r['model_name_or_path']} loads the hub's)"
        )
        keys.add("model_name_or_path")
    return keys


def _batch(r: dict, conv: Conversion, open_r1: bool) -> set:
    """Prompts per step and the micro-batch from TRL's batch arithmetic (one optimizer step)."""
    per_device, accum, procs, g = (
        _typed(k, r.get(k, 1), int)
        for k in ("per_device_train_batch_size", "gradient_accumulation_steps", "num_processes", "num_generations")
    )
    completions = per_device * accum * procs
    prompts = max(1, completions // g)
    conv.set("rollout.prompts_per_step", prompts)
    conv.set("train.micro_batch_size", per_device)
    how = (
        f"prompts per step {prompts} = per_device_train_batch_size {per_device} x gradient_accumulation_steps "
        f"{accum} x processes {procs} / num_generations {g}"
    )
    if completions % g:
        how += f" (rounded down from {completions / g:.2f}: TRL needs the product divisible by num_generations)"
    if "num_processes" not in r:
        how += "; one process assumed (the recipe's accelerate launch is not read)"
    conv.notes.append(how)
    for key in ("generation_batch_size", "steps_per_generation"):
        if key in r:
            conv.unmapped.append(
                (key, "rlvr samples one batch per optimizer step (train.updates_per_batch passes over it)")
            )
    return {
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "generation_batch_size",
        "steps_per_generation",
    }


_AGG = {"grpo": "seq-mean-token-mean", "dapo": "token-mean", "bnpo": "token-mean", "dr_grpo": "seq-mean-token-sum-norm"}
_SCALE = {
    True: "group",
    "group": "group",
    "batch": "batch",
    False: "none",
    "none": "none",
    "true": "group",
    "false": "none",
}


def _algorithm(r: dict, conv: Conversion, open_r1: bool) -> set:
    """loss_type, scale_rewards, the ratio level, the clip range, truncated completions -> rlvr's fields."""
    eps = float(r["epsilon"])
    algo = {
        "preset": "grpo",
        "beta": float(r["beta"]),
        "clip_low": eps,
        "clip_high": float(r["epsilon_high"]) if r.get("epsilon_high") is not None else eps,
    }
    loss = r["loss_type"]
    if loss in _AGG:
        algo["agg"] = _AGG[loss]
        if loss == "bnpo":
            conv.notes.append("loss_type bnpo (tokens of the local batch) maps to token-mean over the step's batch")
    else:
        conv.unmapped.append(("loss_type", f"{loss!r} is not one of rlvr's losses ({', '.join(_AGG)} map)"))
    scale = r["scale_rewards"]
    if scale in _SCALE:
        algo["adv_scale"] = _SCALE[scale]
    else:
        conv.unmapped.append(("scale_rewards", f"{scale!r}: rlvr scales by group, batch or none"))
    level = r["importance_sampling_level"]
    if level in ("token", "sequence"):
        algo["ratio"] = level
    else:
        conv.unmapped.append(("importance_sampling_level", f"{level!r}: rlvr's ratio is token or sequence"))
    if r.get("mask_truncated_completions"):
        algo["overlong"] = "filter"
    if r.get("multi_objective_aggregation", "sum_then_normalize") != "sum_then_normalize":
        conv.unmapped.append(("multi_objective_aggregation", "rlvr sums the weighted terms, then normalises"))
    conv.config["algorithm"] = {**conv.config.get("algorithm", {}), **algo}
    return {
        "beta",
        "epsilon",
        "epsilon_high",
        "loss_type",
        "scale_rewards",
        "importance_sampling_level",
        "mask_truncated_completions",
        "multi_objective_aggregation",
    }


def _schedule(r: dict, conv: Conversion, open_r1: bool) -> set:
    """max_steps, the learning-rate schedule and warm-up, bf16 autocast."""
    steps = int(r.get("max_steps", -1))
    if steps > 0:
        conv.set("train.steps", steps)
    elif "max_steps" in r or "num_train_epochs" in r:
        conv.notes.append(f"the recipe runs by epochs: train.steps stays rlvr's {DEFAULTS['train']['steps']}; set it")
    sched = str(getattr(r["lr_scheduler_type"], "value", r["lr_scheduler_type"]))
    if sched in ("constant", "constant_with_warmup", "cosine", "cosine_with_min_lr"):
        conv.set("train.lr_schedule", "cosine" if sched.startswith("cosine") else "constant")
        if sched == "cosine_with_min_lr":
            conv.notes.append("cosine_with_min_lr maps to cosine decaying to 0 (rlvr has no min_lr_rate)")
    else:
        conv.unmapped.append(
            (
                "lr_scheduler_type",
                f"{sched!r}: rlvr's schedules are constant and cosine (after linear warm-up); constant is used",
            )
        )
    ratio = r.get(
        "warmup_ratio",
        r["warmup_steps"] if isinstance(r.get("warmup_steps"), float) and r["warmup_steps"] < 1 else None,
    )
    if ratio is not None and steps > 0:
        conv.set("train.warmup_steps", int(round(float(ratio) * steps)))
    elif ratio is not None:
        conv.unmapped.append(("warmup_ratio", "a warm-up ratio needs max_steps: set train.warmup_steps"))
    elif "warmup_steps" in r:
        conv.set("train.warmup_steps", int(r["warmup_steps"]))
    if "bf16" in r:
        conv.set("train.autocast", "bfloat16" if r["bf16"] else "none")
    return {"max_steps", "lr_scheduler_type", "warmup_ratio", "warmup_steps", "bf16"}


def _sampler(r: dict, conv: Conversion, open_r1: bool) -> set:
    """use_vllm / vllm_mode -> rlvr's vllm (colocated) or remote (vLLM servers) backend."""
    if not r.get("use_vllm"):
        return {"use_vllm", "vllm_mode", "vllm_server_host", "vllm_server_port", "vllm_server_base_url"}
    mode = r.get("vllm_mode", "colocate")
    if mode == "colocate":
        conv.set("rollout.backend", "vllm")
        conv.notes.append(
            "use_vllm (colocate) -> rollout.backend vllm: vLLM on the trainer's GPU (pip install rlvr[vllm])"
        )
    else:
        url = (
            r.get("vllm_server_base_url")
            or f"http://{r.get('vllm_server_host', '0.0.0.0')}:{r.get('vllm_server_port', 8000)}"
        )
        conv.set("rollout.backend", "remote")
        conv.set("rollout.urls", [url])
        conv.notes.append(
            f"vllm_mode server -> rollout.backend remote at {url}: start vLLM's OpenAI server "
            f"(vllm serve MODEL --enable-lora), not trl vllm-serve (docs/scaling.md)"
        )
    return {"use_vllm", "vllm_mode", "vllm_server_host", "vllm_server_port", "vllm_server_base_url"}


def _logging(r: dict, conv: Conversion, open_r1: bool) -> set:
    keys = _report_to(r, conv)
    if "eval_steps" in r and r.get("do_eval", True) and r.get("eval_strategy", "steps") == "steps":
        conv.set("log.eval_every", int(r["eval_steps"]))
        keys.add("eval_steps")
    return keys


def _report_to(r: dict, conv: Conversion) -> set:
    """report_to -> log.report_to for the trackers rlvr has (TensorBoard, MLflow, trackio, W&B); "none" and "all"
    (alone or as a one-item list) as TRL reads them; any other named (comet_ml, ...) reported as not mapped."""
    from rlvr.rundir.trackers import TRACKERS

    if "report_to" not in r:
        return set()
    names = r["report_to"]
    names = [] if names in (None, "none", ["none"]) else ([names] if isinstance(names, str) else list(names))
    known = TRACKERS.names()
    names = list(known) if names == ["all"] else names
    kept = [n for n in names if n in known]
    for other in (n for n in names if n not in known):
        conv.unmapped.append((f"report_to: {other}", f"not one of rlvr's trackers ({', '.join(known)})"))
    if kept:
        conv.set("log.report_to", kept)
    return {"report_to"}


__all__ = ["convert", "Conversion", "read_recipe", "report", "render", "TRL_DEFAULTS", "REWARDS", "UNMAPPED"]
