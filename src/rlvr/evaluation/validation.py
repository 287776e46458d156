"""Greedy accuracy on a fixed set of validation problems, logged beside the training reward.

Checkpoint selection and the curve in the report use the validation split, never the held-out one.
"""

from __future__ import annotations

import torch

from rlvr.sampling.scored import sample_and_score


@torch.no_grad()
def validate(sampler, problems, prompt_ids, reward, max_new_tokens: int) -> dict:
    """{"val/accuracy", "val/no_answer_frac", "val/<band>/accuracy"} from one greedy decode per problem."""
    # the path training and SFT data sample and score through; greedy needs no generator, so none is passed
    verdicts = sample_and_score(
        sampler, problems, prompt_ids, 1, reward, max_new_tokens=max_new_tokens, temperature=0.0
    ).result.verdicts
    out = {
        "val/accuracy": sum(v.status == "correct" for v in verdicts) / len(verdicts),
        "val/no_answer_frac": sum(v.status == "no_answer" for v in verdicts) / len(verdicts),
    }
    for band in dict.fromkeys(p.band for p in problems):
        hits = [v.status == "correct" for p, v in zip(problems, verdicts) if p.band == band]
        out[f"val/{band}/accuracy"] = sum(hits) / len(hits)
    return out
