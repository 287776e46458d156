"""Model loading: the embedded GGUF default converts once into a plain safetensors cache that plain
transformers loads; hub ids and paths pass through; LoRA saves as an adapter and a merged model."""

import os
from pathlib import Path

import pytest
import torch

from conftest import make_tiny_llama
from rlvr.policy.load import DEFAULT_MODEL, ModelUnavailable, add_lora, load_policy, resolve_model_path, save_policy


def test_folders_pass_through_and_hub_ids_resolve_to_the_cache_or_stop(tmp_path, monkeypatch):
    """A local model folder is used as it is; a hub id is its cached snapshot, else (offline) a one-line
    ModelUnavailable; a path that is not there is not sent to the hub (tests/test_final_artefacts.py covers the rest);
    a folder without config.json is no model folder, said before transformers blames a missing tokenizer library."""
    from rlvr.policy.load import ModelUnavailable

    (tmp_path / "config.json").write_text("{}")
    assert resolve_model_path(str(tmp_path)) == str(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelUnavailable) as e:
        resolve_model_path(str(tmp_path / "empty"))
    assert str(e.value) == f"model {str(tmp_path / 'empty')!r}: the folder holds no config.json, so it is no model " + (
        "folder (it is empty)"
    )
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelUnavailable, match="HuggingFaceTB/SmolLM2-135M-Instruct.*HF_HUB_OFFLINE"):
        resolve_model_path("HuggingFaceTB/SmolLM2-135M-Instruct")
    with pytest.raises(ModelUnavailable, match="no such folder"):
        resolve_model_path("/some/local/folder")


def test_a_mistyped_local_folder_names_the_closest_and_is_not_sent_to_the_hub(tmp_path, monkeypatch, capsys):
    """Issue 51: `rlvr eval --model runs/mnie` talked about the hub. A name that starts like a path (runs/, ./, /) and
    does not exist is a folder mistyped: said so, with its closest siblings (difflib)."""
    from rlvr.cli import main

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # had it gone to the hub, the error would name HF_HUB_OFFLINE
    for name in ("mini", "main", "train-sft", ".hidden"):
        (tmp_path / "runs" / name).mkdir(parents=True)
    assert main(["eval", "--model", "runs/mnie", "--task", "arithmetic"]) == 2
    err = capsys.readouterr().err
    assert err == "rlvr eval: model 'runs/mnie': no such folder; the closest in runs: runs/mini, runs/main\n"
    assert main(["eval", "--model", "runs/mnie/checkpoints/step-4", "--task", "arithmetic"]) == 2
    assert capsys.readouterr().err == (
        "rlvr eval: model 'runs/mnie/checkpoints/step-4': no such folder (runs/mnie is missing); the closest in runs: "
        "runs/mini, runs/main\n"
    )
    with pytest.raises(
        ModelUnavailable, match=r"^model './nothing': no such folder; this folder holds no folder named"
    ):
        resolve_model_path("./nothing")
    with pytest.raises(ModelUnavailable, match="^model 'org/no-such-model' is not in the hub cache .* HF_HUB_OFFLINE"):
        resolve_model_path("org/no-such-model")  # an org/name that is no local path is still a hub id


def test_lora_saves_adapter_and_a_merged_model_with_the_same_outputs(tmp_path, tokenizer):
    from transformers import AutoModelForCausalLM

    model = add_lora(make_tiny_llama(len(tokenizer)), r=4, alpha=8)
    with torch.no_grad():  # a nonzero adapter, so merging matters
        for name, p in model.named_parameters():
            if "lora_B" in name:
                p.normal_(0, 0.1)
    save_policy(model, tokenizer, tmp_path)
    assert (tmp_path / "adapter" / "adapter_config.json").exists()
    merged = AutoModelForCausalLM.from_pretrained(tmp_path / "merged").eval()
    ids = torch.tensor([[5, 6, 7, 8]])
    with torch.no_grad():
        torch.testing.assert_close(merged(ids).logits, model.eval()(ids).logits, atol=1e-4, rtol=1e-4)


@pytest.mark.slow
def test_embedded_default_converts_once_and_loads_plainly(tmp_path, monkeypatch):
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from rlvr.policy.load import load_policy

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path))
    model, tokenizer = load_policy(DEFAULT_MODEL)
    folder = Path(resolve_model_path(DEFAULT_MODEL))
    assert folder.parent == tmp_path / "models" and folder.name.startswith("gguf-")
    assert (folder / "model.safetensors").exists() and not list(folder.parent.glob("*.tmp-*"))
    assert sum(p.numel() for p in model.parameters()) == pytest.approx(134.5e6, rel=0.01)
    assert model.config.num_hidden_layers == 30 and model.config.vocab_size == 49152
    assert not hasattr(model.config, "quantization_config")
    plain = AutoModelForCausalLM.from_pretrained(folder)  # no gguf, no rlvr: an ordinary checkpoint
    assert plain.config.hidden_size == 576
    tok = AutoTokenizer.from_pretrained(folder)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False, add_generation_prompt=True)
    assert text.endswith("<|im_start|>assistant\n") and tok.eos_token == "<|im_end|>"
    # greedy decoding of a simple question is sensible: the model is really the instruct model
    ids = tok(
        tok.apply_chat_template(
            [{"role": "user", "content": "What is the capital of France?"}], tokenize=False, add_generation_prompt=True
        ),
        return_tensors="pt",
    )
    out = model.generate(**ids, max_new_tokens=12, do_sample=False)
    assert "Paris" in tok.decode(out[0, ids["input_ids"].shape[1] :])


def _mapped_ranges(path) -> list[tuple[int, int]]:
    """Address ranges of this process's memory mappings of `path` (from /proc/self/maps)."""
    out = []
    for line in open("/proc/self/maps"):
        fields = line.split()
        if len(fields) >= 6 and fields[-1] == str(path):
            lo, hi = fields[0].split("-")
            out.append((int(lo, 16), int(hi, 16)))
    return out


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_load_policy_keeps_no_tensor_in_the_weights_file_mapping(tmp_path, tokenizer):
    """transformers leaves its tensors as views of the mapped safetensors file, which then stays resident as
    long as any of them lives; load_policy copies them out, so replacing a weight frees its memory."""
    from transformers import AutoModelForCausalLM

    make_tiny_llama(len(tokenizer)).save_pretrained(tmp_path)
    tokenizer.save_pretrained(tmp_path)
    weights = (tmp_path / "model.safetensors").resolve()

    def in_file(model) -> int:
        ranges = _mapped_ranges(weights)
        ptrs = [t.data_ptr() for t in [*model.parameters(), *model.buffers()]]
        return sum(any(lo <= p < hi for lo, hi in ranges) for p in ptrs)

    plain = AutoModelForCausalLM.from_pretrained(tmp_path, dtype=torch.float32)
    n_plain = in_file(plain)
    model, _ = load_policy(str(tmp_path))
    assert in_file(model) == 0
    if n_plain == 0:
        pytest.skip("this transformers no longer maps the weights file (the copy is then a no-op)")
    assert n_plain == len(list(plain.parameters()))  # what the copy is for: every parameter was in the file
    for a, b in zip(plain.state_dict().values(), model.state_dict().values()):
        assert torch.equal(a, b)
