"""The policy forward: per-token log-probs (and entropy) of sampled completions given their prompts.

Rows are laid out as [left-padded prompt | completion], so every completion starts at the same column and
`logits_to_keep` asks the model for the completion positions only. Log-probs are taken in float32 a few
rows at a time (losses.selective_log_softmax), so the full-vocabulary float32 logits of a whole batch
never exist at once.
"""

from __future__ import annotations

import torch

from rlvr.losses import selective_log_softmax, token_entropy_from_logits


def pack_rows(prompts: list[list[int]], completion_ids: torch.Tensor, completion_mask: torch.Tensor, pad_id: int):
    """Build model inputs for b rows.

    prompts: b lists of token ids; completion_ids, completion_mask: (b, T).
    Returns input_ids (b, Lp+T), attention_mask (b, Lp+T), position_ids (b, Lp+T), where Lp = longest prompt.
    """
    b, t = completion_ids.shape
    lp = max(len(p) for p in prompts)
    input_ids = torch.full((b, lp + t), pad_id, dtype=torch.long)
    attention = torch.zeros((b, lp + t), dtype=torch.long)
    for i, p in enumerate(prompts):
        input_ids[i, lp - len(p):lp] = torch.tensor(p, dtype=torch.long)
        attention[i, lp - len(p):lp] = 1
    input_ids[:, lp:] = completion_ids
    attention[:, lp:] = (completion_mask > 0).long()
    # Left padding shifts every real token right; positions must count real tokens only.
    position_ids = (attention.cumsum(-1) - 1).clamp(min=0)
    return input_ids, attention, position_ids


def completion_logprobs(model, prompts, completion_ids, completion_mask, *, pad_id: int,
                        temperature: float = 1.0, with_entropy: bool = False):
    """Per-token log-probs of the completions under `model`, at the sampling temperature.

    prompts: b lists of ids; completion_ids, completion_mask: (b, T).
    Returns (logp (b, T) float32, entropy (b, T) float32 or None). Padding positions hold garbage: mask them.
    """
    input_ids, attention, position_ids = pack_rows(prompts, completion_ids, completion_mask, pad_id)
    t = completion_ids.shape[1]
    # Keep the T+1 last positions: position Lp-1 predicts the first completion token, the last one predicts
    # nothing we sampled and is dropped.
    out = model(input_ids=input_ids, attention_mask=attention, position_ids=position_ids, logits_to_keep=t + 1,
                use_cache=False)
    logits = out.logits[:, :-1]
    if temperature not in (0.0, 1.0):
        logits = logits / temperature
    logp = selective_log_softmax(logits, completion_ids)
    entropy = token_entropy_from_logits(logits.detach()) if with_entropy else None
    return logp, entropy
