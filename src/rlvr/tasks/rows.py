"""One row (a line of `rlvr verify`, an item of `rlvr serve`, another framework's label) -> a Problem to grade.

The rules every entry point shares, in one leaf module so the verify command, the HTTP service (rlvr.serve) and the
framework adapters (rlvr.integrations) read golds the same way:
- the gold-column rule: the gold answer is the first of `answer`, `gold`, `solution`, `ground_truth`,
  `final_answer` present (rlvr.tasks.base.GOLD_COLUMNS), GSM8K's worked `... #### 72` read as 72 (final_gold);
  code rows carry `tests` (and `entry_point`);
- a framework's label (OpenRLHF's `labels`, verl's `ground_truth`) is the answer as text for answer verifiers and the
  hidden tests for code verifiers (`parse_tests`: JSON decoded, verl / PRIME-style {"inputs", "outputs"} as stdio
  cases);
- OpenRLHF's query is the prompt followed by the response (`strip_prompt`);
- OpenRLHF's labels are refused only when none carries a gold (`labels_refusal`): one row without a gold among others
  is that row's `invalid_gold` (reward 0), as every verifier grades an empty gold and rlvr's own training leaves it out.
"""

from __future__ import annotations

import json

from rlvr.tasks.base import Problem, final_gold, gold_column


def parse_tests(gold):
    """Hidden tests for the code verifiers from a framework's ground truth: a JSON string is decoded, and verl /
    PRIME-style {"inputs": [...], "outputs": [...]} becomes the stdio verifier's [{"stdin", "stdout"}] cases."""
    tests = gold
    if isinstance(gold, str) and gold.lstrip()[:1] in ("[", "{"):
        try:
            tests = json.loads(gold)
        except json.JSONDecodeError:
            tests = gold
    if isinstance(tests, dict) and isinstance(tests.get("inputs"), list) and isinstance(tests.get("outputs"), list):
        tests = [{"stdin": str(i), "stdout": str(o)} for i, o in zip(tests["inputs"], tests["outputs"])]
    return tests


def problem_for(gold, prompt: str = "", pid: str = "0", meta: dict | None = None) -> Problem:
    """One Problem from a framework's gold: the answer verifiers read it as text, the code verifiers as tests."""
    if gold is None or isinstance(gold, str):
        answer = gold
    else:
        answer = json.dumps(gold) if isinstance(gold, (dict, list)) else str(gold)
    return Problem(id=pid, prompt=prompt or "", answer=answer, tests=parse_tests(gold), meta=dict(meta or {}))


def strip_prompt(query: str, prompt: str) -> str:
    """The response inside an OpenRLHF query (the prompt, then the response)."""
    query, prompt = str(query), str(prompt or "")
    if prompt and query.startswith(prompt):
        return query[len(prompt) :]
    at = query.find(prompt) if prompt else -1
    return query[at + len(prompt) :] if at >= 0 else query


LABEL_KEY = "give OpenRLHF --label_key naming the dataset's gold column"


def no_gold(label) -> bool:
    """A framework's label that carries no gold: None, or empty or blank text."""
    return label is None or (isinstance(label, str) and not label.strip())


def labels_refusal(labels) -> str | None:
    """Why a batch of OpenRLHF labels cannot be scored, in one line, or None. Missing, or every label without a gold:
    what OpenRLHF sends ("" for each) when its --label_key is not given, and a reward of 0 for every sample would
    train on nothing. A batch where some rows have a gold is scored (the others invalid_gold): one bad row of a
    dataset must not stop the run. The in-process reward_func (rlvr.integrations.openrlhf) raises it, `rlvr serve`'s
    /get_reward answers it with 422."""
    if labels is None:
        return f"labels: missing (the gold per query; {LABEL_KEY})"
    if labels and all(no_gold(g) for g in labels):
        return f"labels: all {len(labels)} empty or null, no gold to grade against; {LABEL_KEY}"
    return None


def problem_from_row(row: dict, index: int, task=None) -> Problem:
    """The Problem a `rlvr verify` / `rlvr serve` row names: the task's own reader when it has one (reasoning_gym
    reads `entry`, the generator's item), else the gold under the gold-column rule, `tests` and `entry_point`."""
    from_row = getattr(task, "problem_from_row", None)
    if from_row is not None:
        return from_row(row)
    key = gold_column(row)
    meta = dict(row["meta"]) if isinstance(row.get("meta"), dict) else {}
    if row.get("entry_point") is not None:
        meta["entry_point"] = row["entry_point"]
    return Problem(
        id=str(row.get("id", index)),
        prompt=row["prompt"] if isinstance(row.get("prompt"), str) else "",
        answer=None if key is None else final_gold(str(row[key])),
        tests=row.get("tests"),
        meta=meta,
    )


__all__ = ["parse_tests", "problem_for", "strip_prompt", "problem_from_row", "no_gold", "labels_refusal", "LABEL_KEY"]
