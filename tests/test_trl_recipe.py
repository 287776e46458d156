"""TRL / open-r1 recipes inside rlvr: `rlvr convert-config trl` and `rlvr train --from-trl` give a config rlvr
accepts, name every key they could not map, and report (not change) a format weight above the 10% rule."""

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import make_tiny_llama
from rlvr.config import DEFAULTS, ConfigError, RewardConfig, merge
from rlvr.integrations.trl_recipe import convert, read_recipe

ROOT = Path(__file__).resolve().parent.parent

# open-r1's recipes/Qwen2.5-Math-7B/grpo/config_simple_rl.yaml, abridged (its keys, its values)
OPEN_R1 = """\
model_revision: main
torch_dtype: bfloat16
attn_implementation: flash_attention_2
dataset_name: DigitalLearningGmbH/MATH-lighteval
dataset_config: default
system_prompt: |-
  You are a helpful math assistant. Put your step-by-step reasoning inside <think> tags.
model_name_or_path: aidando73/Qwen-2.5-7B-Simple-RL-v2
hub_model_id: Qwen-2.5-7B-Simple-RL-v4
output_dir: data/Qwen-2.5-7B-Simple-RL-v4
wandb_project: open-r1-math-rl
learning_rate: 1.5e-06
reward_weights: [1.0, 0.5]
reward_funcs: [accuracy, format]
bf16: true
use_vllm: true
vllm_device: auto
vllm_gpu_memory_utilization: 0.7
do_eval: true
eval_strategy: steps
eval_steps: 100
gradient_accumulation_steps: 8
gradient_checkpointing: true
gradient_checkpointing_kwargs: {use_reentrant: false}
logging_steps: 5
lr_scheduler_type: cosine
max_prompt_length: 650
max_completion_length: 1024
max_steps: -1
num_generations: 7
num_train_epochs: 1
per_device_train_batch_size: 16
push_to_hub: true
report_to: [wandb]
seed: 42
warmup_ratio: 0.1
"""

# a TRL GRPOConfig (+ TRL's ModelConfig and script keys) as `trl grpo --config` reads it
TRL = """\
model_name_or_path: HuggingFaceTB/SmolLM2-135M-Instruct
output_dir: runs/from-trl
learning_rate: 3.0e-6
lr_scheduler_type: cosine
warmup_ratio: 0.1
max_steps: 30
beta: 0.04
epsilon: 0.2
epsilon_high: 0.28
loss_type: dr_grpo
scale_rewards: false
importance_sampling_level: sequence
num_iterations: 2
num_generations: 4
max_completion_length: 64
temperature: 0.7
top_p: 0.95
per_device_train_batch_size: 8
gradient_accumulation_steps: 2
mask_truncated_completions: true
use_peft: true
lora_r: 8
lora_alpha: 16
lora_target_modules: [q_proj, v_proj]
reward_funcs: [think_format_reward, accuracy_reward, get_soft_overlong_punishment, my_pkg.rewards.brevity]
reward_weights: [0.05, 1.0, 1.0, 0.2]
use_vllm: true
vllm_mode: server
vllm_server_host: 10.0.0.5
delta: 1.5
save_steps: 10
bf16: false
"""


def unmapped(conv) -> dict:
    return dict(conv.unmapped)


