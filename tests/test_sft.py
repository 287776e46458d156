"""The supervised baseline on a tiny random Llama with the real tokenizer: the loss is next-token cross-entropy
on completion tokens only (checked by hand), the kept set holds only verifier-correct, stopped, distinct
completions, the adapter moves, and the run directory holds what `rlvr eval` and the report read."""

import json
import math
from pathlib import Path

import pytest
import torch
import yaml

from conftest import make_tiny_llama
from rlvr.config import ConfigError, as_config, resolve
from rlvr.training.sft import completion_nll, sft
from rlvr.training.sft_data import sample_budget, take_examples
from rlvr.verifiers.compose import build_reward

EOS = 2  # <|im_end|>: the real tokenizer's eos and the sampler's stop token


def make_stopping_llama(vocab_size: int):
    """A random Llama that ends about half its completions within a few tokens. A plain random model almost
    never samples eos out of 49k tokens, and RFT keeps only completions that stopped. The final norm keeps
    one hidden dimension and eos's (tied) embedding is large along it, so eos wins wherever that is positive."""
    model = make_tiny_llama(vocab_size)
    with torch.no_grad():
        keep = torch.zeros_like(model.model.norm.weight)
        keep[0] = 1.0
        model.model.norm.weight.copy_(keep)
        model.model.embed_tokens.weight[EOS, 0] = 20.0
    return model


def sft_config(tmp_path, **over):
    tmp_path.mkdir(parents=True, exist_ok=True)
    data = tmp_path / "data.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"q{i}", "prompt": f"Say something about {i}.", "answer": "[a-m]"}) + "\n"
            for i in range(40)
        )
    )
    sets = [
        f"output_dir={tmp_path / 'run'}",
        "task.name=jsonl",
        f"task.settings={{path: {data}}}",
        'reward.terms=[{name: first_char, kind: regex, weight: 1.0, pattern: "^\\\\s*(\\\\S)", gold_is_pattern: true}]',
        "reward.workers=0",
        "rollout.group_size=4",
        "rollout.max_new_tokens=8",
        "model.lora.r=4",
        "train.micro_batch_size=3",
        "sft.samples=48",
        "sft.batch_size=4",
        "sft.epochs=2",
        "sft.lr=0.05",
    ]
    return resolve(None, sets + [f"{k}={v}" for k, v in over.items()])


def manual_nll(model, prompt: list[int], completion: list[int]) -> list[float]:
    """-log p of each completion token from one unpadded forward over prompt + completion."""
    full = torch.tensor([prompt + completion])
    logp = model(input_ids=full).logits[0].float().log_softmax(-1)
    return [-float(logp[len(prompt) - 1 + j, tok]) for j, tok in enumerate(completion)]


def test_loss_is_cross_entropy_on_completion_tokens_only(tokenizer):
    model = make_tiny_llama(len(tokenizer)).eval()
    prompts = [[5, 6, 7, 8], [11, 12]]  # the second is left-padded by two
    completions = [[40, 41, EOS], [50]]  # the second is right-padded by two
    ids = torch.tensor([[40, 41, EOS], [50, EOS, EOS]])
    mask = torch.tensor([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0]])
    with torch.no_grad():
        got = completion_nll(model, prompts, ids, mask, pad_id=EOS, num_tokens=4.0)
        per_token = manual_nll(model, prompts[0], completions[0]) + manual_nll(model, prompts[1], completions[1])
        # transformers' own shifted loss with the prompt labelled -100 agrees on the first row
        labels = torch.tensor([[-100] * 4 + completions[0]])
        hf = model(input_ids=torch.tensor([prompts[0] + completions[0]]), labels=labels).loss
        with_prompt = model(
            input_ids=torch.tensor([prompts[0] + completions[0]]), labels=torch.tensor([prompts[0] + completions[0]])
        ).loss
        first = completion_nll(model, prompts[:1], ids[:1], mask[:1], pad_id=EOS, num_tokens=3.0)
    assert len(per_token) == 4
    assert float(got) == pytest.approx(sum(per_token) / 4, rel=1e-5)
    assert float(first) == pytest.approx(float(hf), rel=1e-5)
    assert abs(float(with_prompt) - float(hf)) > 1e-3  # counting prompt tokens would give another number
    # micro-batches normalised by the batch's token count add up to the whole batch's loss
    parts = [
        completion_nll(model, prompts[i : i + 1], ids[i : i + 1], mask[i : i + 1], pad_id=EOS, num_tokens=4.0)
        for i in range(2)
    ]
    assert float(sum(parts)) == pytest.approx(float(got), rel=1e-5)


