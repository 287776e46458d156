"""rlvr's verifiers as verl's custom reward function.

In verl's config:

    custom_reward_function:
      path: /path/to/rlvr_reward.py   # a file holding: from rlvr.integrations.verl import compute_score
      name: compute_score
      reward_kwargs: {}               # optional: {spec: rlvr.yaml} (any rlvr.integrations.rewards spec)

`compute_score(data_source, solution_str, ground_truth, extra_info=None)` returns a dict, as verl's own math
scorer does: `score` (the weighted reward, what verl trains on), `acc` (1.0 when the correctness term says
correct), `status` (the correctness verdict: correct, wrong, no_answer, multiple_answers, timeout, invalid_gold,
error), `pred` (the extracted answer, "" when none) and `fault` (1.0 for a timeout, a verifier error or an unusable
gold: verl has no way to leave a sample out, so its score is 0.0 and `fault` counts it apart). verl collects the
numeric keys into its reward metrics and skips the text ones.

The verifier: `spec` when given (reward_kwargs), else `extra_info["verifier"]` (a verifier kind, with
`extra_info["verifier_settings"]`), else `data_source` when it names a verifier kind, else `math`. Code kinds read
the ground truth as hidden tests (a JSON string, or verl's {"inputs", "outputs"} cases for `stdio`).

One call scores one completion in verl's process, under the verifier's own deadline (Python-level work is cut off
at reward.timeout_s; code runs in rlvr's sandbox as always). `compute_score_batch` (verl's batch reward manager,
`reward_model.reward_manager: batch`) scores a whole batch in rlvr's worker pool, where a stalled item's worker
is killed: the hard limit rlvr's own training uses.
"""

from __future__ import annotations

from rlvr.integrations import rewards
from rlvr.verifiers.base import FAULT_STATUSES
from rlvr.verifiers.registry import KINDS

DEFAULT_KIND = "math"


def spec_for(data_source, extra_info: dict | None, spec=None):
    """The reward spec for one sample (see the module doc for the order of choice)."""
    if spec is not None:
        return spec
    info = extra_info if isinstance(extra_info, dict) else {}
    kind = info.get("verifier") or (data_source if data_source in KINDS else DEFAULT_KIND)
    settings = info.get("verifier_settings") or {}
    return {"kind": kind, **settings} if settings else kind


def result_dict(result, i: int) -> dict:
    """The dict verl reads for row i of a RewardResult: same keys and types for every sample."""
    v = result.verdicts[i]
    fault = v.status in FAULT_STATUSES
    return {
        "score": 0.0 if fault else float(result.total[i]),
        "acc": float(v.status == "correct"),
        "status": v.status,
        "pred": v.extracted or "",
        "fault": float(fault),
    }


def _problem(ground_truth, extra_info):
    info = extra_info if isinstance(extra_info, dict) else {}
    meta = {k: info[k] for k in ("entry_point",) if k in info}
    return rewards.problem_for(ground_truth, str(info.get("question", "")), str(info.get("index", "0")), meta)


def compute_score(data_source, solution_str, ground_truth, extra_info=None, spec=None, **_ignored) -> dict:
    """verl's custom reward function: one completion -> {"score", "acc", "status", "pred", "fault"}."""
    reward = rewards.cached(spec_for(data_source, extra_info, spec), workers=0)
    return result_dict(reward([solution_str], [_problem(ground_truth, extra_info)]), 0)


def compute_score_batch(
    data_sources, solution_strs, ground_truths, extra_infos=None, spec=None, **_ignored
) -> list[dict]:
    """verl's batch reward manager form: lists in, one dict per sample out, scored in rlvr's worker pool."""
    n = len(solution_strs)
    infos = list(extra_infos) if extra_infos is not None else [None] * n
    out: list[dict | None] = [None] * n
    groups: dict[str, list[int]] = {}
    for i in range(n):
        groups.setdefault(repr(spec_for(data_sources[i], infos[i], spec)), []).append(i)
    for rows in groups.values():
        reward = rewards.cached(spec_for(data_sources[rows[0]], infos[rows[0]], spec))
        result = reward([solution_strs[i] for i in rows], [_problem(ground_truths[i], infos[i]) for i in rows])
        for j, i in enumerate(rows):
            out[i] = result_dict(result, j)
    return [d for d in out if d is not None]  # every row is in one group: each is filled


__all__ = ["compute_score", "compute_score_batch", "spec_for", "DEFAULT_KIND"]