def test_open_r1_recipe(tmp_path):
    conv = convert(yaml.safe_load(OPEN_R1))
    cfg = merge(DEFAULTS, conv.config)  # what rlvr train accepts
    assert cfg["model"]["name"] == "aidando73/Qwen-2.5-7B-Simple-RL-v2" and cfg["model"]["dtype"] == "bfloat16"
    assert (cfg["rollout"]["group_size"], cfg["rollout"]["max_new_tokens"], cfg["rollout"]["prompts_per_step"]) == (
        7,
        1024,
        18,
    )
    assert (
        cfg["train"]["lr"] == 1.5e-6
        and cfg["train"]["lr_schedule"] == "cosine"
        and cfg["train"]["autocast"] == "bfloat16"
    )
    assert cfg["algorithm"] == {
        "preset": "grpo",
        "beta": 0.0,
        "clip_low": 0.2,
        "clip_high": 0.2,
        "agg": "token-mean",
        "adv_scale": "group",
        "ratio": "token",
    }  # TRL 1.16 defaults: loss_type dapo
    assert cfg["task"]["name"] == "hub" and cfg["task"]["settings"]["prompt_field"] == "problem"
    assert cfg["task"]["settings"]["answer_format"] == "tags" and cfg["task"]["settings"]["config"] == "default"
    # the format weight is kept and reported, never silently lowered
    assert [(t["name"], t["kind"], t["weight"]) for t in cfg["reward"]["terms"]] == [
        ("accuracy", "math", 1.0),
        ("format", "boxed_format", 0.5),
    ]
    assert cfg["reward"]["allow_dominant_shaping"] is True
    assert any("SHAPING RULE: format weight 0.5 is 50% of accuracy's 1" in n for n in conv.notes)
    why = unmapped(conv)
    for key in (
        "attn_implementation",
        "hub_model_id",
        "wandb_project",
        "max_prompt_length",
        "num_train_epochs",
        "push_to_hub",
        "vllm_device",
        "gradient_checkpointing_kwargs",
        "warmup_ratio",
        "do_eval",
    ):
        assert key in why and why[key], key
    assert "report_to" not in why and cfg["log"]["report_to"] == ["wandb"]  # report_to: [wandb] -> log.report_to
    from rlvr.algorithms import algorithm_from_config
    from rlvr.verifiers.compose import build_reward

    algorithm_from_config(cfg["algorithm"])
    reward = build_reward(RewardConfig(**cfg["reward"]), cfg["task"]["settings"]["answer_format"])
    assert [t.verifier.answer_format for t in reward.terms] == ["tags", "tags"]


def test_trl_grpo_config_recipe():
    conv = convert(yaml.safe_load(TRL))
    cfg = merge(DEFAULTS, conv.config)
    assert cfg["algorithm"] == {
        "preset": "grpo",
        "beta": 0.04,
        "clip_low": 0.2,
        "clip_high": 0.28,
        "agg": "seq-mean-token-sum-norm",
        "adv_scale": "none",
        "ratio": "sequence",
        "overlong": "soft",
        "overlong_buffer_frac": 0.2,
    }  # TRL's CLI: 256 of 1280 tokens
    assert "soft) is kept" in unmapped(conv)["mask_truncated_completions"]  # rlvr has filter or soft, not both
    assert cfg["train"]["steps"] == 30 and cfg["train"]["warmup_steps"] == 3 and cfg["train"]["updates_per_batch"] == 2
    assert cfg["train"]["autocast"] == "none" and cfg["train"]["lr"] == 3e-6 and cfg["log"]["checkpoint_every"] == 10
    assert (cfg["rollout"]["prompts_per_step"], cfg["rollout"]["group_size"], cfg["rollout"]["temperature"]) == (
        4,
        4,
        0.7,
    )
    assert cfg["rollout"]["backend"] == "remote" and cfg["rollout"]["urls"] == ["http://10.0.0.5:8000"]
    assert cfg["model"]["lora"] == {
        "enabled": True,
        "r": 8,
        "alpha": 16,
        "dropout": 0.0,
        "target_modules": ["q_proj", "v_proj"],
    }
    terms = [(t["name"], t["kind"], t["weight"]) for t in cfg["reward"]["terms"]]
    # correctness first (kinds that grade the gold, in the recipe's order); the recipe's own function runs as it is
    assert terms == [("accuracy", "math", 1.0), ("brevity", "trl_reward", 0.2), ("think_format", "boxed_format", 0.05)]
    assert cfg["reward"]["terms"][1]["func"] == "my_pkg.rewards:brevity"  # TRL's dotted path, in rlvr's form
    assert cfg["reward"]["allow_dominant_shaping"] is True  # brevity's 0.2 is reported: 20% of accuracy's 1
    assert any(n.startswith("SHAPING RULE: brevity weight 0.2 is 20%") for n in conv.notes)
    why = unmapped(conv)
    assert "delta" in why and not conv.refused
    assert cfg["model"]["name"] == "smollm2-135m-instruct"


class ExactGrader:
    """A plug-in verifier kind (test_trl_recipe:ExactGrader) that grades against the gold, as math does."""

    grades = "answer"

    def score(self, completion, problem):
        raise NotImplementedError  # never scored here: the converter only orders the terms


