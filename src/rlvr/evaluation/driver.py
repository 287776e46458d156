"""Sample completions for a set of problems, score them with the training reward, keep every verdict.

Written against two callables so that it runs with any sampler and any reward:

    policy_generate(prompts_messages: list[list[dict]], n: int, temperature: float) -> list[list[str]]
        n completion texts per prompt; temperature 0.0 asks for greedy decoding.
    reward(completions: list[str], problems: list[Problem]) -> result with
        .verdicts: list[Verdict] and .total: list[float], one per completion.

policy_generate returns texts only (an external sampler has no token ids or Rollouts), so the driver cannot call
rlvr.sampling.scored.sample_and_score as training, SFT data and validation do; it shares that path's scoring half,
score_rows (P*n flat rows, one reward call, verdicts aligned to rows).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rlvr.evaluation.lenient import lenient_statuses
from rlvr.evaluation.records import EvalRecord
from rlvr.sampling.scored import score_rows
from rlvr.tasks.base import Problem

PolicyGenerate = Callable[[list[list[dict]], int, float], list[list[str]]]


def user_messages(problem: Problem) -> list[dict]:
    """The default chat for a problem: its prompt as one user turn."""
    return [{"role": "user", "content": problem.prompt}]


def _generate_checked(
    policy_generate: PolicyGenerate, chats: list[list[dict]], n: int, temperature: float
) -> list[list[str]]:
    out = policy_generate(chats, n, temperature)
    if len(out) != len(chats) or any(len(texts) != n for texts in out):
        shape = [len(t) for t in out]
        raise ValueError(f"policy_generate returned {shape} completions for {len(chats)} prompts x n={n}")
    return out


def _score(
    reward,
    problems: Sequence[Problem],
    texts: list[list[str]],
    mode: str,
    lenient_format: str | None = None,
    lenient_reward=None,
) -> list[EvalRecord]:
    """Flatten (P, n) completions into P*n rows, score them in one reward call (rlvr.sampling.scored.score_rows, the
    scoring half of the path training, SFT data and validation take), one record per row; with
    lenient_format (the task's answer format) each is also scored leniently (rlvr.evaluation.lenient)."""
    flat = [t for row in texts for t in row]
    owners = [p for p, row in zip(problems, texts) for _ in row]
    result = score_rows(reward, flat, owners)
    lenient = (
        lenient_statuses(lenient_reward or reward, flat, owners, [v.status for v in result.verdicts], lenient_format)
        if lenient_format
        else [None] * len(flat)
    )
    records, i = [], 0
    for p, row in zip(problems, texts):
        for j, text in enumerate(row):
            v = result.verdicts[i]
            records.append(
                EvalRecord(
                    problem_id=p.id,
                    band=p.band,
                    sample_idx=j,
                    status=v.status,
                    reward=float(result.total[i]),
                    extracted=v.extracted,
                    completion=text,
                    mode=mode,
                    lenient=lenient[i],
                )
            )
            i += 1
    return records


def evaluate(
    policy_generate: PolicyGenerate,
    reward,
    problems: Sequence[Problem],
    n: int = 8,
    ks: Sequence[int] = (1,),
    temperature: float = 1.0,
    greedy: bool = True,
    to_messages: Callable[[Problem], list[dict]] = user_messages,
    batch_size: int = 32,
    lenient_format: str | None = "boxed",
    lenient_reward=None,
) -> list[EvalRecord]:
    """n sampled completions per problem (mode "sampled") plus, when greedy, one at temperature 0
    (mode "greedy"); every completion scored by `reward`, the one training used. n = 0 with greedy: greedy only.

    ks is checked against n before any sampling, so a pass@8 asked of 4 samples fails in a second
    and not after an hour. Problems go to policy_generate batch_size at a time.
    lenient_format: the task's answer format ("boxed" | "tags"), in which each completion's last answer is also
    graded (the record's `lenient` status) by lenient_reward (default: `reward`); None: strict only.
    Returns P*n (+ P greedy) records, problems in the order given.
    """
    if n < 0 or (n == 0 and not greedy):
        raise ValueError(f"n must be >= 1 samples per problem (or 0 with the greedy pass: greedy only), got {n}")
    if any(k < 1 or k > n for k in ks):
        raise ValueError(f"every k in pass@k must be in 1..n={n}, got ks={list(ks)}")
    if len({p.id for p in problems}) != len(problems):
        raise ValueError("problem ids repeat: records are keyed by id, so each must be unique")
    records: list[EvalRecord] = []
    passes = ([("sampled", n, temperature)] if n else []) + ([("greedy", 1, 0.0)] if greedy else [])
    for mode, count, temp in passes:
        for start in range(0, len(problems), batch_size):
            batch = list(problems[start : start + batch_size])
            texts = _generate_checked(policy_generate, [to_messages(p) for p in batch], count, temp)
            records += _score(reward, batch, texts, mode, lenient_format, lenient_reward)
    return records
