"""Held-out evaluation of an environment task: n sampled episodes per problem and one greedy episode, each a fresh
environment, scored as the environment grades them (the same environment and reward as training), as EvalRecords
the summary, pass@k and the paired comparison read as they read single-turn records. The episode/* figures of
each pass (turns, tool calls, tool errors, what ended the episodes) go in the summary beside them.
"""

from __future__ import annotations

import torch

from rlvr.environments.episode import Episode, episode_limits, run_episodes
from rlvr.environments.figures import episode_metrics, episode_verdict, transcript
from rlvr.evaluation.records import EvalRecord


def evaluate_episodes(
    sampler,
    tokenizer,
    new_environment,
    problems,
    episode,
    *,
    n,
    greedy,
    temperature,
    max_new_tokens,
    seed,
    batch_size,
    bar=None,
) -> tuple[list[EvalRecord], dict]:
    """(records, {"sampled": figures, "greedy": figures}); records problem-major, sampled before greedy."""
    generator = torch.Generator().manual_seed(seed)
    records, figures = [], {}
    passes = ([("sampled", n, temperature)] if n else []) + ([("greedy", 1, 0.0)] if greedy else [])
    for mode, count, temp in passes:
        episodes_of_pass: list[Episode] = []
        for start in range(0, len(problems), batch_size):
            rows = [p for p in problems[start : start + batch_size] for _ in range(count)]
            episodes = run_episodes(
                sampler,
                tokenizer,
                [new_environment() for _ in rows],
                rows,
                **episode_limits(episode),
                max_new_tokens=max_new_tokens,
                temperature=temp,
                generator=generator,
            )
            records += [_record(ep, i % count, mode) for i, ep in enumerate(episodes)]
            episodes_of_pass += episodes
            if bar is not None:
                bar.update(len(rows))
        figures[mode] = episode_metrics(episodes_of_pass)
    return records, figures


def _record(ep, sample_idx: int, mode: str) -> EvalRecord:
    v = episode_verdict(ep)
    return EvalRecord(
        problem_id=ep.problem.id,
        band=ep.problem.band,
        sample_idx=sample_idx,
        status=v.status,
        reward=ep.reward,
        extracted=v.extracted,
        completion=transcript(ep),
        mode=mode,
    )


__all__ = ["evaluate_episodes"]