def test_the_correctness_term_is_the_one_whose_kind_grades_the_answer():
    """Correctness first by the kind's entry (`grades`), a plug-in kind as math: no kind name is tested."""
    from rlvr.integrations.conversion import Conversion
    from rlvr.integrations.trl_recipe_rewards import _reward_terms

    conv = Conversion()
    fmt = {"name": "format", "kind": "boxed_format", "weight": 0.1}
    _reward_terms([fmt, {"name": "mine", "kind": "test_trl_recipe:ExactGrader", "weight": 1.0}], conv)
    assert [t["name"] for t in conv.config["reward"]["terms"]] == ["mine", "format"]
    assert not any("no correctness reward" in n for n in conv.notes)
    conv = Conversion()
    _reward_terms([dict(fmt)], conv)  # shaping alone: said, and kept first as the only term
    assert "no correctness reward among reward_funcs: rlvr treats 'format' as the correctness term" in conv.notes


def test_soft_overlong_replaces_a_shaping_that_masks_truncated_rows_by_its_entry():
    """mask_truncated_completions then soft_overlong_punishment: the soft shaping is kept and the mask reported,
    for any algorithm.overlong whose entry masks truncated rows (test_advantages:MASKING, a plug-in, too)."""
    from rlvr.integrations.conversion import Conversion
    from rlvr.integrations.trl_recipe_rewards import _overlong

    for before, reported in (("filter", True), ("test_advantages:MASKING", True), ("none", False)):
        conv = Conversion(config={"algorithm": {"overlong": before}})
        _overlong({}, conv, "soft_overlong_punishment")
        assert conv.config["algorithm"] == {"overlong": "soft", "overlong_buffer_frac": 0.25}  # 4096 of 16384
        assert ("mask_truncated_completions" in unmapped(conv)) is reported


def test_bad_recipes_are_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="2 reward_funcs but 1 reward_weights"):
        convert({"reward_funcs": ["accuracy", "format"], "reward_weights": [1.0]})
    with pytest.raises(ConfigError, match="not a int"):
        convert({"num_generations": "many"})
    (tmp_path / "r.yaml").write_text("- a list\n")
    with pytest.raises(ConfigError, match="expected a mapping"):
        read_recipe(str(tmp_path / "r.yaml"))


def run_cli(*argv, cwd=None):
    return subprocess.run(
        [sys.executable, "-c", "import sys; from rlvr.cli import main; sys.exit(main())", *argv],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=cwd,
        env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin", "HOME": str(Path.home()), "HF_HUB_OFFLINE": "1"},
    )


def test_convert_config_cli_and_train_from_trl(tmp_path, tokenizer):
    """The CLI writes a config `rlvr train` takes; `rlvr train --from-trl` trains from the recipe itself (here with
    the model, task and sizes overridden to a tiny local model, as a user would for a smoke test). The recipe's
    LoRA on q_proj and v_proj only is what TRL recipes often use; rlvr's prompt-once backward used to fail on it."""
    recipe = tmp_path / "recipe.yaml"
    recipe.write_text(OPEN_R1)
    out = run_cli("convert-config", "trl", str(recipe))
    assert out.returncode == 0, out.stderr
    assert "not mapped: hub_model_id" in out.stderr and "SHAPING RULE" in out.stderr
    converted = yaml.safe_load(out.stdout)
    assert converted["reward"]["terms"][1]["weight"] == 0.5
    assert out.stdout.startswith("# rlvr convert-config:")
    (tmp_path / "rlvr.yaml").write_text(out.stdout)
    from rlvr.config import resolve

    assert resolve(str(tmp_path / "rlvr.yaml"))["rollout"]["group_size"] == 7  # the file loads as an rlvr config

    model_dir = tmp_path / "tiny"
    make_tiny_llama(len(tokenizer)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(json.dumps({"prompt": f"What is {i} + 1?", "answer": str(i + 1)}) + "\n" for i in range(40))
    )
    run_dir = tmp_path / "run"
    trl = tmp_path / "trl.yaml"
    trl.write_text(TRL)
    (tmp_path / "my_pkg").mkdir()  # the recipe's own reward function, imported from the working folder as TRL does
    (tmp_path / "my_pkg" / "__init__.py").write_text("")
    (tmp_path / "my_pkg" / "rewards.py").write_text(
        "def brevity(completions, **kwargs):\n    return [1.0 / (1 + len(c[-1]['content'])) for c in completions]\n"
    )
    out = run_cli(
        "train",
        "--from-trl",
        str(trl),
        "--output-dir",
        str(run_dir),
        "--set",
        f"model.name={model_dir}",
        "--set",
        "task.name=jsonl",
        "--set",
        f"task.settings={{path: {data}}}",
        "--set",
        "train.steps=1",
        "--set",
        "rollout.backend=hf",
        "--set",
        "rollout.max_new_tokens=8",
        "--set",
        "rollout.prompts_per_step=2",
        "--set",
        "reward.workers=0",
        "--set",
        "train.warmup_steps=0",
        cwd=tmp_path,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert "not mapped: delta" in out.stderr
    saved = yaml.safe_load((run_dir / "config.yaml").read_text())
    assert saved["algorithm"]["ratio"] == "sequence" and saved["rollout"]["group_size"] == 4
    assert (run_dir / "final" / "adapter" / "adapter_config.json").exists()
    (row,) = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines()]
    assert row["reward/brevity/mean"] > 0  # the recipe's own function scored every completion (1 / (1 + length))


