"""Backend "hf": transformers' `generate` on the sampler's own copy of the policy.

Simple and architecture-agnostic; the reference the fast backend is tested against. Prompts are
left-padded into one batch and each is repeated n times (num_return_sequences), so every sample
re-runs its prompt: correct, but not fast.

Each sampled token's log-probability is read as generate runs (_SampledLogProbs), one step's (rows, vocab) at a
time: `output_logits` would keep (rows, T, vocab), 15.6 GB in float32 for 64 rows of 400 tokens of Qwen's 152k
vocabulary, and stacking it doubled that (an evaluation of the 0.5B was killed at 24 GB).
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


class _SampledLogProbs:
    """A logits processor placed before any warper: it sees each step's raw logits, and when the next step shows
    which token was drawn (the last of input_ids), keeps that token's log-probability under logits / temperature.
    `finish(sequences)` takes the last step's and returns (rows, T)."""

    def __init__(self, temperature: float):
        self.temperature = temperature
        self.last: torch.Tensor | None = None  # the previous step's log-probabilities, (rows, vocab)
        self.taken: list[torch.Tensor] = []

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        if self.last is not None:
            self._take(input_ids[:, -1])
        self.last = (scores.float() / self.temperature).log_softmax(-1)
        return scores

    def _take(self, tokens: torch.Tensor) -> None:
        assert self.last is not None
        # kept where generate runs (a GPU's); moved to the CPU once, in finish, not a sync at every step
        self.taken.append(self.last.gather(-1, tokens[:, None].to(self.last.device)).squeeze(-1))

    def finish(self, sequences: torch.Tensor) -> torch.Tensor:
        if self.last is None:  # nothing was generated
            return torch.zeros(sequences.shape[0], 0)
        self._take(sequences[:, -1])
        return torch.stack(self.taken, 1).cpu()


def _warpers(temperature: float, top_p: float, top_k: int):
    """The recorder, then temperature, top-k and top-p in generate's own order: passed by us so that generate adds
    none of its own (it would put ours after them, and the recorder would see filtered logits)."""
    from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

    if temperature <= 0:  # greedy: the argmax of the raw logits, whose log-probabilities are untempered
        recorder = _SampledLogProbs(1.0)
        return recorder, LogitsProcessorList([recorder])
    recorder = _SampledLogProbs(temperature)
    warpers: list = [TemperatureLogitsWarper(temperature)] if temperature != 1.0 else []
    warpers += [TopKLogitsWarper(top_k)] if top_k else []
    warpers += [TopPLogitsWarper(top_p)] if top_p < 1.0 else []
    return recorder, LogitsProcessorList([recorder, *warpers])


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
        recorder, processors = _warpers(temperature, top_p, top_k)
        kwargs = dict(
            # rows repeated by hand (not num_return_sequences, which greedy decoding refuses)
            input_ids=ids.repeat_interleave(n, 0).to(self.device),
            attention_mask=attn.repeat_interleave(n, 0).to(self.device),
            max_new_tokens=max_new_tokens,
            do_sample=sampling,
            eos_token_id=self.stop_ids,
            pad_token_id=self.pad_id,
            logits_processor=processors,
            # neutral values so neither generate nor the model's generation_config (often top_k=50) adds a warper
            temperature=1.0 if sampling else None,
            top_k=0 if sampling else None,
            top_p=1.0 if sampling else None,
            repetition_penalty=None,
            min_p=None,
        )
        gpus = [self.device.index or 0] if self.device.type == "cuda" else []  # generate draws there on a GPU
        with torch.random.fork_rng(devices=gpus, enabled=generator is not None):
            if generator is not None:  # generate() draws from the global RNG: seed it from ours, then restore
                torch.manual_seed(int(torch.randint(0, 2**62, (1,), generator=generator)))
            sequences = self.model.generate(**kwargs)
        new = sequences[:, width:].cpu()
        logp = recorder.finish(sequences)
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