def test_rejection_sampling_run(tmp_path, tokenizer):
    cfg = sft_config(tmp_path)
    run = sft(cfg, policy=(make_stopping_llama(len(tokenizer)), tokenizer), quiet=True)
    assert run == tmp_path / "run-sft"
    for name in ("config.yaml", "metrics.jsonl", "kept.jsonl", "sft_data.json", "final/adapter", "final/merged"):
        assert (run / name).exists(), name
    assert yaml.safe_load((run / "config.yaml").read_text())["sft"]["samples"] == 48
    stats = json.loads((run / "sft_data.json").read_text())
    assert stats["generated"] == 48 and stats["prompts"] == 12
    assert stats["kept"] + stats["duplicates"] + stats["correct_truncated"] == stats["correct"]
    assert 0 < stats["kept"] < 48
    kept = [json.loads(line) for line in (run / "kept.jsonl").read_text().splitlines()]
    assert len(kept) == stats["kept"]
    # every kept completion is one the verifier marks correct, and none repeats within its problem
    reward = build_reward(as_config(cfg).reward)
    from rlvr.tasks import load_task

    train = {p.id: p for p in load_task("jsonl", **cfg["task"]["settings"]).problems("train")}
    verdicts = reward([k["completion"] for k in kept], [train[k["problem_id"]] for k in kept]).verdicts
    assert {v.status for v in verdicts} == {"correct"}
    keys = [(k["problem_id"], " ".join(k["completion"].split())) for k in kept]
    assert len(set(keys)) == len(keys)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == list(range(2 * math.ceil(stats["kept"] / 4)))
    assert all(r["loss"] > 0 and math.isfinite(r["loss"]) for r in rows)
    assert sum(r["rows"] for r in rows) == 2 * stats["kept"]
    from peft import PeftModel

    saved = PeftModel.from_pretrained(make_tiny_llama(len(tokenizer)), run / "final" / "adapter")
    moved = [n for n, p in saved.named_parameters() if "lora_B" in n and p.abs().max() > 0]
    assert moved


