"""The update's fast path on a CPU under bf16 autocast: the same function, fewer casts, copies and passes.

A profile of one update (4 x 8 rollouts of the default model, micro-batches of 16 rows) found most of its
time outside the big matmuls: float32 activations cast to bf16 again by every linear layer that reads them,
peft casting bf16 activations back to float32 for each LoRA A matrix (which autocast then casts to bf16
once more), and LoRA's `result + B(A(x)) * scaling` as three passes over the layer's whole output. Each
change below keeps the arithmetic of the plain autocast forward: the same roundings done once (the fused
LoRA sum rounds once where the three passes rounded three times).

`prepare_for_update(model, train)` applies them per `train` settings; rlvr.policy.attention is the other part.
"""

from __future__ import annotations

import types
import warnings
from typing import Any

import torch

from rlvr.machine import EMULATED_BF16, emulates_bf16
from rlvr.policy import attention
from rlvr.policy.load import base_model, cast_frozen_base, model_device


def prepare_for_update(model, train) -> dict:
    """Apply the fast path that `train` (train.autocast, train.attention, train.fsdp) allows, and
    train.gradient_checkpointing; returns what was applied."""
    done: dict[str, Any] = {"attention": attention.configure(model, train.attention)}
    if train.gradient_checkpointing:
        # memory for time: each decoder layer keeps only its input and recomputes the rest in the backward
        base = base_model(model)
        base.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        done["gradient_checkpointing"] = True
    if train.autocast != "bfloat16":
        return done
    if emulates_bf16(train.autocast, model_device(model).type == "cpu"):
        warnings.warn(EMULATED_BF16.format(what="train.autocast"), stacklevel=2)
    if stores_base_in_bf16(train):
        done["bf16_frozen_linears"] = cast_frozen_base(model, torch.bfloat16)
        done["bf16_frozen_head"] = cache_frozen_head_cast(model, torch.bfloat16)
    done["bf16_norm_outputs"] = cast_norm_outputs(model, torch.bfloat16)
    done["fused_lora"] = fuse_lora_forward(model)
    return done


def stores_base_in_bf16(train) -> bool:
    """Whether the update stores the frozen base of the LoRA-wrapped linears in bf16 (cast_frozen_base): under bf16
    autocast, except with FSDP, which wants one dtype in a sharded group. A checkpoint's model is rebuilt the same way."""
    return train.autocast == "bfloat16" and not train.fsdp


def cache_frozen_head_cast(model, dtype) -> bool:
    """Under autocast to `dtype`, run a frozen float32 output head from a `dtype` copy made once (remade if
    the weight is changed or replaced); returns whether the head got one.

    Why: the default model ties its head to the input embedding, which must stay float32 (its rows start the
    float32 residual stream), so cast_frozen_base leaves it alone, and autocast re-cast its 49,152 x 576
    weight on every forward: 34 ms a call, seven calls an update. The copy is that same cast, kept.
    """
    head = model.get_output_embeddings()
    if (
        not isinstance(head, torch.nn.Linear)
        or head.weight.requires_grad
        or head.weight.dtype == dtype
        or hasattr(head, "_rlvr_cast")
    ):
        return False
    head._rlvr_cast = (None, None)  # type: ignore[assignment]  # (weight version it was made from, the copy)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        device = x.device.type
        if not (torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == dtype):
            return torch.nn.Linear.forward(self, x)
        stamp = (self.weight.data_ptr(), self.weight._version)
        if self._rlvr_cast[0] != stamp:
            self._rlvr_cast = (stamp, self.weight.detach().to(dtype))
        bias = self.bias.to(dtype) if self.bias is not None else None
        return torch.nn.functional.linear(x.to(dtype), self._rlvr_cast[1], bias)

    head.forward = types.MethodType(forward, head)  # type: ignore[method-assign]  # this one head's forward
    return True


def cast_norm_outputs(model, dtype) -> int:
    """Under autocast to `dtype`, hand each RMSNorm's output of the float32 residual stream to the next layers already
    in `dtype`; returns how many norms were hooked. The residual stream and the norm's own arithmetic stay float32.

    Why: every linear layer after a norm (q, k, v and their LoRA A matrices; gate, up and theirs) cast the
    same float32 normed activations to bf16 itself, and autograd kept each copy for the backward: ten casts
    and ten saved copies per decoder layer where one does. The rounding is the same cast, done once.

    Only a norm whose input is float32 (the residual stream) is cast: that output goes to linear layers. A norm fed
    by a matmul's `dtype` output (Qwen3's per-head q_norm and k_norm, after the q and k projections) returns float32
    in the plain autocast forward (its float32 weight times the rounded normed value), and RoPE takes that in float32:
    rounding it to `dtype` first would change the arithmetic, so it is handed on as it is.
    """

    def hook(module, args, output):
        device = output.device.type
        if (
            args
            and args[0].dtype == torch.float32
            and torch.is_autocast_enabled(device)
            and torch.get_autocast_dtype(device) == dtype
        ):
            return output.to(dtype)
        return output

    n = 0
    for module in model.modules():
        if type(module).__name__.endswith("RMSNorm") and not getattr(module, "_rlvr_cast_output", False):
            module.register_forward_hook(hook)
            module._rlvr_cast_output = True  # once: a second call must not stack hooks
            n += 1
    return n


def fuse_lora_forward(model) -> int:
    """Give each plain LoRA linear layer (peft, one active adapter, no variant such as DoRA) a forward that
    computes base(x) + scaling * A(x) B^T as one `addmm` on the base output, without peft's cast of x to
    the adapter's dtype; returns how many layers. Anything else (adapters disabled or merged, several
    adapters, dropout on, extra arguments) runs peft's own forward, unchanged.

    Under autocast addmm runs in bf16 like the separate matmul, multiply and add it replaces; the sum is
    formed in one pass instead of three over the layer's output, and the backward saves nothing extra.
    """
    n = 0
    for module in model.modules():
        if (
            hasattr(module, "lora_A")
            and isinstance(getattr(module, "base_layer", None), torch.nn.Linear)
            and not hasattr(module, "_peft_forward")
        ):  # once: the fused forward falls back to peft's
            module._peft_forward = module.forward
            module.forward = types.MethodType(_fused_forward, module)
            n += 1
    return n


def _fused_forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    adapters = self.active_adapters
    name = adapters[0] if len(adapters) == 1 else None
    if (
        args
        or kwargs
        or name is None
        or self.disable_adapters
        or self.merged
        or name not in self.lora_A
        or name in getattr(self, "lora_variant", {})
        or not isinstance(self.lora_dropout[name], torch.nn.Identity)
    ):
        return self._peft_forward(x, *args, **kwargs)
    base = self.base_layer(x)
    h = self.lora_A[name](x)
    out = torch.addmm(
        base.reshape(-1, base.shape[-1]),
        h.reshape(-1, h.shape[-1]),
        self.lora_B[name].weight.t(),
        alpha=self.scaling[name],
    )
    return out.view(base.shape)
