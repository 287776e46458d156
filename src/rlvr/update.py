"""The policy update of one step: log-probs of the kept rows, the preset's loss, backward, clip, step.

Rows are sorted by length and cut into micro-batches trimmed to their own longest completion, instead of
padding everything to the batch's longest. The loss of each micro-batch is normalised by the counts of the
whole batch (num_tokens, num_seqs), so summing micro-batch gradients gives exactly the full-batch gradient.
Rows whose advantage is 0 (zero-variance groups) add nothing to the surrogate's gradient, so without a KL
term their forward is skipped; they still count in the denominators, so the loss is the same either way.
"""

from __future__ import annotations

import contextlib
from types import SimpleNamespace

import torch

from rlvr.logprobs import shared_prompt_logprobs
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


def micro_batches(rows: list[int], lengths: list[int], size: int, groups: list[int] | None = None) -> list[list[int]]:
    """Rows in chunks of at most `size`, longest first. With `groups`, the rows of a group stay together
    where they fit (they share one prompt forward), groups ordered by their longest row."""
    if groups is None:
        order = sorted(rows, key=lambda r: -lengths[r])
        return [order[i:i + size] for i in range(0, len(order), size)]
    by_group: dict[int, list[int]] = {}
    for r in rows:
        by_group.setdefault(groups[r], []).append(r)
    chunks: list[list[int]] = []
    for members in sorted(by_group.values(), key=lambda m: -max(lengths[r] for r in m)):
        members = sorted(members, key=lambda r: -lengths[r])
        while members:
            if not chunks or len(chunks[-1]) == size:
                chunks.append([])
            room = size - len(chunks[-1])
            chunks[-1] += members[:room]
            members = members[room:]
    return chunks


def _autocast(kind: str):
    if kind == "bfloat16":
        return torch.autocast("cpu", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def _forward(model, batch, rows, pad_id, temperature, autocast):
    """(logp (b, t) float32, t) for the given rows, trimmed to their longest completion t."""
    t = max(int(batch.lengths[rows].max()), 1)
    with _autocast(autocast):
        # The rows of a group share their prompt: its forward runs once per micro-batch, not once per row.
        logp = shared_prompt_logprobs(model, [batch.prompt_ids[r] for r in rows], batch.completion_ids[rows, :t],
                                      batch.mask[rows, :t], pad_id=pad_id, temperature=temperature)
    return logp, t


@torch.no_grad()
def reference_logprobs(model, ref_model, batch, rows, pad_id, temperature, autocast):
    """Log-probs under the reference: the base model with the LoRA adapter switched off, or a frozen copy."""
    ctx = model.disable_adapter() if ref_model is None else contextlib.nullcontext()
    with ctx:
        logp, _ = _forward(ref_model or model, batch, rows, pad_id, temperature, autocast)
    return logp


def _as_float(norm) -> float:
    """The clipped total norm; under FSDP a replicated DTensor, whose full value every rank holds."""
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


def _idle_batch(pad_id: int):
    """One 1-token row, for the zero-weight micro-batches a rank runs under FSDP when it has fewer than others."""
    return SimpleNamespace(prompt_ids=[[pad_id]], completion_ids=torch.full((1, 1), pad_id), mask=torch.ones(1, 1),
                           lengths=torch.ones(1, dtype=torch.long))


def update_policy(model, optimizer, batch, algo, *, pad_id: int, temperature: float, micro_batch_size: int,
                  max_grad_norm: float, autocast: str, norm_len: int, mu: int = 1, ref_model=None, comm=None) -> dict:
    """One pass (or mu passes) of gradient steps over the batch; returns floats for the metrics line.
    With `comm` (a rlvr.distributed.Comm) this rank's batch is its share of a global batch; the returned
    stats are those of the global batch."""
    b = len(batch)
    num_tokens, num_seqs = batch_counts(batch.mask)
    if comm is not None:  # data parallel: normalise by the global batch's counts
        num_tokens, num_seqs = comm.all_sum(num_tokens, num_seqs)
    active = [r for r in range(b) if batch.mask[r].sum() > 0 and (batch.advantages[r] != 0 or algo.beta > 0)]
    chunks = micro_batches(active, batch.lengths.tolist(), micro_batch_size, batch.group_ids.tolist())
    trainable = [p for p in model.parameters() if p.requires_grad]
    # FSDP: every forward/backward is a collective; a rank with fewer micro-batches adds zero-weight ones
    idle, n_idle = _idle_batch(pad_id), comm.idle_micro_batches(len(chunks)) if comm is not None else 0
    old = None
    if mu > 1:  # several passes: the ratio is against the policy that sampled, fixed before the first pass
        old = {}
        for c in chunks:
            with oom_report(batch, c, micro_batch_size):  # reliability: name the shape that ran out of memory
                old[tuple(c)] = _forward(model, batch, c, pad_id, temperature, autocast)[0].detach()
        for _ in range(n_idle):
            _forward(model, idle, [0], pad_id, temperature, autocast)
    totals = {"loss": 0.0, "clip/low_frac": 0.0, "clip/high_frac": 0.0, "kl": 0.0, "train_tokens": 0}
    grad_norm = 0.0
    for _pass in range(mu):
        optimizer.zero_grad(set_to_none=True)
        pass_loss = 0.0
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
            pass_loss += float(loss.detach())
            totals["train_tokens"] += int(tokens)
            for k in ("clip/low_frac", "clip/high_frac", "kl"):
                totals[k] += float(stats.get(k, 0.0)) * tokens
        for _ in range(n_idle):  # same collectives in the same order as a real micro-batch, zero gradient
            logp, _ = _forward(model, idle, [0], pad_id, temperature, autocast)
            if algo.beta > 0:
                reference_logprobs(model, ref_model, idle, [0], pad_id, temperature, autocast)
            (logp.sum() * 0.0).backward()
        n_chunks = len(chunks)
        if comm is not None:  # data parallel: global loss; the sum of the ranks' gradients is the global one
            pass_loss, n_chunks = comm.all_sum(pass_loss, n_chunks)
            comm.sum_grads(trainable)
        totals["loss"] += pass_loss
        grad_norm = _as_float(torch.nn.utils.clip_grad_norm_(trainable, max_grad_norm)) if trainable else 0.0
        if not torch.isfinite(torch.tensor([totals["loss"], grad_norm])).all():
            optimizer.zero_grad(set_to_none=True)
            return {**totals, "grad_norm": grad_norm, "skipped": 1}
        if n_chunks:
            optimizer.step()
    n_active = len(active)
    if comm is not None:  # data parallel: token-weighted stats of the global batch
        keys = ("clip/low_frac", "clip/high_frac", "kl", "train_tokens")
        *sums, n_active = comm.all_sum(*(totals[k] for k in keys), n_active)
        totals.update(zip(keys, sums))
    out = {"loss": totals["loss"] / mu, "grad_norm": grad_norm, "skipped": 0,
           "train_tokens": totals["train_tokens"], "active_rows": n_active}
    for k in ("clip/low_frac", "clip/high_frac", "kl"):
        out[k] = totals[k] / max(totals["train_tokens"], 1)
    if algo.beta == 0:
        out.pop("kl")
    return out
