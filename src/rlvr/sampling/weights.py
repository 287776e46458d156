"""Read the current policy weights out of a transformers model or a peft model, LoRA merged, without
touching the trainer's model (no in-place merge/unmerge, which would perturb its float weights)."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping

import torch

from rlvr.policy.load import base_model


def merged_state_dict(model, merge_lora: bool = True) -> dict[str, torch.Tensor]:
    """State dict under the plain transformers names, with every active LoRA delta added to its base weight.

    Works on a plain model (returns detached tensors) and on a peft PeftModel with LoRA adapters
    (DoRA and other variants are refused with a clear message rather than merged wrongly).
    Under FSDP2 (the model's tensors are DTensor shards) every rank must call it together: the merge runs on
    the shards and each result is gathered whole, to the CPU (see `_gathered`).
    merge_lora=False gives the frozen base weights instead (for an engine that applies the adapter itself).
    """
    return _gathered({k: make() for k, make in merged_weights(model, merge_lora).items()})


def merged_weights(model, merge_lora: bool = True) -> dict[str, Callable[[], torch.Tensor]]:
    """The same names as `merged_state_dict`, each with a function that builds its tensor on demand, so a
    reader that converts one weight at a time (the fast sampler) never holds a whole merged float copy.
    Not for FSDP-sharded models (use `merged_state_dict`, which gathers)."""
    base = base_model(model)
    is_peft = base is not model
    if not is_peft:
        return {k: v.detach for k, v in base.state_dict().items()}
    out: dict[str, Callable[[], torch.Tensor]] = {}
    for name, module in base.named_modules():
        if hasattr(module, "base_layer") and hasattr(module, "get_delta_weight"):
            out[f"{name}.weight"] = functools.partial(_merged, name, module, merge_lora)
            if getattr(module.base_layer, "bias", None) is not None:
                out[f"{name}.bias"] = functools.partial(_base_bias, module)
    for key, value in base.state_dict().items():
        clean = key.replace(".base_layer.", ".")
        if "lora_" in key or "original_module" in key or clean in out:
            continue
        if ".modules_to_save." in clean:  # trained copy of a whole module: it replaces the original
            head, _, tail = clean.partition(".modules_to_save.")
            clean = f"{head}.{tail.partition('.')[2]}"
        out[clean] = value.detach
    return out


def _base_bias(module) -> torch.Tensor:
    """A LoRA layer's bias: its base layer's (LoRA adds none)."""
    return module.base_layer.bias.detach()


class LazyWeights(Mapping):
    """A read-only name -> tensor mapping that builds each tensor when it is read (and keeps none)."""

    def __init__(self, makers: dict[str, Callable[[], torch.Tensor]]):
        self._makers = makers

    def __getitem__(self, key: str) -> torch.Tensor:
        return self._makers[key]()

    def __iter__(self):
        return iter(self._makers)

    def __len__(self) -> int:
        return len(self._makers)


def merged_weights_lazily(model, merge_lora: bool = True) -> Mapping[str, torch.Tensor]:
    """`merged_state_dict` as a LazyWeights for a model on one process; the gathered dict under FSDP."""
    if torch.distributed.is_available():
        from torch.distributed.tensor import DTensor

        if any(isinstance(p, DTensor) for p in model.parameters()):
            return merged_state_dict(model, merge_lora)
    return LazyWeights(merged_weights(model, merge_lora))


def _merged(name: str, module, merge_lora: bool) -> torch.Tensor:
    weight = module.base_layer.weight.detach()
    if not merge_lora or getattr(module, "merged", False):
        return weight
    for adapter in module.active_adapters:
        if adapter not in getattr(module, "lora_A", {}):
            continue
        if getattr(module, "use_dora", {}).get(adapter, False):
            raise NotImplementedError(f"{name}: DoRA adapters are not supported by the sampler merge")
        delta = module.get_delta_weight(adapter)
        # in the wider of the two dtypes: a base stored in bf16 (models.cast_frozen_base) would round much of
        # a small delta away
        weight = weight.to(torch.promote_types(weight.dtype, delta.dtype)) + delta
    return weight


def embedding_copy(sd: Mapping[str, torch.Tensor], scale: float | None) -> tuple[torch.Tensor, torch.Tensor | None]:
    """The embedding table (V, H) as a CPU copy (never the trainer's tensor), and `scale` as transformers applies it to
    the rows (rounded to the embedding's dtype; Gemma 3's sqrt(H)) in float32, or None.

    The copy is bf16 where every entry is a bf16 value (the embedding of a bf16 checkpoint, frozen under LoRA: the same
    rows in half the memory, 335 MB less at Gemma 3 270M's 262,144 x 640), else float32: its rows, converted to
    float32 and times the scale, are the float32 trainer's own."""
    table = sd["model.embed_tokens.weight"].detach().to("cpu")
    factor = None if scale is None else torch.tensor(scale, dtype=table.dtype).float()
    return table.to(torch.bfloat16 if _bf16_values(table) else torch.float32, copy=True), factor


def _bf16_values(table: torch.Tensor) -> bool:
    """Whether every entry is a bf16 value: bf16 itself, or float32 with its low 16 bits zero (a few rows at a time)."""
    if table.dtype != torch.float32:
        return table.dtype == torch.bfloat16
    return not any(bool((rows.view(torch.int32) & 0xFFFF).any()) for rows in table.split(8192))


def _gathered(state: dict) -> dict:
    """The state itself, unless it holds DTensors (a model sharded by FSDP2): those are all-gathered one at a
    time, in key order, and moved to the CPU, so a rank never holds the whole model on its device. A
    collective: every rank calls it with the same keys."""
    if not torch.distributed.is_available():
        return state
    from torch.distributed.tensor import DTensor

    if not any(isinstance(v, DTensor) for v in state.values()):
        return state
    with torch.no_grad():
        return {k: v.full_tensor().cpu() if isinstance(v, DTensor) else v for k, v in state.items()}


def tied_keys(model) -> set[str]:
    """Names that share a tensor with another one (an output head tied to the embedding): a state dict may omit them."""
    seen, tied = dict[int, str](), set[str]()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            tied.add(name)
        seen.setdefault(id(p), name)
    return tied


def plain_config(model):
    """The model's config with any quantization marker removed (a GGUF-loaded model carries one)."""
    base = base_model(model)
    config = copy.deepcopy(base.config)
    if hasattr(config, "quantization_config"):
        delattr(config, "quantization_config")
    return config
