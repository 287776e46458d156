"""Two real training steps on a tiny random Llama with the real tokenizer: LoRA moves, metrics are complete,
the run directory holds what a user expects, and a resumed run continues exactly."""

import json

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.config import resolve
from rlvr.training.loop import train

METRIC_KEYS = [
    "reward/mean",
    "reward/first_char/mean",
    "groups/nonzero_var_frac",
    "verdict/correct_frac",
    "verdict/wrong_frac",
    "verdict/no_answer_frac",
    "verdict/multiple_answers_frac",
    "verdict/timeout_frac",
    "verdict/invalid_gold_frac",
    "verdict/error_frac",
    "len/mean",
    "len/max",
    "len/truncated_frac",
    "entropy",
    "clip/low_frac",
    "clip/high_frac",
    "grad_norm",
    "lr",
    "time/generate",
    "time/verify",
    "time/train",
    "throughput/gen_tok_s",
    "throughput/train_tok_s",
    "dynamic_sampling/generated_groups",
    "dynamic_sampling/kept_groups",
]


def tiny_config(tmp_path, **over):
    # A regex reward on the first character of the completion: a random model meets it about half the
    # time, so groups have variance and the update has a gradient.
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"q{i}",
                    "prompt": f"Say something about {i}.",
                    "answer": "[a-m]",
                    "band": ["easy", "hard"][i % 2],
                }
            )
            + "\n"
            for i in range(60)
        )
    )
    sets = [
        f"output_dir={tmp_path / 'run'}",
        "task.name=jsonl",
        f"task.settings={{path: {data}}}",
        'reward.terms=[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", gold_is_pattern: true}]',
        "reward.workers=0",
        "rollout.prompts_per_step=2",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "train.steps=2",
        "train.lr=0.05",
        "train.micro_batch_size=4",
        "log.samples_every=1",
        "log.checkpoint_every=1",
        "model.lora.r=4",
        # the dtypes the tests were written with (the class defaults before issue 64's `auto`), whatever this CPU has:
        # `auto` would run bf16 autocast here and float32 on a CPU without bf16, two different tests
        "rollout.dtype=bfloat16",
        "train.autocast=none",
    ]
    return resolve(None, sets + [f"{k}={v}" for k, v in over.items()])


def lora_weights(model):
    return {n: p.detach().clone() for n, p in model.named_parameters() if "lora_" in n}


def test_two_steps_move_lora_and_log_every_metric(tmp_path, tokenizer):
    cfg = tiny_config(tmp_path)
    model = make_tiny_llama(len(tokenizer))
    run = train(cfg, policy=(model, tokenizer), quiet=True)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0, 1]
    for row in rows:
        for key in METRIC_KEYS:
            assert key in row, key
            assert row[key] is not None and row[key] == row[key] and abs(row[key]) != float("inf"), (key, row[key])
        assert 0 < row["reward/mean"] < 1 and row["groups/nonzero_var_frac"] > 0
        assert row["verdict/correct_frac"] + row["verdict/wrong_frac"] + row["verdict/no_answer_frac"] == pytest.approx(
            1.0
        )
        assert 0 < row["len/mean"] <= 8 and row["entropy"] > 0
    # the adapter moved (LoRA B starts at zero, so any change shows a real gradient reached it)
    from peft import PeftModel

    saved = PeftModel.from_pretrained(make_tiny_llama(len(tokenizer)), run / "final" / "adapter")
    moved = [n for n, p in lora_weights(saved).items() if "lora_B" in n and p.abs().max() > 0]
    assert moved
    samples = [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 2 * 8 and {"prompt", "completion", "extracted", "status", "reward"} <= set(samples[0])
    assert (run / "config.yaml").exists() and (run / "checkpoints" / "step-2" / "manifest.json").exists()
    # the merged model loads with plain transformers
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(run / "final" / "merged")
    assert merged.config.num_hidden_layers == 2


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {
            "curriculum": "{kind: adaptive, floor: 0.1}",
            "log.eval_every": 2,
            "log.eval_problems": 4,
            "algorithm": "{preset: dapo}",
        },
    ],
)
def test_resume_continues_exactly(tmp_path, tokenizer, extra):
    full = train(
        tiny_config(tmp_path / "a", **{"train.steps": 3, **extra}),
        policy=(make_tiny_llama(len(tokenizer)), tokenizer),
        quiet=True,
    )
    # the same run stopped after step 1, then resumed to step 3
    cfg = tiny_config(tmp_path / "b", **{"train.steps": 3, **extra})
    cfg_short = json.loads(json.dumps(cfg))
    cfg_short["train"]["steps"] = 1
    train(cfg_short, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    resumed = train(
        cfg, resume=True, allow_config_change=True, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True
    )
    a = [json.loads(x) for x in (full / "metrics.jsonl").read_text().splitlines()]
    b = [json.loads(x) for x in (resumed / "metrics.jsonl").read_text().splitlines()]
    drop = lambda r: {k: v for k, v in r.items() if not k.startswith(("time/", "throughput/"))}  # noqa: E731
    assert [drop(r) for r in a] == [drop(r) for r in b]
    if extra:  # the curriculum's per-band figures and the validation accuracy are logged
        assert "band/easy/share" in a[0] and "val/accuracy" in a[0] and "val/accuracy" in a[2]
    from safetensors.torch import load_file

    wa = load_file(full / "checkpoints" / "step-3" / "trainable.safetensors")
    wb = load_file(resumed / "checkpoints" / "step-3" / "trainable.safetensors")
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)


def test_existing_output_dir_is_refused(tmp_path, tokenizer):
    cfg = tiny_config(tmp_path, **{"train.steps": 1})
    train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    from rlvr.rundir.files import RunDirError

    with pytest.raises(RunDirError, match="exists; pass --resume"):
        train(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