def test_reference_traces_and_budget(tmp_path, tokenizer):
    data = tmp_path / "ref.jsonl"
    data.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"r{i}",
                    "prompt": f"What is {i} + 1?",
                    "answer": str(i + 1),
                    "trace": f"{i} + 1 = {i + 1}. \\boxed{{{i + 1}}}",
                }
            )
            + "\n"
            for i in range(20)
        )
    )
    cfg = sft_config(tmp_path, **{"task.settings": f"{{path: {data}}}", "sft.source": "reference", "sft.epochs": 1})
    run = sft(cfg, policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    kept = [json.loads(line) for line in (run / "kept.jsonl").read_text().splitlines()]
    assert kept and all(k["completion"].endswith(f"\\boxed{{{int(k['prompt'].split()[2]) + 1}}}") for k in kept)
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == math.ceil(len(kept) / 4)
    # budgets: explicit, from the RL config, from a finished RL run's metrics
    assert sample_budget(as_config(sft_config(tmp_path / "b"))) == 48
    assert sample_budget(as_config(sft_config(tmp_path / "c", **{"sft.samples": 0}))) == 20 * 4 * 4
    rl = tmp_path / "rl"
    rl.mkdir()
    (rl / "config.yaml").write_text(yaml.safe_dump({"rollout": {"group_size": 4}}))
    (rl / "metrics.jsonl").write_text(
        "".join(json.dumps({"step": s, "dynamic_sampling/generated_groups": g}) + "\n" for s, g in enumerate([4, 6, 5]))
    )
    assert (
        sample_budget(as_config(sft_config(tmp_path / "d", **{"sft.samples": 0, "sft.match_run": str(rl)}))) == 15 * 4
    )
    with pytest.raises(ConfigError, match="sft.source"):
        sft_config(tmp_path / "e", **{"sft.source": "vibes"})


def test_max_examples_takes_a_seeded_subset_in_the_data_order(tmp_path, tokenizer):
    examples = [{"i": i} for i in range(20)]
    some = take_examples(examples, 6, seed=0)
    assert len(some) == 6 and [e["i"] for e in some] == sorted(e["i"] for e in some)
    assert take_examples(examples, 6, seed=0) == some and take_examples(examples, 6, seed=1) != some
    assert take_examples(examples, 0, seed=0) == examples and take_examples(examples, 50, seed=0) == examples
    # in a run: kept.jsonl and the optimizer steps hold the 6 chosen traces of the 20, and sft_data.json says so
    data = tmp_path / "ref.jsonl"
    data.write_text(
        "".join(
            json.dumps({"id": f"r{i}", "prompt": f"What is {i} + 1?", "answer": str(i + 1), "trace": f"{i + 1}"}) + "\n"
            for i in range(20)
        )
    )
    over = {"task.settings": f"{{path: {data}}}", "sft.source": "reference", "sft.epochs": 1, "sft.max_examples": 6}
    run = sft(sft_config(tmp_path, **over), policy=(make_tiny_llama(len(tokenizer)), tokenizer), quiet=True)
    kept = [json.loads(line) for line in (run / "kept.jsonl").read_text().splitlines()]
    stats = json.loads((run / "sft_data.json").read_text())
    assert len(kept) == stats["examples"] == 6 and stats["examples_available"] > 6  # the train split's traces
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 2  # 6 traces, 4 a step
    with pytest.raises(ConfigError, match="sft.max_examples"):
        sft_config(tmp_path / "bad", **{"sft.max_examples": -1})


def test_sft_resumes_after_kill_9_to_the_same_adapter(tmp_path, tokenizer):
    """`rlvr sft` SIGKILLed at the start of its 4th optimizer step (checkpoint step-2 is the newest), then
    `rlvr sft --resume`: the same metrics (times aside), kept completions and final adapter, bit for bit, as a run
    never interrupted. The resume reads the kept completions back (sampling is not redone)."""
    import os
    import signal
    import subprocess
    import sys

    from safetensors.torch import load_file

    model_dir = tmp_path / "stopping-model"
    make_stopping_llama(len(tokenizer)).save_pretrained(model_dir)
    tokenizer.save_pretrained(model_dir)
    over = {"model.name": str(model_dir), "log.checkpoint_every": 2, "sft.epochs": 3}
    reference = sft(sft_config(tmp_path / "ref", **over), quiet=True)
    cfg = sft_config(tmp_path / "kill", **over)
    config_file = tmp_path / "kill" / "config.yaml"
    config_file.write_text(yaml.safe_dump(cfg))
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "PYTHONPATH": str(root / "src")}

    def child(*extra, sft_signal=None):
        run_env = {**env, **({"RLVR_TEST_SFT_SIGNAL": sft_signal} if sft_signal else {})}
        return subprocess.run(
            [sys.executable, str(root / "tests" / "fault_entry.py"), "sft", str(config_file), "--quiet", *extra],
            env=run_env,
            cwd=root,
            capture_output=True,
            text=True,
            timeout=300,
        )

    p = child(sft_signal="KILL@3")
    assert p.returncode == -signal.SIGKILL, p.stderr[-2000:]
    run = tmp_path / "kill" / "run-sft"
    assert [r["step"] for r in _rows(run)] == [0, 1, 2] and not (run / "final").exists()
    p = child("--resume")
    assert p.returncode == 0, p.stderr[-2000:]
    stable = lambda rows: [{k: v for k, v in r.items() if not k.startswith("time/")} for r in rows]  # noqa: E731
    assert stable(_rows(run)) == stable(_rows(reference)) and len(_rows(run)) > 4
    assert (run / "kept.jsonl").read_text() == (reference / "kept.jsonl").read_text()
    a = load_file(run / "final" / "adapter" / "adapter_model.safetensors")
    b = load_file(reference / "final" / "adapter" / "adapter_model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _rows(run):
    return [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