def test_a_local_jsonl_dataset_maps_to_the_jsonl_task(tmp_path, monkeypatch):
    """Issue 64: `dataset_name: data/train.jsonl` became the hub task, which sent the path to the hub (~25 s of
    retries, a ConnectionError). A local file is the jsonl task's; another kind of local file is one line."""
    monkeypatch.chdir(tmp_path)
    conv = convert({"dataset_name": "data/train.jsonl", "system_prompt": "Think first.", "dataset_config": "main"})
    assert conv.config["task"] == {
        "name": "jsonl",
        "settings": {"path": "data/train.jsonl", "system_prompt": "Think first.", "answer_format": "tags"},
    }  # system_prompt: an open-r1 recipe, whose default rewards ask for the <think>/<answer> format
    assert unmapped(conv)["dataset_config"] == "a local file has no configs and is read whole"
    assert (
        "dataset data/train.jsonl is a local file -> task jsonl (prompt column prompt or problem or question, gold "
        "column the first of answer, gold, solution, ground_truth, final_answer; train / validation / held-out split "
        "by id hash; task.settings.demo: auto, a solved problem shown first where the start model answers better with "
        "it; none shows the rows as TRL does)"
    ) in conv.notes
    conv = convert({"dataset_name": "data/train.jsonl", "dataset_prompt_column": "question"})  # open-r1's key
    assert "dataset_prompt_column" not in unmapped(conv) and "prompt_field" not in conv.config["task"]["settings"]
    conv = convert({"dataset_name": "data/train.jsonl", "dataset_prompt_column": "input"})  # a column of its own
    assert conv.config["task"]["settings"]["prompt_field"] == "input"
    Path("rows.json").write_text("[]")
    with pytest.raises(ConfigError) as e:
        convert({"dataset_name": "rows.json"})
    assert str(e.value) == (
        "recipe key dataset_name: 'rows.json' is a local file that is not JSON lines; rlvr reads local data with the "
        "jsonl task: write the rows as .jsonl (one object a line), or give a hub id"
    )
    Path("folder").mkdir()  # a dataset folder is datasets' to read: the hub task, as before
    assert convert({"dataset_name": "folder"}).config["task"]["name"] == "hub"
    assert convert({"dataset_name": "org/set"}).config["task"]["settings"]["dataset"] == "org/set"


