"""An experiment on the update, measured and not adopted: its LoRA layers that read one input run as one, q|k|v of an
attention layer and gate|up of an MLP (issue 63; docs/performance.md, "q|k|v and gate|up as one matmul in the update").

A Llama-style layer calls q_proj, k_proj and v_proj on the same hidden states, and gate_proj and up_proj on the same
normed input: five frozen matmuls and five LoRA A products where two and two do (the fast sampler fuses the frozen
ones the same way). `fuse_shared_inputs` stores each group's frozen weights as one tensor, each member's weight a view
of its rows (no second copy), and gives every member a forward that, called first with an input, computes the whole
group (x W_group^T once, x A_group^T once, the B products as one against the block-diagonal of the B matrices) and
leaves the other members' outputs for their calls with that same tensor. The backward follows: one matmul gives the
input's gradient from the group's output gradients (split's backward concatenates them), one the A matrices'.

Each output is the member's own function: under bf16 autocast the forward is bit-identical to the separate layers';
the input's gradient is one product where three bf16-rounded ones were added, and float32 moves by the reblocked
products' rounding. Anything fastpath's fused LoRA forward would not take (adapters off or merged, dropout, several
adapters, extra arguments), members whose weights no longer share one dtype, device and width, or a float32 input
against bf16 weights outside autocast: each member runs its own forward. Weights given new tensors since (a deep copy,
a cast, a move) are fused again at the next call.

Measured on the 2-core AVX512-BF16 EPYC (benchmarks/update_profile.py --ab): within 1-3% of the separate layers
either way, in bf16 and float32, so rlvr's update does not apply it; on a CPU whose matmuls lose more on narrow
shapes (the AMX kind, docs/performance.md) the same command says whether it pays there.
"""

from __future__ import annotations

import types
from typing import Any

import torch

# the sibling layers that read one input, by attribute name, in the order the forward calls them
GROUPS = (("q_proj", "k_proj", "v_proj"), ("gate_proj", "up_proj"))


class SharedInput:
    """One group of LoRA layers: the frozen weights as one tensor (each member's weight a view of its rows), the
    fused bias when every member has one, and the outputs the first member's call made for the others."""

    def __init__(self, members: list[Any]):  # peft's LoRA layers (lora_A, lora_B, scaling, base_layer, ...)
        self.members = members
        self.sizes = [m.base_layer.weight.shape[0] for m in members]
        self.fuse()
        self.pending: tuple[torch.Tensor, dict[int, torch.Tensor]] | None = None

    def __getstate__(self) -> dict:
        # a copy (copy.deepcopy of the model) starts with nothing pending: outputs of a forward are not copyable
        return {**self.__dict__, "pending": None}

    def fuse(self) -> None:
        """The members' frozen weights (and biases) concatenated into one tensor, each member's now a view of its rows."""
        self.weight = torch.cat([m.base_layer.weight.detach() for m in self.members])
        has_bias = self.members[0].base_layer.bias is not None
        self.bias = torch.cat([m.base_layer.bias.detach() for m in self.members]) if has_bias else None
        biases = self.bias.split(self.sizes) if self.bias is not None else [None] * len(self.members)
        for m, w, b in zip(self.members, self.weight.split(self.sizes), biases):
            m.base_layer.weight.data = w
            if b is not None:
                m.base_layer.bias.data = b
        self.offsets = [m.base_layer.weight.storage_offset() for m in self.members]

    def fusable_again(self) -> bool:
        """Whether the members' weights, replaced since the group was made, can be fused again: one dtype, device and
        input width, the same rows as before."""
        weights = [m.base_layer.weight for m in self.members]
        return (
            len({(w.shape[1], w.dtype, w.device) for w in weights}) == 1 and [w.shape[0] for w in weights] == self.sizes
        )

    def intact(self) -> bool:
        """Whether every member's weight is still its view of the group's tensor (a deep copy, a cast to another dtype
        or a move to another device gives the members new tensors)."""
        storage = self.weight.untyped_storage().data_ptr()
        for m, offset in zip(self.members, self.offsets):
            w = m.base_layer.weight
            if (
                w.untyped_storage().data_ptr() != storage
                or w.storage_offset() != offset
                or w.dtype != self.weight.dtype
            ):
                return False
        return True

    def adapter(self, x: torch.Tensor) -> str | None:
        """The one active adapter when the whole group can run fused on `x`, else None."""
        first = self.members[0]
        adapters = first.active_adapters
        if len(adapters) != 1:
            return None
        name = adapters[0]
        for m in self.members:
            if (
                m.disable_adapters
                or m.merged
                or name not in m.lora_A
                or name in getattr(m, "lora_variant", {})
                or not isinstance(m.lora_dropout[name], torch.nn.Identity)
                or m.active_adapters != adapters
            ):
                return None
        if x.dtype != first.base_layer.weight.dtype and not torch.is_autocast_enabled(x.device.type):
            return None  # stored_linear_forward's case: each member rounds as autocast would
        if not self.intact():
            if not self.fusable_again():
                return None
            self.fuse()  # a deep copy (nn.Parameter's copies its tensor alone) or weights replaced: fused anew, once
        return name

    def forward(self, x: torch.Tensor, name: str) -> list[torch.Tensor]:
        """Every member's output for `x`: base(x) + scaling * A(x) B^T, as fastpath's fused forward forms it.

        With one scaling for the group (one LoRA config: alpha / r), the B products are one too: h (M, sum r)
        times the block-diagonal of the B matrices (sum r, sum out); the off-diagonal blocks are zeros, whose
        products add exact zeros. Each output is then a slice of one (M, sum out) tensor, as the sampler's fused
        q|k|v is."""
        base = torch.nn.functional.linear(x, self.weight, self.bias)
        a = torch.cat([m.lora_A[name].weight for m in self.members])
        h = torch.nn.functional.linear(x, a)
        scales = {m.scaling[name] for m in self.members}
        if len(scales) == 1:
            b = torch.block_diag(*(m.lora_B[name].weight for m in self.members))
            out = torch.addmm(base.reshape(-1, base.shape[-1]), h.reshape(-1, h.shape[-1]), b.t(), alpha=scales.pop())
            return list(out.view(*x.shape[:-1], -1).split(self.sizes, -1))
        ranks = [m.lora_A[name].weight.shape[0] for m in self.members]
        outs = []
        for m, part, hi, n in zip(self.members, base.split(self.sizes, -1), h.split(ranks, -1), self.sizes):
            out = torch.addmm(
                part.reshape(-1, n), hi.reshape(-1, hi.shape[-1]), m.lora_B[name].weight.t(), alpha=m.scaling[name]
            )
            outs.append(out.view(*x.shape[:-1], n))
        return outs


