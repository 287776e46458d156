"""A distillation teacher handed over half-made (rlvr.training.teacher.resolve_teacher): each form refused through
`rlvr train` in one line naming what it lacks, exit 2, before any model loads: no run directory, nothing converted
into the cache. The folders are the tiny random Llama's (tests/conftest.py) with a file or two left out; the GGUF
files are written by tests/test_policy_gguf.py's writer."""

import json

import pytest

from conftest import make_tiny_llama, save_tiny_model
from test_policy_gguf import _tokens, write_gguf

WEIGHTS = "model.safetensors, pytorch_model.bin or a shard index such as model.safetensors.index.json"
VOCABULARY = "tokenizer.json, tokenizer.model or vocab.json"


def half_made(case, folder, tokenizer, model_dir):
    """The teacher of `case`, made under `folder`, and the line after 'distill.teacher = TEACHER: ' that refuses it."""
    folder.mkdir()
    if case == "weights, no tokenizer":  # model.save_pretrained(DIR) alone, the common way
        make_tiny_llama(len(tokenizer)).save_pretrained(folder)
        return folder, (
            f"the model folder has config.json but no tokenizer files ({VOCABULARY}); save the tokenizer beside the "
            "weights with tokenizer.save_pretrained(DIR)"
        )
    if case == "weights, no config":
        (save_tiny_model(tokenizer, folder) / "config.json").unlink()
        return folder, (
            "the folder holds weights (model.safetensors) but no config.json; save the model whole: "
            "model.save_pretrained(DIR) writes both"
        )
    if case == "config, no weights":
        (save_tiny_model(tokenizer, folder) / "model.safetensors").unlink()
        return folder, (
            f"the model folder has config.json but no weights ({WEIGHTS}); save the model with "
            "model.save_pretrained(DIR)"
        )
    if case == "config alone":
        make_tiny_llama(len(tokenizer)).config.save_pretrained(folder)
        return folder, (
            f"the model folder has config.json but no weights ({WEIGHTS}) and no tokenizer files ({VOCABULARY}); save "
            "the model with model.save_pretrained(DIR) and the tokenizer beside the weights with "
            "tokenizer.save_pretrained(DIR)"
        )
    if case == "a shard missing":
        make_tiny_llama(len(tokenizer)).save_pretrained(folder, max_shard_size="2MB")
        tokenizer.save_pretrained(folder)
        shards = sorted(set(json.loads((folder / "model.safetensors.index.json").read_text())["weight_map"].values()))
        (folder / shards[-1]).unlink()
        return folder, f"model.safetensors.index.json names {len(shards)} weight files and 1 are missing: {shards[-1]}"
    if case == "empty folder":
        return folder, (
            "not a run directory, a PEFT adapter folder (adapter_config.json) or a model folder (config.json); "
            "it is empty"
        )
    if case == "adapter, no weights":
        (folder / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "base_model_name_or_path": "x"}))
        return folder, (
            "the adapter folder has adapter_config.json but no weights (adapter_model.safetensors or adapter_model.bin)"
        )
    if case == "not a GGUF file":
        (teacher := folder / "teacher.gguf").write_text('{"not": "a model"}\n')
        return teacher, "not a GGUF file (it does not start with GGUF)"
    assert case == "a GGUF of another tokenizer"  # a whole tiny Llama over a 260-token byte-level vocabulary
    teacher = write_gguf(make_tiny_llama(len(_tokens())), folder / "teacher.gguf", tokenizer.chat_template)
    return teacher, (
        f"its tokenizer (260 tokens) is not the policy's ({model_dir}: 49152 tokens); the per-token term compares the "
        "two models on the same ids, so the teacher must share the student's tokenizer (cross-tokenizer "
        "distillation is not supported)"
    )


@pytest.mark.parametrize(
    "case",
    [
        "weights, no tokenizer",
        "weights, no config",
        "config, no weights",
        "config alone",
        "a shard missing",
        "empty folder",
        "adapter, no weights",
        "not a GGUF file",
        "a GGUF of another tokenizer",
    ],
)
def test_a_half_made_teacher_is_refused_in_one_line_before_anything_is_written(
    tmp_path, model_dir, tokenizer, capsys, monkeypatch, case
):
    from rlvr.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    teacher, why = half_made(case, tmp_path / "teacher", tokenizer, model_dir)
    out = tmp_path / "run"
    sets = {"model.name": model_dir, "distill.coef": 0.5, "distill.teacher": teacher}
    args = sum((["--set", f"{k}={v}"] for k, v in sets.items()), [])
    capsys.readouterr()  # what making the teacher printed
    assert main(["train", "default", *args, "--output-dir", str(out)]) == 2
    assert capsys.readouterr().err == f"rlvr train: distill.teacher = {teacher}: {why}\n"
    assert not out.exists() and not (tmp_path / "cache").exists()  # no run directory, no GGUF converted


def test_a_whole_teacher_folder_resolves_as_before(model_dir, tmp_path):
    """The tiny model's folder (weights, config.json, tokenizer) is a whole-model teacher, named by its path."""
    from rlvr.config import as_config
    from rlvr.training.teacher import TeacherSpec, resolve_teacher
    from test_trainer import tiny_config

    cfg = tiny_config(tmp_path, **{"model.name": str(model_dir), "distill.teacher": str(model_dir), "distill.coef": 1})
    assert resolve_teacher(as_config(cfg)) == TeacherSpec("model", str(model_dir), str(model_dir))