def test_a_recipes_own_reward_function_becomes_a_trl_reward_term():
    """Issue 64: `reward_funcs: [my_rewards:my_reward]` was "not mapped ... register a verifier kind", while kind
    trl_reward runs such a function as it is. rlvr's `package.module:attr` and TRL's dotted path both map."""
    conv = convert({"reward_funcs": ["my_rewards:my_reward", "accuracy_reward"], "reward_weights": [1.0, 0.05]})
    assert conv.config["reward"]["terms"] == [
        {"name": "my_reward", "kind": "trl_reward", "func": "my_rewards:my_reward", "weight": 1.0},
        {"name": "accuracy", "kind": "math", "weight": 0.05},
    ]
    assert not [k for k in unmapped(conv) if k.startswith("reward_funcs")] and not conv.refused
    assert (
        "reward_funcs: my_rewards:my_reward -> term 'my_reward' of kind trl_reward (func: my_rewards:my_reward), the "
        "recipe's own function called as TRL calls it; its module must import where rlvr runs (its folder on "
        "PYTHONPATH)"
    ) in conv.notes
    terms = convert({"reward_funcs": ["lib.rewards.brevity", "other.brevity"]}).config["reward"]["terms"]
    assert [(t["name"], t["func"]) for t in terms] == [
        ("brevity", "lib.rewards:brevity"),
        ("other:brevity", "other:brevity"),
    ]
    assert unmapped(convert({"reward_funcs": ["my_reward"]}))["reward_funcs: my_reward"] == (
        "not a reward function rlvr knows from TRL or open-r1, nor an import path "
        "(package.module:attr, or TRL's package.module.attr)"
    )


def test_the_embedded_models_hub_id_becomes_its_embedded_name():
    """The note said the embedded copy works offline and the config still named the hub id (which needs the hub)."""
    conv = convert({"model_name_or_path": "HuggingFaceTB/SmolLM2-135M-Instruct"})
    assert conv.config["model"]["name"] == "smollm2-135m-instruct"
    assert (
        "model_name_or_path HuggingFaceTB/SmolLM2-135M-Instruct -> model.name smollm2-135m-instruct, rlvr's embedded "
        "copy of this model, which runs offline (a dequantized Q4_1 copy: close to the hub's weights, not the same; "
        "--set model.name=HuggingFaceTB/SmolLM2-135M-Instruct loads the hub's)"
    ) in conv.notes
    assert convert({"model_name_or_path": "Qwen/Qwen2.5-0.5B"}).config["model"]["name"] == "Qwen/Qwen2.5-0.5B"


REFUSED = (
    "lerning_rate: not a key of TRL's GRPOConfig, ModelConfig or script arguments, open-r1's or accelerate launch's, "
    "so TRL would refuse the recipe; did you mean learning_rate?"
)


def test_a_key_trl_would_refuse_is_said_and_stops_from_trl(tmp_path, monkeypatch, capsys):
    """A misspelled key was a "not mapped" line and exit 0 while TRL's default trained in its place. TRL parses a
    recipe into its dataclasses and refuses a key none of them has: convert-config says so, --from-trl stops."""
    from rlvr.cli import main

    conv = convert({"lerning_rate": 1e-5, "torch_empty_cache_steps": 10, "report_to": ["none"]})
    assert conv.refused == [(REFUSED.split(": ", 1)[0], REFUSED.split(": ", 1)[1])]
    assert conv.config["train"]["lr"] == 1e-6  # TRL's default, as TRL would not have run at all
    # a key TRL reads and rlvr has no counterpart for is still "not mapped"; report_to [none] is TRL's "no tracker"
    assert unmapped(conv) == {
        "torch_empty_cache_steps": "a TRL / open-r1 key with no rlvr counterpart",
        "lr_scheduler_type": "'linear': rlvr's schedules are constant and cosine (after linear warm-up); constant is used",
    }
    assert "log" not in conv.config
    assert convert({"zzzz": 1}).refused[0][1].endswith("so TRL would refuse the recipe")  # nothing close: no guess
    monkeypatch.chdir(tmp_path)
    Path("r.yaml").write_text("lerning_rate: 1.0e-5\nmax_steps: 2\n")
    assert main(["convert-config", "trl", "r.yaml"]) == 0
    out, err = capsys.readouterr()
    assert f"  refused by TRL: {REFUSED}" in err.splitlines() and f"#   refused by TRL: {REFUSED}" in out.splitlines()
    assert main(["train", "--from-trl", "r.yaml", "--output-dir", "run"]) == 2
    assert capsys.readouterr().err == f"rlvr train: recipe r.yaml: {REFUSED}\n"
    assert not Path("run").exists()


@pytest.mark.parametrize("value", ["none", ["none"], None])
def test_report_to_none_is_trls_no_tracker(value):
    """`report_to: [none]` (a list, as TRL's CLI writes it) was listed as a tracker rlvr lacks."""
    conv = convert({"report_to": value, "lr_scheduler_type": "constant"})
    assert conv.unmapped == [] and "log" not in conv.config
