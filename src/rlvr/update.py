"""The policy update of one step: log-probs of the kept rows, the preset's loss, backward, clip, step.

Rows are sorted by length and cut into micro-batches trimmed to their own longest completion, instead of
padding everything to the batch's longest. The loss of each micro-batch is normalised by the counts of the
whole batch (num_tokens, num_seqs), so summing micro-batch gradients gives exactly the full-batch gradient.
Rows whose advantage is 0 (zero-variance groups) add nothing to the surrogate's gradient, so without a KL
term their forward is skipped; they still count in the denominators, so the loss is the same either way.
"""

from __future__ import annotations

import contextlib

import torch

from rlvr.logprobs import completion_logprobs
from rlvr.losses import batch_counts, policy_loss


class MicroBatchOOM(RuntimeError):
    """Out of memory in one micro-batch; the message names its shape and the setting that shrinks it."""


def _is_oom(e: BaseException) -> bool:
    # torch raises torch.OutOfMemoryError on accelerators, a plain RuntimeError from the CPU allocator.
    text = str(e).lower()
    return isinstance(e, (MemoryError, torch.OutOfMemoryError)) or "out of memory" in text \
        or "can't allocate memory" in text


@contextlib.contextmanager
def oom_report(batch, rows: list[int], micro_batch_size: int):
    """Turn an out-of-memory inside a micro-batch's forward/backward into MicroBatchOOM naming its shape
    (rows x prompt + completion tokens) and the hint; any other error passes through unchanged."""
    try:
        yield
    except (RuntimeError, MemoryError) as e:
        if not _is_oom(e):
            raise
        lp = max(len(batch.prompt_ids[r]) for r in rows)
        t = max(int(batch.lengths[rows].max()), 1)
        raise MicroBatchOOM(
            f"out of memory in a micro-batch of {len(rows)} rows x {lp + t} tokens ({lp} prompt + {t} completion); "
            f"lower train.micro_batch_size (now {micro_batch_size}) or rollout.max_new_tokens ({type(e).__name__}: "
            f"{str(e)[:200]})") from e


def micro_batches(rows: list[int], lengths: list[int], size: int) -> list[list[int]]:
    """Rows sorted by length (longest first), in chunks of `size`."""
    order = sorted(rows, key=lambda r: -lengths[r])
    return [order[i:i + size] for i in range(0, len(order), size)]


def _autocast(kind: str):
    if kind == "bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _forward(model, batch, rows, pad_id, temperature, autocast):
    """(logp (b, t) float32, t) for the given rows, trimmed to their longest completion t."""
    t = max(int(batch.lengths[rows].max()), 1)
    with _autocast(autocast):
        logp, _ = completion_logprobs(model, [batch.prompt_ids[r] for r in rows], batch.completion_ids[rows, :t],
                                      batch.mask[rows, :t], pad_id=pad_id, temperature=temperature)
    return logp, t


@torch.no_grad()
def reference_logprobs(model, ref_model, batch, rows, pad_id, temperature, autocast):
    """Log-probs under the reference: the base model with the LoRA adapter switched off, or a frozen copy."""
    ctx = model.disable_adapter() if ref_model is None else contextlib.nullcontext()
    with ctx:
        logp, _ = _forward(ref_model or model, batch, rows, pad_id, temperature, autocast)
    return logp


def update_policy(model, optimizer, batch, algo, *, pad_id: int, temperature: float, micro_batch_size: int,
                  max_grad_norm: float, autocast: str, norm_len: int, mu: int = 1, ref_model=None) -> dict:
    """One pass (or mu passes) of gradient steps over the batch; returns floats for the metrics line."""
    b = len(batch)
    num_tokens, num_seqs = batch_counts(batch.mask)
    active = [r for r in range(b) if batch.mask[r].sum() > 0 and (batch.advantages[r] != 0 or algo.beta > 0)]
    chunks = micro_batches(active, batch.lengths.tolist(), micro_batch_size)
    trainable = [p for p in model.parameters() if p.requires_grad]
    old = None
    if mu > 1:  # several passes: the ratio is against the policy that sampled, fixed before the first pass
        old = {}
        for c in chunks:
            with oom_report(batch, c, micro_batch_size):  # reliability: name the shape that ran out of memory
                old[tuple(c)] = _forward(model, batch, c, pad_id, temperature, autocast)[0].detach()
    totals = {"loss": 0.0, "clip/low_frac": 0.0, "clip/high_frac": 0.0, "kl": 0.0, "train_tokens": 0}
    grad_norm = 0.0
    for _pass in range(mu):
        optimizer.zero_grad(set_to_none=True)
        for rows in chunks:
            with oom_report(batch, rows, micro_batch_size):  # reliability: name the shape that ran out of memory
                logp, t = _forward(model, batch, rows, pad_id, temperature, autocast)
                mask = batch.mask[rows, :t]
                ref = reference_logprobs(model, ref_model, batch, rows, pad_id, temperature, autocast) if algo.beta > 0 else None
                loss, stats = policy_loss(logp, old[tuple(rows)] if old else None, batch.advantages[rows], mask,
                                          ref_logp=ref, norm_len=norm_len, num_tokens=num_tokens, num_seqs=num_seqs,
                                          **algo.loss_kwargs())
                loss.backward()
            tokens = float(mask.sum())
            totals["loss"] += float(loss.detach())
            totals["train_tokens"] += int(tokens)
            for k in ("clip/low_frac", "clip/high_frac", "kl"):
                totals[k] += float(stats.get(k, 0.0)) * tokens
        grad_norm = float(torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm)) if trainable else 0.0
        if not torch.isfinite(torch.tensor([totals["loss"], grad_norm])).all():
            optimizer.zero_grad(set_to_none=True)
            return {**totals, "grad_norm": grad_norm, "skipped": 1}
        if chunks:
            optimizer.step()
    out = {"loss": totals["loss"] / mu, "grad_norm": grad_norm, "skipped": 0,
           "train_tokens": totals["train_tokens"], "active_rows": len(active)}
    for k in ("clip/low_frac", "clip/high_frac", "kl"):
        out[k] = totals[k] / max(totals["train_tokens"], 1)
    if algo.beta == 0:
        out.pop("kl")
    return out
