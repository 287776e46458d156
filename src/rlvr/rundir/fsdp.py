"""Whole-weight reads and writes for a policy sharded by FSDP2 (`rlvr.training.distributed.shard_model`).

Under torch's `fully_shard` every parameter is a DTensor holding this rank's shard, and `state_dict()` returns
those shards, so whatever needs whole weights outside the update (checkpoints, resume, the final save, the LoRA
push to rollout servers) goes through `torch.distributed.checkpoint.state_dict` here. Every function is a
collective: all ranks call it together, in the same order; the ones that write files leave writing to rank 0.
The sampler sync needs no call here: `sampling.weights.merged_state_dict` gathers DTensors itself.

Checkpoints keep the single-process format: full trainable tensors under their parameter names, and the
optimizer state keyed by torch's integer parameter ids (torch's sharded API keys it by name; we translate),
so a checkpoint does not depend on whether the run was sharded.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import torch

from rlvr.policy.load import base_model, name_base_model, save_adapter


def is_sharded(model) -> bool:
    """True when FSDP2 holds the model (its parameters are shards)."""
    if not torch.distributed.is_available():
        return False
    from torch.distributed.fsdp import FSDPModule

    return isinstance(model, FSDPModule)


def _options(**kw):
    from torch.distributed.checkpoint.state_dict import StateDictOptions

    return StateDictOptions(full_state_dict=True, **kw)


def gather_trainable(model) -> dict[str, torch.Tensor]:
    """The trainable weights, whole, as CPU tensors on rank 0 ({} on the others), under the names
    `model.named_parameters()` gives (those of checkpoint.trainable_state). One tensor at a time is whole on
    the device. (get_model_state_dict(ignore_frozen_params=True) would also gather a frozen output head tied to
    the embedding, under its second name: a whole embedding table at every adapter push.)"""
    from torch.distributed.tensor import DTensor

    main = torch.distributed.get_rank() == 0
    out = {}
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.requires_grad:
                whole = p.full_tensor() if isinstance(p, DTensor) else p.detach()
                if main:
                    out[name] = whole.cpu().clone()
    return out


def _param_names(model, optimizer) -> list[str]:
    """The name of each optimizer parameter, in the optimizer's order: position i is torch's integer id i."""
    names = {id(p): n for n, p in model.named_parameters()}
    return [names[id(p)] for group in optimizer.param_groups for p in group["params"]]


def gather_optimizer(model, optimizer) -> dict:
    """`optimizer.state_dict()` as the unsharded run would have it (whole tensors, integer ids), on rank 0
    ({} on the others)."""
    from torch.distributed.checkpoint.state_dict import get_optimizer_state_dict

    if not optimizer.state:  # no step taken yet (same on every rank): nothing is sharded, and torch's call
        return optimizer.state_dict() if torch.distributed.get_rank() == 0 else {}  # would take a zero-lr step
    # torch types it as any state dict's union of values; an optimizer's holds "state" and "param_groups"
    state: Any = get_optimizer_state_dict(model, optimizer, options=_options(cpu_offload=True))
    if not state:
        return {}
    index = {n: i for i, n in enumerate(_param_names(model, optimizer))}
    return {
        "state": {index[n]: s for n, s in state["state"].items()},
        "param_groups": [{**g, "params": [index[n] for n in g["params"]]} for g in state["param_groups"]],
    }


def gather_checkpoint(model, optimizer) -> tuple[dict, dict]:
    """(trainable weights, optimizer state) for checkpoint.save_checkpoint(full=...); filled on rank 0 only."""
    return gather_trainable(model), gather_optimizer(model, optimizer)


def load_full(model, optimizer, weights: dict, optim_state: dict) -> None:
    """Restore whole trainable weights and a whole optimizer state (the checkpoint's, held by every rank) into
    the sharded model and optimizer: each rank keeps its own shard."""
    from torch.distributed.checkpoint.state_dict import set_model_state_dict, set_optimizer_state_dict

    set_model_state_dict(model, dict(weights), options=_options(strict=False))  # frozen weights stay as loaded
    if not optim_state["state"]:  # saved before any step: hyper-parameters only, as gather_optimizer wrote them
        optimizer.load_state_dict(optim_state)
        return
    names = _param_names(model, optimizer)
    by_name: Any = {
        "state": {names[i]: s for i, s in optim_state["state"].items()},
        "param_groups": [{**g, "params": [names[i] for i in g["params"]]} for g in optim_state["param_groups"]],
    }
    set_optimizer_state_dict(model, optimizer, by_name, options=_options())


def save_policy(model, tokenizer, out_dir: Path | None, *, is_main: bool, save_dtype: str = "auto") -> None:
    """What models.save_policy writes (out_dir/adapter for a LoRA policy, out_dir/merged always), for a
    sharded model. The merged weights are gathered to the CPU of every rank (one tensor at a time on the
    device); rank 0 loads them into a plain model of the same config and saves it."""
    from rlvr.sampling.hf import build_copy
    from rlvr.sampling.weights import merged_state_dict, tied_keys

    adapter = gather_trainable(model) if hasattr(model, "peft_config") else None
    merged = merged_state_dict(model)
    if not is_main:
        return
    if out_dir is None:
        raise ValueError("rank 0 writes the final model: it needs out_dir")
    out_dir = Path(out_dir)
    if adapter is not None:
        save_adapter(model, out_dir / "adapter", state_dict=adapter)
        tokenizer.save_pretrained(out_dir / "adapter")
        name_base_model(out_dir / "adapter", getattr(base_model(model), "rlvr_base_model", None))
    dtype = next(v.dtype for v in merged.values() if v.is_floating_point())
    plain = build_copy(model, dtype if save_dtype == "auto" else getattr(torch, save_dtype))
    missing, unexpected = plain.load_state_dict(merged, strict=False)
    missing = [k for k in missing if k not in tied_keys(plain)]
    if missing or unexpected:
        raise ValueError(f"merged weights do not fit the model: missing={missing[:5]} unexpected={unexpected[:5]}")
    base = base_model(model)
    plain.generation_config = copy.deepcopy(base.generation_config)  # merge_and_unload keeps the policy's
    plain.save_pretrained(out_dir / "merged", safe_serialization=True)
    tokenizer.save_pretrained(out_dir / "merged")


__all__ = ["is_sharded", "gather_trainable", "gather_optimizer", "gather_checkpoint", "load_full", "save_policy"]
