"""A distillation teacher in process, scoring the policy's own sampled tokens (rlvr.algorithms.distill).

Two forms, one method: `logprobs(batch, settings) -> (B, T)`, the teacher's log-probs of every row's completion
tokens, computed as the update computes the policy's (rlvr.policy.update.scored_logprobs: each prompt once, the
update's autocast, the sampler's temperature), 0 off the mask.

- AdapterTeacher: a LoRA adapter trained on the policy's own base model, loaded beside the policy's adapter. Scoring
  switches the active adapter on the same base weights: no second model in memory, one prefill per step. The
  policy's adapter is active again (and alone trainable) as soon as the scores are out.
- ModelTeacher: any model with the policy's tokenizer, loaded frozen on the policy's device.

Which one a config names, and the refusals, are rlvr.training.teacher's.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from rlvr.algorithms.step_batch import StepBatch
from rlvr.policy.load import peft_quietly
from rlvr.policy.update import UpdateSettings, scored_logprobs

TEACHER = "teacher"  # the name the teacher's adapter loads under, beside the policy's own


class AdapterTeacher:
    """The adapter at `path` (PEFT format, trained on the policy's base), loaded into `model` (the policy: a peft
    model) as a frozen second adapter."""

    def __init__(self, model, path: str, label: str):
        with peft_quietly():
            model.load_adapter(str(path), adapter_name=TEACHER, is_trainable=False)
        self.model, self.label = model, label

    def logprobs(self, batch: StepBatch, s: UpdateSettings) -> torch.Tensor:
        with switched(self.model, TEACHER):
            return scored_logprobs(self.model, batch, s)


class ModelTeacher:
    """A whole model (a transformers model with the policy's tokenizer), frozen, moved to `device`."""

    def __init__(self, model, device: torch.device, label: str):
        self.model = model.to(device).eval().requires_grad_(False)
        self.label = label

    def logprobs(self, batch: StepBatch, s: UpdateSettings) -> torch.Tensor:
        return scored_logprobs(self.model, batch, s)


@contextlib.contextmanager
def switched(model, name: str) -> Iterator[None]:
    """`model` (a peft model) computes with its adapter `name` inside; after, the adapter it had, and every weight's
    requires_grad as it was (peft's set_adapter marks the active adapter's weights trainable: the teacher's must
    stay frozen, the policy's trainable)."""
    was = model.active_adapter
    flags = [(p, p.requires_grad) for p in model.parameters()]
    model.set_adapter(name)
    try:
        yield
    finally:
        model.set_adapter(was)
        for p, flag in flags:
            p.requires_grad_(flag)


__all__ = ["TEACHER", "AdapterTeacher", "ModelTeacher", "switched"]
