"""The one builder of the trainable policy, from the config: used by the RL recipe, SFT and the bench."""

from __future__ import annotations

import torch

from rlvr.config import ConfigError
from rlvr.policy.fastpath import prepare_for_update
from rlvr.policy.load import add_lora, load_policy


def load_seeded(cfg, policy=None):
    """(model, tokenizer) of `cfg.model` (or the given pair), then torch's global RNG seeded, so that the LoRA
    initialisation that follows depends on the seed alone. Seeded after loading, not before: the first load of the
    embedded default converts its GGUF file, which draws from the global RNG, and a run on a fresh cache
    initialised its adapter differently from every later run with the same seed."""
    model, tokenizer = policy or load_policy(cfg.model.name, cfg.model.dtype)
    model.to(policy_device(cfg.model.device))  # before sampling (SFT's rejection sampling) and before the adapter
    torch.manual_seed(cfg.seed)
    return model, tokenizer


def with_adapter(model, cfg):
    """The model wrapped with `cfg.model.lora`'s fresh LoRA adapter when it is enabled, else the model itself."""
    if not cfg.model.lora.enabled:
        return model
    lc = cfg.model.lora
    return add_lora(model, r=lc.r, alpha=lc.alpha, dropout=lc.dropout, target_modules=lc.target_modules)


def policy_device(asked: str) -> torch.device:
    """Where the trainer's policy lives for `model.device`: "auto" is the current CUDA device when torch sees one
    (under torchrun, the rank's own: rlvr.training.distributed sets it), else the CPU. "cuda" without a CUDA
    device is refused, before any run directory is made (rlvr.training.step.check_components and rlvr sft ask)."""
    if asked == "cpu" or (asked == "auto" and not torch.cuda.is_available()):
        return torch.device("cpu")
    if not torch.cuda.is_available():
        raise ConfigError(
            f"model.device = {asked!r} but torch {torch.__version__} sees no CUDA device "
            f"(built for CUDA: {torch.version.cuda or 'no'}); set model.device: cpu or auto"
        )
    return torch.device("cuda", torch.cuda.current_device())


def make_trainable(model, cfg):
    """The LoRA adapter when `model.lora.enabled`, then the update's fast path (`train.autocast`, attention,
    checkpointing; the attention looks at the device load_seeded put the model on); returns the model to train
    (a peft wrapper with LoRA). peft initialises an adapter on the CPU and moves it to its layer's device, so a
    seed gives one adapter wherever the run trains."""
    model = with_adapter(model, cfg)
    prepare_for_update(model, cfg.train)
    return model


def build_policy(cfg, policy=None):
    """(model, tokenizer) ready to train: loaded (or `policy`, a (model, tokenizer) pair), LoRA, fast path."""
    model, tokenizer = load_seeded(cfg, policy)
    return make_trainable(model, cfg), tokenizer
