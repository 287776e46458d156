"""rlvr's verifiers as OpenRLHF's reward-function file (`--remote_rm_url /path/to/reward_func.py`, with
`--label_key` naming the dataset's gold column).

    # reward_func.py
    from rlvr.integrations.openrlhf import reward_func                  # rlvr's default reward (math + format)
    # or: from rlvr.integrations.openrlhf import make_reward_func; reward_func = make_reward_func("rlvr.yaml")

`reward_func(queries, prompts, labels)`: OpenRLHF passes each query as the prompt followed by the response;
the prompt is stripped (queries[i] starts with prompts[i]) and the response is scored against labels[i] through
rlvr's verifiers, worker pool and sandbox. It returns OpenRLHF's dict: `rewards` (the weighted reward, for the
advantages), `scores` (1.0 when the correctness term says correct, for dynamic filtering) and `extra_logs`
(per-sample 0/1 tensors `rlvr/<status>` for every verdict status, which OpenRLHF averages into its logs).
OpenRLHF cannot leave a sample out, so a fault (verifier error, unusable gold: rlvr.verifiers.base.FAULT_STATUSES)
gets reward 0.0 and is counted apart in `rlvr/error` and `rlvr/invalid_gold`; a timeout is graded as a wrong answer
(docs/grading.md). A null or empty label among others is that sample's `invalid_gold` (reward 0): one bad row of a
dataset does not stop the run. Labels missing, or all null or empty (the "" OpenRLHF sends for each when
`--label_key` is not given), raise ValueError naming --label_key, as `rlvr serve`'s /get_reward refuses them with
422 (rlvr.tasks.rows.labels_refusal, the one rule): a job would otherwise train on zeros.
"""

from __future__ import annotations

from rlvr.integrations import rewards
from rlvr.tasks.rows import labels_refusal, strip_prompt  # the shared row rules (strip_prompt re-exported here)
from rlvr.verifiers.base import FAULT_STATUSES, STATUSES


def make_reward_func(spec=None, **overrides):
    """An OpenRLHF reward function for a reward spec (see rlvr.integrations.rewards)."""

    def reward_func(queries, prompts, labels, **_ignored) -> dict:
        import torch

        reward = rewards.cached(spec, **overrides)
        responses = [strip_prompt(q, p) for q, p in zip(queries, prompts)]
        refusal = labels_refusal(labels)
        if refusal:
            raise ValueError(refusal)
        result = reward(
            responses, [rewards.problem_for(g, str(p), str(i)) for i, (g, p) in enumerate(zip(labels, prompts))]
        )
        statuses = [v.status for v in result.verdicts]
        total = [0.0 if s in FAULT_STATUSES else float(t) for s, t in zip(statuses, result.total)]
        return {
            "rewards": torch.tensor(total, dtype=torch.float32),
            "scores": torch.tensor([float(s == "correct") for s in statuses], dtype=torch.float32),
            "extra_logs": {f"rlvr/{s}": torch.tensor([float(x == s) for x in statuses]) for s in STATUSES},
        }

    reward_func.__name__ = "reward_func"
    return reward_func


reward_func = make_reward_func()

__all__ = ["reward_func", "make_reward_func", "strip_prompt"]
