"""The policy update of one step: log-probs of the kept rows, the preset's loss, backward, clip, step.

Every distinct prompt runs through the model once a pass (logprobs.PromptPass); the completions, sorted by
length across groups, are cut into micro-batches trimmed to their own longest row (padding is what sorting
leaves, not the batch's longest), each attending to its rows' prompts through the shared keys and values.
The loss of each micro-batch is normalised by the counts of the whole batch (num_tokens, num_seqs), so the
micro-batch gradients, plus the prompt pass's backward at the end, give exactly the full-batch gradient.
Rows whose advantage is 0 (zero-variance groups) add nothing to the surrogate's gradient, so without a KL
term their forward is skipped; they still count in the denominators, so the loss is the same either way.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any, Protocol

import torch

from rlvr.algorithms.correction import corrects
from rlvr.algorithms.losses import batch_counts, policy_loss
from rlvr.algorithms.mismatch import DEFAULT_CAP, empty_sums, merge_sums, mismatch_figures, mismatch_sums
from rlvr.algorithms.presets import Algorithm
from rlvr.algorithms.step_batch import StepBatch
from rlvr.config import Config
from rlvr.policy.logprobs import PromptPass, real_tokens
from rlvr.policy.logprobs import autocast as autocast_on
from rlvr.policy.memory import oom_report, returns_freed_memory


class Collectives(Protocol):
    """What the update asks of data parallel: rlvr.training.comm.Comm's collectives (training comes later in the
    package order, so the update names the four it calls rather than importing the class)."""

    def all_sum(self, *values: Any) -> list[Any]: ...
    def all_gather(self, obj: Any) -> list[Any]: ...
    def sum_grads(self, params: list[torch.nn.Parameter]) -> None: ...
    def idle_micro_batches(self, n: int) -> int: ...


def _chunk_oom(
    batch: StepBatch, rows: list[int], micro_batch_size: int, micro_batch_tokens: int
) -> contextlib.AbstractContextManager[None]:
    lp = max(len(batch.prompt_ids[r]) for r in rows)
    t = max(int(batch.lengths[rows].max()), 1)
    return oom_report(
        f"a micro-batch of {len(rows)} rows x {lp + t} tokens ({lp} prompt + {t} completion)",
        f"lower train.micro_batch_size (now {micro_batch_size}), train.micro_batch_tokens (now "
        f"{micro_batch_tokens}; 0 = no cap) or rollout.max_new_tokens",
    )


# What one more micro-batch costs beyond its tokens, in tokens: it sets where splitting a sorted batch stops
# paying. On the default model (bf16, 2 cores) a chunk's forward + backward took 0.33 s + 2.2 ms a token,
# i.e. ~150 tokens (benchmarks/bench_chunk_cost.py; docs/performance.md).
CHUNK_OVERHEAD_TOKENS = 150


def micro_batches(
    rows: list[int], lengths: list[int], size: int, max_tokens: int = 0, overhead: int = CHUNK_OVERHEAD_TOKENS
) -> list[list[int]]:
    """Rows sorted longest first and cut into chunks of at most `size` rows and, with max_tokens > 0, at most
    max_tokens padded tokens (rows x the chunk's longest; a longer row goes alone), where the cuts minimise the
    padded tokens plus `overhead` tokens a chunk: short rows do not ride along padded to a long one, and a
    chunk is not split for a few tokens of padding. Exact dynamic programme."""
    order = sorted(rows, key=lambda r: -lengths[r])
    n = len(order)
    best, cut = [0] + [float("inf")] * n, [0] * (n + 1)
    for j in range(1, n + 1):  # best[j]: cheapest split of order[:j]; a chunk order[i:j] is as long as order[i]
        for i in range(max(0, j - size), j):
            if max_tokens > 0 and j - i > 1 and (j - i) * lengths[order[i]] > max_tokens:
                continue
            cost = best[i] + (j - i) * max(lengths[order[i]], 1) + overhead
            if cost < best[j]:
                best[j], cut[j] = cost, i
    chunks: list[list[int]] = []
    j = n
    while j:
        chunks.append(order[cut[j] : j])
        j = cut[j]
    return chunks[::-1]


_IDLE = None  # a chunk that stands for the one-token zero-weight row of an idle FSDP rank
Chunk = list[int] | None  # a micro-batch's rows, or _IDLE


def _prompt_pass(
    model: torch.nn.Module,
    batch: StepBatch,
    chunks: list[Chunk],
    pad_id: int,
    autocast: str,
    split_graph: bool = False,
) -> PromptPass | None:
    """Pass 1 of the forward: the prompts of the chunks' rows, each once (an idle rank runs a 1-token one)."""
    if not chunks:
        return None
    prompts = [batch.prompt_ids[r] for c in chunks if c is not _IDLE for r in c] or [[pad_id]]
    shape = f"the prompt pass ({len(set(map(tuple, prompts)))} prompts x {max(map(len, prompts))} tokens)"
    with oom_report(shape, "lower rollout.prompts_per_step"), autocast_on(model, autocast):
        return PromptPass(model, prompts, pad_id=pad_id, split_graph=split_graph)


def _chunk_logprobs(
    model: torch.nn.Module, prompts: PromptPass, batch: StepBatch, rows: Chunk, temperature: float, autocast: str
) -> tuple[torch.Tensor, int]:
    """(logp (b, t) float32, t) for the chunk's rows, trimmed to their longest completion t; for _IDLE, one
    padding token after the pass's first prompt."""
    if rows is _IDLE:
        ids = torch.zeros(1, 1, dtype=torch.long)
        with autocast_on(model, autocast):
            return prompts.logprobs(model, [next(iter(prompts.index))], ids, torch.ones(1, 1)), 1
    t = max(int(batch.lengths[rows].max()), 1)
    with autocast_on(model, autocast):
        logp = prompts.logprobs(
            model,
            [batch.prompt_ids[r] for r in rows],
            batch.completion_ids[rows, :t],
            batch.mask[rows, :t],
            temperature=temperature,
            attend=real_tokens(batch.lengths[rows], t),  # an episode's environment ids are seen, not scored
        )
    return logp, t


Fixed = dict[tuple[int, ...], torch.Tensor]  # a chunk's rows -> its log-probs (b, t), fixed over the passes


@torch.no_grad()
def fixed_logprobs(
    model: torch.nn.Module, batch: StepBatch, chunks: list[Chunk], pad_id: int, temperature: float, autocast: str
) -> Fixed:
    """Log-probs that stay fixed over the step's passes (the sampling policy's for mu > 1, the reference's),
    by chunk (keyed by the tuple of its rows); an _IDLE chunk is computed for the collectives, not kept."""
    prompts = _prompt_pass(model, batch, chunks, pad_id, autocast)
    out: Fixed = {}
    if prompts is None:  # no chunk
        return out
    for rows in chunks:
        logp, _ = _chunk_logprobs(model, prompts, batch, rows, temperature, autocast)
        if rows is not _IDLE:
            out[tuple(rows)] = logp
    return out


@torch.no_grad()
def scored_logprobs(model: torch.nn.Module, batch: StepBatch, s: UpdateSettings) -> torch.Tensor:
    """(B, T) float32 on the batch's device: `model`'s log-probs of each row's completion tokens, 0 off the mask,
    computed as the update computes its own (each prompt once, rows by length in micro-batches, the update's
    autocast, the sampler's temperature). A distillation teacher's scoring (rlvr.training.teacher)."""
    rows = [r for r in range(len(batch)) if batch.mask[r].sum() > 0]
    chunks: list[Chunk] = list(micro_batches(rows, batch.lengths.tolist(), s.micro_batch_size, s.micro_batch_tokens))
    out = torch.zeros_like(batch.sampler_logp, dtype=torch.float32)
    for key, logp in fixed_logprobs(model, batch, chunks, s.pad_id, s.temperature, s.autocast).items():
        out[list(key), : logp.shape[1]] = logp.to(out.device, torch.float32)
    return torch.where(batch.mask > 0, out, torch.zeros_like(out))


def reference_logprobs(
    model: torch.nn.Module,
    ref_model: torch.nn.Module | None,
    batch: StepBatch,
    chunks: list[Chunk],
    pad_id: int,
    temperature: float,
    autocast: str,
) -> Fixed:
    """Log-probs under the reference: the base model with the LoRA adapter switched off, or a frozen copy."""
    # no reference model: LoRA is on and `model` is a peft PeftModel, whose disable_adapter nn.Module's type lacks
    ctx = model.disable_adapter() if ref_model is None else contextlib.nullcontext()  # type: ignore[operator]
    with ctx:
        return fixed_logprobs(ref_model or model, batch, chunks, pad_id, temperature, autocast)


def _as_float(norm: torch.Tensor) -> float:
    """The clipped total norm; under FSDP a replicated DTensor, whose full value every rank holds."""
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


@dataclass(frozen=True)
class UpdateSettings:
    """The numbers one update reads, from the config's train and rollout sections (`from_config`).

    pad_id: the tokenizer's; temperature: the sampler's (log-probs are of the tempered distribution);
    micro_batch_size / micro_batch_tokens: a forward's rows and padded completion tokens (0 = no cap);
    max_grad_norm: clipping; autocast: "none" | "bfloat16"; norm_len: the generation budget (Dr. GRPO's
    constant normaliser); mu: optimisation passes over the batch; mismatch_cap: C of the mismatch figures'
    outside-[1/C, C] fraction (rlvr.algorithms.mismatch).
    """

    pad_id: int
    temperature: float = 1.0
    micro_batch_size: int = 8
    max_grad_norm: float = 1.0
    autocast: str = "none"
    norm_len: int = 128
    mu: int = 1
    micro_batch_tokens: int = 0
    mismatch_cap: float = DEFAULT_CAP

    @classmethod
    def from_config(cls, cfg: Config, pad_id: int) -> UpdateSettings:
        t = cfg.train
        return cls(
            pad_id=pad_id,
            temperature=cfg.rollout.temperature,
            micro_batch_size=t.micro_batch_size,
            max_grad_norm=t.max_grad_norm,
            autocast=t.autocast,
            norm_len=cfg.rollout.max_new_tokens,
            mu=t.updates_per_batch,
            micro_batch_tokens=t.micro_batch_tokens,
            mismatch_cap=cfg.log.mismatch_cap,
        )


# the loss's per-batch figures the metrics line takes as token-weighted means over the update's micro-batches
CORRECTION_MEANS = ("correction/ratio_mean", "correction/weight_mean", "correction/kept_frac")
TOKEN_MEANS = ("clip/low_frac", "clip/high_frac", "kl", *CORRECTION_MEANS)


@returns_freed_memory
def update_policy(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    batch: StepBatch,
    algo: Algorithm,
    settings: UpdateSettings,
    *,
    ref_model: torch.nn.Module | None = None,
    comm: Collectives | None = None,
) -> dict[str, float]:
    """One pass (or mu passes) of gradient steps over the batch; returns floats for the metrics line.
    With `comm` (a rlvr.training.comm.Comm) this rank's batch is its share of a global batch; the returned
    stats are those of the global batch."""
    s = settings
    num_tokens, num_seqs = batch_counts(batch.mask)
    if comm is not None:  # data parallel: normalise by the global batch's counts
        num_tokens, num_seqs = comm.all_sum(num_tokens, num_seqs)
    adv = _advantages(batch)
    active = [r for r in range(len(batch)) if batch.mask[r].sum() > 0 and (bool(adv[r].any()) or algo.beta > 0)]
    chunks = micro_batches(active, batch.lengths.tolist(), s.micro_batch_size, s.micro_batch_tokens)
    trainable = [p for p in model.parameters() if p.requires_grad]
    # FSDP: every forward/backward is a collective; a rank with fewer micro-batches adds zero-weight ones
    runs = chunks + [_IDLE] * (comm.idle_micro_batches(len(chunks)) if comm is not None else 0)
    fixed = (batch, runs, s.pad_id, s.temperature, s.autocast)
    # several passes: the ratio is against the policy that sampled, fixed before the first pass
    old = fixed_logprobs(model, *fixed) if s.mu > 1 else None
    ref = reference_logprobs(model, ref_model, *fixed) if algo.beta > 0 else None
    # sums over the passes' micro-batches: floats, and the mismatch sums (a dict of them) under "mismatch"
    totals: dict[str, Any] = {
        "loss": 0.0,
        **dict.fromkeys(TOKEN_MEANS, 0.0),
        "train_tokens": 0,
        "mismatch": empty_sums(),
    }
    grad_norm = 0.0
    for _pass in range(s.mu):
        optimizer.zero_grad(set_to_none=True)
        pass_loss = _one_pass(model, batch, runs, algo, s, old, ref, (num_tokens, num_seqs), totals, measure=_pass == 0)
        n_chunks = len(chunks)
        if comm is not None:  # data parallel: global loss; the sum of the ranks' gradients is the global one
            pass_loss, n_chunks = comm.all_sum(pass_loss, n_chunks)
            comm.sum_grads(trainable)
        totals["loss"] += pass_loss
        grad_norm = _as_float(torch.nn.utils.clip_grad_norm_(trainable, s.max_grad_norm)) if trainable else 0.0
        if not torch.isfinite(torch.tensor([totals["loss"], grad_norm])).all():
            # nothing is applied; the figures are those of the passes made, by the same rule as an applied step
            optimizer.zero_grad(set_to_none=True)
            return {**_update_stats(totals, grad_norm, len(active), algo, _pass + 1, comm), "skipped": 1}
        if n_chunks:
            optimizer.step()
    return _update_stats(totals, grad_norm, len(active), algo, s.mu, comm)


def _advantages(batch: StepBatch, rows: list[int] | None = None, t: int | None = None) -> torch.Tensor:
    """The batch's advantages, (B,) or per token (B, T) (a teacher's term: rlvr.algorithms.distill); with `rows` and
    `t` those rows', per-token ones trimmed to t positions. A batch made without them (rlvr.training.batch.collect
    sets them) is refused."""
    if batch.advantages is None:
        raise ValueError("update_policy: the batch has no advantages (rlvr.training.batch.collect computes them)")
    if rows is None:
        return batch.advantages
    adv = batch.advantages[rows]
    return adv[:, :t] if adv.dim() == 2 else adv


def _one_pass(
    model: torch.nn.Module,
    batch: StepBatch,
    runs: list[Chunk],
    algo: Algorithm,
    s: UpdateSettings,
    old: Fixed | None,
    ref: Fixed | None,
    counts: tuple[torch.Tensor, torch.Tensor],
    totals: dict[str, Any],
    measure: bool = False,
) -> float:
    """Forward and backward over every micro-batch (gradients accumulate); adds to `totals`; returns the loss.
    With `measure` (the first pass) the log-probs it computes anyway are held against the sampler's: the mismatch
    sums of the tokens the update trains on (rows it skips, with advantage 0 and no KL term, are not measured)."""
    num_tokens, num_seqs = counts
    pass_loss = 0.0
    # each prompt once per pass; micro-batches backward into its keys and values, then it backward once
    prompts = _prompt_pass(model, batch, runs, s.pad_id, s.autocast, split_graph=True)
    if prompts is None:  # no micro-batch
        return pass_loss
    for rows in runs:
        if rows is _IDLE:  # same collectives in the same order as a real micro-batch, zero gradient
            logp, _ = _chunk_logprobs(model, prompts, batch, rows, s.temperature, s.autocast)
            (logp.sum() * 0.0).backward()
            continue
        with _chunk_oom(batch, rows, s.micro_batch_size, s.micro_batch_tokens):  # name the shape that ran out of memory
            logp, t = _chunk_logprobs(model, prompts, batch, rows, s.temperature, s.autocast)
            mask = batch.mask[rows, :t]
            loss, stats = policy_loss(
                logp,
                old[tuple(rows)] if old else None,
                _advantages(batch, rows, t),
                mask,
                ref_logp=ref[tuple(rows)] if ref else None,
                norm_len=s.norm_len,
                num_tokens=num_tokens,
                num_seqs=num_seqs,
                sampler_logp=batch.sampler_logp[rows, :t],
                **algo.loss_kwargs(),
            )
            loss.backward()
        if measure:
            sums = mismatch_sums(logp, batch.sampler_logp[rows, :t], mask, s.mismatch_cap)
            totals["mismatch"] = merge_sums(totals["mismatch"], sums)
        tokens = float(mask.sum())
        pass_loss += float(loss.detach())
        totals["train_tokens"] += int(tokens)
        for k in TOKEN_MEANS:
            totals[k] += float(stats.get(k, 0.0)) * tokens
    prompts.backward()
    return pass_loss


def _update_stats(
    totals: dict[str, Any], grad_norm: float, n_active: int, algo: Algorithm, mu: int, comm: Collectives | None
) -> dict[str, float]:
    """The update's figures for the metrics line: token-weighted means (of the global batch under data parallel)."""
    if comm is not None:
        keys = (*TOKEN_MEANS, "train_tokens")
        *sums, n_active = comm.all_sum(*(totals[k] for k in keys), n_active)
        totals.update(zip(keys, sums))
    out = {
        "loss": totals["loss"] / mu,
        "grad_norm": grad_norm,
        "skipped": 0,
        "train_tokens": totals["train_tokens"],
        "active_rows": n_active,
    }
    for k in TOKEN_MEANS:
        out[k] = totals[k] / max(totals["train_tokens"], 1)
    if algo.beta == 0:
        out.pop("kl")
    if not corrects(algo.rollout_correction) or not totals["train_tokens"]:
        # no correction, or no token trained on (every group zero-variance): no ratio to report, rather than a 0
        for k in CORRECTION_MEANS:
            out.pop(k)
    out.update(_mismatch_stats(totals["mismatch"], comm))
    return out


def _mismatch_stats(sums: dict[str, float], comm: Collectives | None) -> dict[str, float]:
    """The mismatch figures of the batch (the global batch under data parallel: sums added, the max the max)."""
    if comm is not None:
        added = comm.all_sum(*(sums[k] for k in ("tokens", "k3", "abs_log_ratio", "outside")))
        top = max(comm.all_gather(sums["max_log_ratio"]))
        sums = dict(zip(("tokens", "k3", "abs_log_ratio", "outside"), added), max_log_ratio=top)
    return mismatch_figures(sums)
