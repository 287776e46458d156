"""`rlvr eval` on a run's checkpoints and on PEFT adapter folders: a checkpoint is the run's model at that step,
built as the trainer built it, so the last checkpoint gives the run's final merged weights exactly (bf16-stored base
included); an adapter folder is merged into the base model its adapter_config.json names."""

import argparse
import json

import pytest
import torch
from safetensors.torch import load_file

from rlvr.config import DEFAULTS, resolve
from rlvr.evaluation.models import adapter_policy, checkpoint_policy, is_adapter_dir, is_checkpoint_dir, run_config
from rlvr.evaluation.run_eval import EvalSettings, evaluate_model
from rlvr.training.loop import train

REWARD = {
    "terms": [{"name": "first_char", "kind": "regex", "weight": 1.0, "pattern": "^\\s*(\\S)", "gold_is_pattern": True}],
    "workers": 0,
}


@pytest.fixture(scope="module")
def run(tmp_path_factory, model_dir):
    """Three steps of LoRA under bf16 autocast (the trainer stores the frozen base in bf16), a checkpoint each step."""
    tmp = tmp_path_factory.mktemp("ckpt-run")
    data = tmp / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"Say something about {i}.", "answer": "[a-m]", "band": "ab"[i % 2]})
            + "\n"
            for i in range(40)
        )
    )
    cfg = resolve(
        None,
        [
            f"output_dir={tmp / 'run'}",
            f"model.name={model_dir}",
            "model.lora.r=4",
            "task.name=jsonl",
            "rollout.prompts_per_step=2",
            "rollout.group_size=4",
            "rollout.max_new_tokens=4",
            "train.steps=3",
            "train.lr=0.05",
            "train.micro_batch_size=4",
            "train.autocast=bfloat16",
            "log.checkpoint_every=1",
            "log.keep_checkpoints=0",
            "log.eval_every=0",
        ],
    )
    cfg["task"]["settings"] = {"path": str(data)}
    cfg["reward"] = REWARD
    train(cfg, quiet=True)
    return tmp / "run"


def final_merged(run):
    return load_file(run / "final" / "merged" / "model.safetensors")


def test_last_checkpoint_is_the_final_model_exactly(run):
    ckpts = sorted((run / "checkpoints").iterdir())
    assert len(ckpts) == 3 and all(is_checkpoint_dir(c) for c in ckpts) and not is_checkpoint_dir(run)
    final = final_merged(run)
    last = checkpoint_policy(ckpts[-1], run_config(ckpts[-1]))[0].state_dict()
    assert final.keys() <= last.keys()
    for name, value in final.items():
        assert torch.equal(last[name], value), name
    first = checkpoint_policy(ckpts[0], run_config(ckpts[0]))[0].state_dict()
    moved = [n for n, v in final.items() if not torch.equal(first[n], v)]
    assert moved and all("proj" in n for n in moved)  # only the LoRA-wrapped linears change between steps


def test_checkpoint_is_evaluated_with_the_runs_task_and_reward(run, capsys):
    from rlvr.cli import eval as eval_verb

    ckpt = sorted((run / "checkpoints").iterdir())[0]
    records, summary = evaluate_model(
        ckpt,
        None,
        EvalSettings(
            split="train",
            n=1,
            ks=(1,),
            max_new_tokens=4,
            greedy=True,
            progress=False,
            n_boot=20,
            limit=4,
            allow_contaminated=True,
        ),
    )
    # the run's reward: the partial section given to train(), which records it completed from the defaults
    assert summary["setup"]["reward"] == {**DEFAULTS["reward"], **REWARD} and summary["setup"]["task"] == "jsonl"
    assert len(records) == 8 and {r.band for r in records} == {"a", "b"}
    parser = argparse.ArgumentParser()
    eval_verb.add_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(
        [
            "eval",
            "--model",
            str(ckpt),
            "--split",
            "train",
            "--allow-contaminated",
            "--n",
            "1",
            "--k",
            "1",
            "--max-new-tokens",
            "4",
            "--limit",
            "2",
            "--quiet",
        ]
    )
    assert eval_verb.run(args) == 0
    assert (run / "eval" / f"{ckpt.name}-train" / "records.jsonl").exists()  # beside the run's other evaluations


def test_adapter_folder_is_merged_into_the_base_it_names(run, model_dir):
    adapter = run / "final" / "adapter"
    assert is_adapter_dir(adapter) and not is_adapter_dir(run / "final" / "merged")
    assert json.loads((adapter / "adapter_config.json").read_text())["base_model_name_or_path"] == str(model_dir)
    merged = adapter_policy(adapter)[0].state_dict()
    base = load_file(model_dir / "model.safetensors")
    final = final_merged(run)
    for name, value in final.items():
        if "proj" in name:  # the LoRA delta on the float32 base, where the run's final/ adds it to a bf16-stored one
            delta = merged[name] - base[name]
            assert delta.abs().max() > 0
            assert torch.allclose(merged[name], value, atol=2e-2 * value.abs().max().item()), name
        else:
            assert torch.equal(merged[name], value), name
