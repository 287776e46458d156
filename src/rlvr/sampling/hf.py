"""Backend "hf": transformers' `generate` on the sampler's own copy of the policy.

Simple and architecture-agnostic; the reference the fast backend is tested against. Prompts are
left-padded into one batch and each is repeated n times (num_return_sequences), so every sample
re-runs its prompt: correct, but not fast.
"""

from __future__ import annotations

import time

import torch

from rlvr.policy.load import model_device

from .rollouts import LocalSampler, Rollouts, cut_at_stop, pack_rollouts
from .weights import merged_state_dict, plain_config, tied_keys


def build_copy(model, dtype: torch.dtype):
    """A fresh transformers model of the policy's architecture, in eval mode, holding no gradients, on the policy's
    device (a trainer on a GPU samples on it)."""
    from transformers import AutoModelForCausalLM

    copy = AutoModelForCausalLM.from_config(plain_config(model), dtype=dtype)
    copy.eval().requires_grad_(False)
    return copy.to(model_device(model))


class HFSampler(LocalSampler):
    def __init__(self, model, tokenizer, *, stop_ids: list[int], dtype: str = "bfloat16", threads: int | None = None):
        super().__init__(tokenizer, stop_ids=stop_ids, dtype=dtype, threads=threads)
        self.model = build_copy(model, self.dtype)
        self.device = model_device(self.model)
        self.sync(model)

    def sync(self, model) -> None:
        state = merged_state_dict(model)
        missing, unexpected = self.model.load_state_dict(state, strict=False)
        missing = [k for k in missing if k not in tied_keys(self.model)]  # e.g. a head tied to the embedding
        if missing or unexpected:
            raise ValueError(
                f"sampler copy does not match the policy: missing={missing[:5]} unexpected={unexpected[:5]}"
            )
        self.model.to(self.dtype)

    def _generate(self, prompt_ids, n, max_new_tokens, temperature, top_p, top_k, generator) -> Rollouts:
        t0 = time.perf_counter()
        width = max(len(p) for p in prompt_ids)
        ids = torch.full((len(prompt_ids), width), self.pad_id, dtype=torch.long)
        attn = torch.zeros_like(ids)
        for i, p in enumerate(prompt_ids):  # left padding: every prompt ends at the same column
            ids[i, width - len(p) :] = torch.tensor(p)
            attn[i, width - len(p) :] = 1
        sampling = temperature > 0
        kwargs = dict(
            # rows repeated by hand (not num_return_sequences, which greedy decoding refuses)
            input_ids=ids.repeat_interleave(n, 0).to(self.device),
            attention_mask=attn.repeat_interleave(n, 0).to(self.device),
            max_new_tokens=max_new_tokens,
            do_sample=sampling,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            return_dict_in_generate=True,
            output_logits=True,
            # explicit values so the model's own generation_config (often top_k=50) cannot leak in
            temperature=temperature if sampling else None,
            top_k=top_k if sampling else None,
            top_p=top_p if sampling else None,
            repetition_penalty=None,
            min_p=None,
        )
        gpus = [self.device.index or 0] if self.device.type == "cuda" else []  # generate draws there on a GPU
        with torch.random.fork_rng(devices=gpus, enabled=generator is not None):
            if generator is not None:  # generate() draws from the global RNG: seed it from ours, then restore
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
            out = self.model.generate(**kwargs)
        new = out.sequences[:, width:]
        logits = torch.stack(out.logits, dim=1).float()  # (B, T, V) raw, before any warper
        if sampling:
            logits = logits / temperature
        new, logp = new.cpu(), logits.log_softmax(-1).gather(-1, new[..., None]).squeeze(-1).cpu()
        rows, logps, finish = [], [], []
        stops = set(self.stop_ids)
        for b in range(new.shape[0]):
            toks, why = cut_at_stop(new[b].tolist(), stops)
            rows.append(toks)
            logps.append(logp[b, : len(toks)])
            finish.append(why)
        ro = pack_rollouts(prompt_ids, n, rows, logps, finish, self.pad_id, self.tokenizer)
        ro.num_prompt_tokens = n * sum(len(p) for p in prompt_ids)
        ro.seconds = time.perf_counter() - t0
        return ro
