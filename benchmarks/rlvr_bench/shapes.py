"""The published model shapes `rlvr bench --model NAME[,NAME...]` measures: random weights of each, speed only.

Each entry is a hub repository's config.json written out here as transformers config values (so no hub is needed,
and nothing is downloaded): the shape, the family's settings and the stop ids are the published ones, the weights
are random (seed 0). A random model's speed is the real one's at the same number of tokens; what it writes is noise
(it runs every completion to max_new_tokens), so its figures are speed only, never accuracy. The prompts go through
the embedded SmolLM2-135M's real tokenizer and chat template: its 49,152 ids are valid ids of every entry's
vocabulary (all are larger), and its decode skips the ids beyond its own, so the verifier sees text; a shape whose
vocabulary is smaller than the tokenizer's is refused (ShapeError).

The reference, REFERENCE, is the embedded default's own config (its converted folder), with random weights too, so
that every model here decodes alike (every row to max_new_tokens) and the shares of the roofline compare.

A new entry is one line of SHAPES (and the config it names, from the repository's config.json; a multimodal model's
`text_config`). `folder` builds an entry's model once (in a child process, so the parent never holds its weights),
in bf16 where this CPU computes bf16 (else float32), with the tokenizer, under the work folder, and reuses it after.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from rlvr_bench.parent import child_env

REFERENCE = "smollm2-135m"


class ShapeError(ValueError):
    """A shape that cannot be measured here (one line: the name, and why)."""


@dataclass(frozen=True)
class Shape:
    source: str  # whose config.json the values are
    config: dict | None  # transformers config values, model_type included; None: the embedded default's own config


LLAMA3_2_1B = dict(
    model_type="llama",
    hidden_size=2048,
    intermediate_size=8192,
    num_hidden_layers=16,
    num_attention_heads=32,
    num_key_value_heads=8,
    head_dim=64,
    vocab_size=128256,
    max_position_embeddings=131072,
    rms_norm_eps=1e-5,
    rope_theta=500000.0,
    rope_scaling=dict(
        rope_type="llama3",
        factor=32.0,
        low_freq_factor=1.0,
        high_freq_factor=4.0,
        original_max_position_embeddings=8192,
    ),
    tie_word_embeddings=True,
    bos_token_id=128000,
    eos_token_id=128001,
)
QWEN3_0_6B = dict(
    model_type="qwen3",
    hidden_size=1024,
    intermediate_size=3072,
    num_hidden_layers=28,
    num_attention_heads=16,
    num_key_value_heads=8,
    head_dim=128,
    vocab_size=151936,
    max_position_embeddings=40960,
    max_window_layers=28,
    rms_norm_eps=1e-6,
    rope_theta=1000000.0,
    sliding_window=None,
    use_sliding_window=False,
    attention_bias=False,
    tie_word_embeddings=True,
    bos_token_id=151643,
    eos_token_id=151645,
)
SMOLLM3_3B = dict(
    model_type="smollm3",
    hidden_size=2048,
    intermediate_size=11008,
    num_hidden_layers=36,
    num_attention_heads=16,
    num_key_value_heads=4,
    vocab_size=128256,
    max_position_embeddings=65536,
    rms_norm_eps=1e-6,
    rope_theta=5000000.0,
    no_rope_layer_interval=4,
    no_rope_layers=[int((i + 1) % 4 != 0) for i in range(36)],  # every fourth layer without RoPE
    sliding_window=None,
    use_sliding_window=False,
    tie_word_embeddings=True,
    bos_token_id=128000,
    eos_token_id=128012,
    pad_token_id=128004,
)
GEMMA3_270M = dict(
    model_type="gemma3_text",
    hidden_size=640,
    intermediate_size=2048,
    num_hidden_layers=18,
    num_attention_heads=4,
    num_key_value_heads=1,
    head_dim=256,
    vocab_size=262144,
    max_position_embeddings=32768,
    rms_norm_eps=1e-6,
    hidden_activation="gelu_pytorch_tanh",
    query_pre_attn_scalar=256,
    rope_theta=1000000.0,
    rope_local_base_freq=10000.0,
    sliding_window=512,
    layer_types=["full_attention" if (i + 1) % 6 == 0 else "sliding_attention" for i in range(18)],
    attn_logit_softcapping=None,
    final_logit_softcapping=None,
    tie_word_embeddings=True,
    bos_token_id=2,
    eos_token_id=[1, 106],
    pad_token_id=0,
)
QWEN3_5_0_8B = dict(  # Qwen3.5-0.8B's text_config (the repository's model is the text model plus a vision encoder)
    model_type="qwen3_5_text",
    hidden_size=1024,
    intermediate_size=3584,
    num_hidden_layers=24,
    num_attention_heads=8,
    num_key_value_heads=2,
    head_dim=256,
    vocab_size=248320,
    max_position_embeddings=262144,
    rms_norm_eps=1e-6,
    layer_types=["full_attention" if (i + 1) % 4 == 0 else "linear_attention" for i in range(24)],
    linear_num_key_heads=16,
    linear_num_value_heads=16,
    linear_key_head_dim=128,
    linear_value_head_dim=128,
    linear_conv_kernel_dim=4,
    rope_parameters=dict(
        rope_type="default",
        rope_theta=10000000.0,
        partial_rotary_factor=0.25,
        mrope_interleaved=True,
        mrope_section=[11, 11, 10],
    ),
    tie_word_embeddings=True,
    eos_token_id=248044,
)

# name -> Shape: one line an entry
SHAPES: dict[str, Shape] = {
    REFERENCE: Shape("HuggingFaceTB/SmolLM2-135M-Instruct (the embedded default's converted folder)", None),
    "llama3.2-1b": Shape("meta-llama/Llama-3.2-1B", LLAMA3_2_1B),
    "qwen3-0.6b": Shape("Qwen/Qwen3-0.6B", QWEN3_0_6B),
    "smollm3-3b": Shape("HuggingFaceTB/SmolLM3-3B", SMOLLM3_3B),
    "gemma3-270m": Shape("google/gemma-3-270m", GEMMA3_270M),
    "qwen3.5-0.8b": Shape("Qwen/Qwen3.5-0.8B (text_config)", QWEN3_5_0_8B),
}
ALL = "families"  # --model families: every entry


def parse_shapes(value: str, shapes: dict[str, Shape] = SHAPES) -> list[str] | None:
    """The entries `--model` names (comma-separated, or "families" for all but the reference, which is always
    measured), or None when it names none of them (an embedded name or a folder: the reference step bench)."""
    if value == ALL:
        return [n for n in shapes if n != REFERENCE]
    names = [n.strip() for n in value.split(",") if n.strip()]
    return names if names and all(n in shapes for n in names) else None


def shape_config(shape: Shape):
    """The transformers config of an entry (the embedded default's own for the reference)."""
    from transformers import AutoConfig

    if shape.config is None:
        from rlvr.policy.load import DEFAULT_MODEL, resolve_model_path

        return AutoConfig.from_pretrained(resolve_model_path(DEFAULT_MODEL))
    values = dict(shape.config)
    return AutoConfig.for_model(values.pop("model_type"), **values)


def sizes(config, dtype: str) -> dict:
    """Parameters (a tied head counted once: the FLOP convention), the bytes a decode step reads (every linear
    layer's weight, the output head included, at `dtype`'s size), the embedding's elements and the vocabulary, from
    the config alone (a model on torch's meta device: no memory)."""
    import torch
    from transformers import AutoModelForCausalLM

    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    size = torch.tensor([], dtype=getattr(torch, dtype)).element_size()
    return {
        "params": sum(p.numel() for p in model.parameters()),
        "weight_bytes": size * sum(m.weight.numel() for m in model.modules() if isinstance(m, torch.nn.Linear)),
        "embed": model.get_input_embeddings().weight.numel(),
        "vocab": config.vocab_size,
    }


def folder(name: str, shape: Shape, work: Path, dtype: str) -> Path:
    """The entry's model folder (random weights, seed 0, in `dtype`, with the embedded default's tokenizer), built
    once under `work` in a child process and reused; keyed by the config's values, so a changed entry is rebuilt."""
    from transformers import AutoTokenizer

    from rlvr.policy.load import DEFAULT_MODEL, resolve_model_path

    reference = resolve_model_path(DEFAULT_MODEL)
    config = shape_config(shape)
    vocab = len(AutoTokenizer.from_pretrained(reference))
    if config.vocab_size < vocab:
        raise ShapeError(
            f"{name}: a vocabulary of {config.vocab_size} is smaller than the embedded tokenizer's {vocab} ids"
        )
    key = hashlib.sha256(json.dumps([shape.config, dtype], sort_keys=True, default=str).encode()).hexdigest()[:12]
    out = work / f"{name}-{dtype}-{key}"
    if not (out / "config.json").exists():
        job = json.dumps([config.to_dict(), str(out), dtype, reference])
        proc = subprocess.run(
            [sys.executable, "-m", "rlvr_bench.shapes", job], env=child_env(os.cpu_count() or 1), capture_output=True
        )
        if proc.returncode != 0:
            tail = proc.stderr.decode(errors="replace").strip().splitlines()[-1:]
            raise ShapeError(f"{name}: building its random model failed (exit {proc.returncode}): {' '.join(tail)}")
    return out


def build(config: dict, out: str, dtype: str, tokenizer_from: str) -> None:
    """Child (`python -m rlvr_bench.shapes JOB`): random weights of `config` (seed 0) in `dtype`, saved with the
    tokenizer; written beside, then renamed, so an interrupted build is never reused."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    values = dict(config)
    config = AutoConfig.for_model(values.pop("model_type"), **values)
    model = AutoModelForCausalLM.from_config(config, dtype=getattr(torch, dtype))
    tmp = Path(out + ".partial")
    model.save_pretrained(tmp)
    AutoTokenizer.from_pretrained(tokenizer_from).save_pretrained(tmp)
    os.replace(tmp, out)


def available_bytes() -> int:
    """Memory this machine can give a new process without swapping: /proc/meminfo's MemAvailable."""
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemAvailable:"):
            return int(line.split()[1]) * 1024
    return 0


__all__ = ["REFERENCE", "SHAPES", "ALL", "Shape", "ShapeError", "parse_shapes", "shape_config", "sizes", "folder"]

if __name__ == "__main__":
    build(*json.loads(sys.argv[1]))