def _shared_forward(self, x: torch.Tensor, *args, **kwargs) -> torch.Tensor:
    group: SharedInput = self._rlvr_group
    i = self._rlvr_member
    pending = group.pending
    if pending is not None and pending[0] is x and i in pending[1] and not args and not kwargs:
        out = pending[1].pop(i)
        if not pending[1]:
            group.pending = None
        return out
    name = None if args or kwargs else group.adapter(x)
    if name is None:
        return self._rlvr_own_forward(x, *args, **kwargs)
    outs = group.forward(x, name)
    # the tensor itself is the key: held here, it cannot be freed and its id reused before the others are called
    group.pending = (x, {j: o for j, o in enumerate(outs) if j != i})
    return outs[i]


def fuse_shared_inputs(model) -> int:
    """Fuse each group of GROUPS whose members are all LoRA layers over a frozen nn.Linear of one input width and dtype
    (and all or none with a bias); returns how many groups. Applied once: a second call finds none."""
    n = 0
    for parent in list(model.modules()):
        for names in GROUPS:
            members: list[Any] = [getattr(parent, a, None) for a in names]
            if not all(_eligible(m) for m in members):
                continue
            weights = [m.base_layer.weight for m in members]
            biases = [m.base_layer.bias is not None for m in members]
            if len({(w.shape[1], w.dtype, w.device) for w in weights}) != 1 or len(set(biases)) != 1:
                continue
            group = SharedInput(members)
            for i, m in enumerate(members):
                m._rlvr_group, m._rlvr_member = group, i
                m._rlvr_own_forward = m.forward
                m.forward = types.MethodType(_shared_forward, m)
            n += 1
    return n


def _eligible(m) -> bool:
    base = getattr(m, "base_layer", None)
    return (
        hasattr(m, "lora_A")
        and isinstance(base, torch.nn.Linear)
        and not base.weight.requires_grad
        and not hasattr(m, "_rlvr_group")
    )


def separate_shared_inputs(model) -> int:
    """Give each fused member's frozen weight (and bias) its own storage again and its own forward back; returns how
    many members (the A/B of update_profile.py undoes and redoes the groups between updates)."""
    n = 0
    for m in model.modules():
        if hasattr(m, "_rlvr_group"):
            m.base_layer.weight.data = m.base_layer.weight.data.clone()
            if m.base_layer.bias is not None:
                m.base_layer.bias.data = m.base_layer.bias.data.clone()
            m.forward = m._rlvr_own_forward
            del m._rlvr_group, m._rlvr_member, m._rlvr_own_forward
            n += 1
    return n
