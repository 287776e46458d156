"""A GGUF file as `model.name` (rlvr.policy.gguf): it loads as the model it was written from, converted once into a
cache folder its content names; a missing, foreign, truncated or corrupt file is refused in one line (exit 2) before
anything is written. The GGUF files are real ones, written here with gguf's GGUFWriter: a tiny random Llama in float32
(so the conversion is exact) with a byte-level tokenizer and the embedded default's chat template."""

import hashlib
import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

from conftest import make_tiny_llama, train_two_steps

# transformers' Llama names -> llama.cpp's, per block
BLOCK = {
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
}


def _tokens() -> list[str]:
    """A byte-level BPE vocabulary as small as one can be: three special tokens, the 256 byte symbols, one merge's
    token (a real vocabulary's 49,152 strings take gguf's reader seconds to parse, each time a file is read)."""
    from tokenizers.pre_tokenizers import ByteLevel

    return ["<|endoftext|>", "<|im_start|>", "<|im_end|>", *sorted(ByteLevel.alphabet()), "Ġt"]


def _permute(w: np.ndarray, heads: int) -> np.ndarray:
    """llama.cpp's order of a q or k projection's rows (its converter interleaves each head's rotary halves;
    transformers' GGUF loader undoes it)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_gguf(model, path: Path, chat_template: str | None) -> Path:
    """`model` (a Llama over _tokens()) as a float32 GGUF file as llama.cpp writes one, with its byte-level tokenizer
    and this chat template; chat_template None: no tokenizer at all."""
    from gguf import GGUFWriter

    c, sd = model.config, {k: v.numpy() for k, v in model.state_dict().items()}
    w = GGUFWriter(str(path), "llama")
    w.add_name("tiny")
    w.add_context_length(c.max_position_embeddings)
    w.add_embedding_length(c.hidden_size)
    w.add_block_count(c.num_hidden_layers)
    w.add_feed_forward_length(c.intermediate_size)
    w.add_head_count(c.num_attention_heads)
    w.add_head_count_kv(c.num_key_value_heads)
    w.add_layer_norm_rms_eps(c.rms_norm_eps)
    w.add_rope_freq_base(c.rope_parameters["rope_theta"])
    w.add_rope_dimension_count(c.hidden_size // c.num_attention_heads)
    w.add_vocab_size(c.vocab_size)
    if chat_template is not None:
        tokens = _tokens()
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types([3] * 3 + [1] * (len(tokens) - 3))  # control, then normal
        w.add_token_merges(["Ġ t"])
        w.add_bos_token_id(1)
        w.add_eos_token_id(2)
        w.add_chat_template(chat_template)
    w.add_tensor("token_embd.weight", sd["model.embed_tokens.weight"])
    for i in range(c.num_hidden_layers):
        for hf, gg in BLOCK.items():
            x = sd[f"model.layers.{i}.{hf}.weight"]
            heads = {"attn_q": c.num_attention_heads, "attn_k": c.num_key_value_heads}.get(gg)
            w.add_tensor(f"blk.{i}.{gg}.weight", _permute(x, heads) if heads else x)
    w.add_tensor("output_norm.weight", sd["model.norm.weight"])  # no output.weight: tied to the embedding
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    """One RLVR_CACHE for the module, so the tiny file converts once for all its tests."""
    folder = tmp_path_factory.mktemp("rlvr-cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("RLVR_CACHE", str(folder))
        yield folder


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, tokenizer):
    """(the tiny Llama, its GGUF file, with the embedded default's chat template)."""
    model = make_tiny_llama(len(_tokens())).eval()
    return model, write_gguf(model, tmp_path_factory.mktemp("gguf") / "tiny.gguf", tokenizer.chat_template)


def _folder(cache: Path, path: Path) -> Path:
    return cache / "models" / f"gguf-{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}"


def test_a_gguf_file_loads_as_the_model_it_was_written_from(tiny, cache, tokenizer):
    """Same logits exactly (float32 tensors dequantize to themselves), the file's tokenizer with its chat template,
    from a plain safetensors folder named by the file's sha256; the adapter's base is the file."""
    from transformers import AutoModelForCausalLM

    from rlvr.policy.load import load_policy, resolve_model_path

    source, path = tiny
    model, tok = load_policy(str(path))
    ids = torch.tensor([[1, 5, 6, 7, 8, 100, 200, 259]])
    with torch.no_grad():
        assert torch.equal(model(ids).logits, source(ids).logits)
    assert tok.chat_template == tokenizer.chat_template and (tok.bos_token, tok.eos_token) == (
        "<|im_start|>",
        "<|im_end|>",
    )
    tokens = _tokens()
    assert tok("<|im_start|>hi to")["input_ids"] == [1, tokens.index("h"), tokens.index("i"), 259, tokens.index("o")]
    folder = _folder(cache, path)
    assert resolve_model_path(str(path)) == str(folder)
    assert model.rlvr_base_model == str(path.resolve())
    plain = AutoModelForCausalLM.from_pretrained(folder)  # no gguf, no rlvr: an ordinary checkpoint
    assert not hasattr(plain.config, "quantization_config")


def test_the_cache_is_keyed_by_the_files_content_and_the_digest_is_memoised(tiny, cache, tmp_path, monkeypatch):
    """A renamed copy (relative, or under ~) loads from the same folder without converting again; the digest is kept
    per (path, size, mtime), so an unchanged file is not read again and a changed one is checked again."""
    from rlvr.policy.load import resolve_model_path

    _, path = tiny
    folder = Path(resolve_model_path(str(path)))
    weights = (folder / "model.safetensors").stat().st_mtime_ns
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path))
    shutil.copy(path, tmp_path / "renamed.GGUF")
    shutil.copy(path, tmp_path / "sha256-0f3a")  # as Ollama keeps its models: a GGUF file without the suffix
    for name in ("renamed.GGUF", "./renamed.GGUF", "~/renamed.GGUF", "sha256-0f3a"):
        assert resolve_model_path(name) == str(folder)
    assert [p.name for p in (cache / "models").iterdir()] == [folder.name]  # no second conversion
    assert (folder / "model.safetensors").stat().st_mtime_ns == weights
    copy = tmp_path / "renamed.GGUF"
    stat = copy.stat()
    copy.write_bytes(b"x" * stat.st_size)  # other bytes, the same size and mtime: the memo answers, unread
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert resolve_model_path(str(copy)) == str(folder)
    os.utime(copy, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # touched: checked and hashed again
    with pytest.raises(ValueError, match="^model '.*renamed.GGUF': not a GGUF file"):
        resolve_model_path(str(copy))


def test_a_copy_of_the_embedded_file_is_keyed_as_the_embedded_model(tmp_path, monkeypatch):
    """The embedded default is one more GGUF file: a copy of it elsewhere, under another name, has the embedded
    model's cache folder (its sha256's), so it loads from the embedded model's conversion (the slow test below)."""
    from rlvr.policy.gguf import gguf_folder
    from rlvr.policy.load import DEFAULT_MODEL, embedded_folder, embedded_gguf

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    copy = Path(shutil.copy(embedded_gguf(DEFAULT_MODEL), tmp_path / "smol.gguf"))
    assert embedded_folder(DEFAULT_MODEL) == _folder(tmp_path / "cache", copy)
    assert gguf_folder(copy, "smol.gguf", tmp_path / "cache", check=False) == embedded_folder(DEFAULT_MODEL)


@pytest.mark.slow
def test_a_copy_of_the_embedded_file_loads_from_the_embedded_models_conversion(tmp_path, monkeypatch):
    """Converted once for the embedded name, the copy loads the same weights from the same folder without a second
    conversion; a cache from before the content key (CACHE/models/<name>) is moved into place, not converted again."""
    from rlvr.policy.load import DEFAULT_MODEL, embedded_gguf, load_policy, resolve_model_path

    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    folder = Path(resolve_model_path(DEFAULT_MODEL))
    legacy = folder.parent / DEFAULT_MODEL
    os.replace(folder, legacy)
    assert resolve_model_path(DEFAULT_MODEL) == str(folder) and not legacy.exists()
    weights = (folder / "model.safetensors").stat().st_mtime_ns
    copy = Path(shutil.copy(embedded_gguf(DEFAULT_MODEL), tmp_path / "smol.gguf"))
    model, tok = load_policy(str(copy))
    assert model.config._name_or_path == str(folder) and model.rlvr_base_model == str(copy)
    assert [p.name for p in folder.parent.iterdir()] == [folder.name]
    assert (folder / "model.safetensors").stat().st_mtime_ns == weights
    embedded, _ = load_policy(DEFAULT_MODEL)
    ids = tok("What is 12 + 30?", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        assert torch.equal(model(ids).logits, embedded(ids).logits)


def _refusals(tiny, tmp_path) -> dict[str, tuple[str, str]]:
    """case -> (model.name, the one line `rlvr train` prints), for files written here."""
    from gguf import GGUFWriter

    from rlvr.policy.gguf import gguf_architectures

    source, path = tiny
    text = tmp_path / "notes.gguf"
    text.write_text('{"not": "a model"}\n')
    cut = tmp_path / "cut.gguf"
    cut.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    foreign = GGUFWriter(str(tmp_path / "rwkv.gguf"), "rwkv7")
    foreign.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    foreign.write_header_to_file(), foreign.write_kv_data_to_file(), foreign.write_tensors_to_file(), foreign.close()
    t5 = GGUFWriter(str(tmp_path / "t5.gguf"), "t5")  # transformers reads it, as an encoder-decoder
    for key, value in [("context_length", 512), ("block_count", 1), ("embedding_length", 8), ("vocab_size", 32)]:
        t5.add_uint32(f"t5.{key}", value)
    for key, value in [("feed_forward_length", 16), ("attention.head_count", 2), ("attention.key_length", 4)]:
        t5.add_uint32(f"t5.{key}", value)
    t5.add_tensor("token_embd.weight", np.zeros((32, 8), dtype=np.float32))
    t5.write_header_to_file(), t5.write_kv_data_to_file(), t5.write_tensors_to_file(), t5.close()
    bare = write_gguf(source, tmp_path / "bare.gguf", None)
    m = "rlvr train: model"
    return {
        "missing": ("nothing.gguf", f"{m} 'nothing.gguf': no such file"),
        "not gguf": (str(text), f"{m} '{text}': not a GGUF file (it does not start with GGUF)"),
        "truncated": (
            str(cut),
            f"{m} '{cut}': a truncated or corrupt GGUF file ({cut.stat().st_size:,} bytes that gguf cannot read)",
        ),
        "foreign": (
            str(tmp_path / "rwkv.gguf"),
            f"{m} '{tmp_path / 'rwkv.gguf'}': transformers cannot read a GGUF file of architecture 'rwkv7'; it reads "
            "these as causal language models: " + ", ".join(gguf_architectures()),
        ),
        "encoder-decoder": (
            str(tmp_path / "t5.gguf"),
            f"{m} '{tmp_path / 't5.gguf'}': a GGUF file of architecture 't5', which transformers reads as a 't5' model, "
            "not a causal language model",
        ),
        "no tokenizer": (
            str(bare),
            f"{m} '{bare}': a GGUF file without a tokenizer (tokenizer.ggml.*), which rlvr takes from it",
        ),
    }


def test_a_file_that_is_not_a_usable_gguf_is_refused_in_one_line_before_anything_is_written(
    tiny, tmp_path, monkeypatch, capsys
):
    """Through `rlvr train`: exit 2, the one line, no run folder, nothing in the cache (not even a digest)."""
    from rlvr.cli import main
    from rlvr.policy.gguf import gguf_architectures

    assert "llama" in gguf_architectures() and "rwkv7" not in gguf_architectures()
    assert not {"general", "tokenizer", "t5"} & set(gguf_architectures())  # sections, an encoder-decoder
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("RLVR_CACHE", str(tmp_path / "cache"))
    for case, (name, line) in _refusals(tiny, tmp_path).items():
        run = tmp_path / "runs" / case.replace(" ", "-")
        assert main(["train", "default", "--set", f"model.name={name}", "--output-dir", str(run)]) == 2, case
        assert capsys.readouterr().err == line + "\n", case
        assert not run.exists() and not (tmp_path / "runs").exists(), case
        assert not (tmp_path / "cache").exists(), case


def test_rlvr_train_and_eval_take_a_gguf_file(tiny, cache, tmp_path, capsys):
    """`rlvr train default --set model.name=FILE.gguf` trains; the adapter names the file as its base, the model card
    names the cache folder it loaded from, and the adapter loads again on it; `rlvr eval --model FILE.gguf` evaluates."""
    import yaml

    from rlvr.cli import main
    from rlvr.evaluation.run_eval import resolve_model
    from rlvr.policy.load import resolve_model_path

    _, path = tiny
    run = tmp_path / "run"
    rows, _ = train_two_steps(str(path), run, {"train.steps": 1})
    assert [r["step"] for r in rows] == [0]
    assert yaml.safe_load((run / "config.yaml").read_text())["model"]["name"] == str(path)
    adapter = json.loads((run / "final" / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == str(path.resolve())
    card = (run / "final" / "README.md").read_text()
    folder = resolve_model_path(str(path))
    assert f"| base model | {path.resolve()} (this run loaded it from `{folder}, the file dequantized" in card
    assert f'base = AutoModelForCausalLM.from_pretrained("{folder}")' in card
    model, _, _, _, _, _ = resolve_model(run / "final" / "adapter", "arithmetic", None)
    assert model.config._name_or_path == folder
    capsys.readouterr()
    out = tmp_path / "eval"
    args = ["eval", "--model", str(path), "--task", "arithmetic", "--n", "0", "--limit", "2", "--out", str(out)]
    assert main(args) == 0
    assert json.loads((out / "summary.json").read_text())["setup"]["model"] == str(path)
