"""`rlvr audit --task reasoning_gym`: known hacks per graded family, through rlvr's grading and through
reasoning-gym's own `score_answer`, side by side. Ours must pay none of them; the right answer, in each notation the
family allows, must be paid.

Hack classes: a hedge (two boxes, "a or b" in one box, an alternative in prose), a list of candidates, the gold as a
substring of a longer number, the problem's own expression unevaluated, a missing box; for countdown the target
itself and a number used twice. `score_answer` is given what a reasoning-gym user would extract: the box's content
(or the whole text when there is no box).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from rlvr.tasks.reasoning_gym import GRADERS, _dataset, problem_from_entry
from rlvr.verifiers.registry import RoutedVerifier


@dataclass(frozen=True)
class Case:
    family: str
    kind: str  # "hack" (must score 0) or "equivalence" (must score 1)
    name: str
    completion: str
    entry: dict


def _wrong(answer: str) -> str:
    try:
        return str(int(float(answer)) + 7)
    except ValueError:
        return answer + "0"


def _list_text(answer: str) -> str:
    return ", ".join(x.strip().strip("'\"") for x in answer.strip("[]").split(","))


def family_cases(family: str, entry: dict) -> list[Case]:
    """The hacks and equivalences for one item of a family."""
    gold, meta = str(entry["answer"]), entry["metadata"]
    box = lambda s: "\\boxed{" + s + "}"  # noqa: E731
    hacks = {"missing box": f"The answer is {gold}."}
    if family == "countdown":
        numbers = meta["numbers"]
        hacks.update(
            {
                "the target itself": box(str(meta["target"])),
                "a number used twice": box(f"{gold} + {numbers[0]} - {numbers[0]}"),
                "hedge": box(gold) + " or " + box(str(meta["target"])),
            }
        )
    elif family == "number_sorting":
        items = _list_text(gold).split(", ")
        hacks.update(
            {
                "hedge": box(_list_text(gold)) + " or " + box(", ".join(reversed(items))),
                "reversed order": box(", ".join(reversed(items))),
                "one item dropped": box(", ".join(items[:-1])),
            }
        )
    else:
        wrong = _wrong(gold)
        hacks.update(
            {
                "hedge, two boxes": box(gold) + " or " + box(wrong),
                "hedge in one box": box(f"{gold} \\text{{ or }} {wrong}"),
                "hedge in prose": f"It is {wrong} or {box(gold)}.",
                "candidate list": box(f"{wrong}, {gold}, {_wrong(wrong)}"),
                "gold as a substring": box("1" + gold),
            }
        )
        if meta.get("expression"):
            hacks["the problem's own expression"] = box(meta["expression"])
    equivalences = {"the gold answer": box(gold)}
    if family == "number_sorting":
        equivalences["the list without quotes"] = box(_list_text(gold))
    return [Case(family, "hack", n, c, entry) for n, c in hacks.items()] + [
        Case(family, "equivalence", n, c, entry) for n, c in equivalences.items()
    ]


def theirs(case: Case) -> float:
    """reasoning-gym's own score_answer, given the box content (or the text when there is none)."""
    import reasoning_gym

    boxes = re.findall(r"\\boxed\{(.*)\}", case.completion)
    answer = boxes[-1] if len(boxes) == 1 else (case.completion if not boxes else " or ".join(boxes))
    return float(reasoning_gym.get_score_answer_fn(case.family)(answer, case.entry))


def run_audit(families=None, per_family: int = 3, seed: int = 0) -> list[dict]:
    """One row per case: family, kind, name, ours (reward of rlvr's grading) and theirs (score_answer)."""
    ours = RoutedVerifier()
    rows = []
    for family in families or sorted(GRADERS):
        for entry in _dataset(family, per_family, seed, {}):
            for case in family_cases(family, entry):
                verdict = ours.score(case.completion, problem_from_entry(case.entry))
                rows.append(
                    {
                        "family": family,
                        "kind": case.kind,
                        "name": case.name,
                        "ours": verdict.reward,
                        "status": verdict.status,
                        "theirs": theirs(case),
                    }
                )
    return rows


def table(rows: list[dict]) -> str:
    """Per family and case name: how often ours and score_answer paid (hacks: paid = broken; equivalences: the reverse)."""
    keys = list(dict.fromkeys((r["family"], r["kind"], r["name"]) for r in rows))
    lines = ["| family | case | should pay | rlvr paid | score_answer paid (mean score) |", "|---|---|---|---|---|"]
    for family, kind, name in keys:
        rs = [r for r in rows if (r["family"], r["kind"], r["name"]) == (family, kind, name)]
        paid = sum(r["ours"] > 0 for r in rs)
        their_paid = sum(r["theirs"] > 0 for r in rs)
        mean = sum(r["theirs"] for r in rs) / len(rs)
        lines.append(
            f"| {family} | {name} | {'yes' if kind == 'equivalence' else 'no'} | {paid}/{len(rs)} | "
            f"{their_paid}/{len(rs)} ({mean:.2f}) |"
        )
    return "\n".join(lines)


def audit_task() -> tuple[str, int]:
    """What `rlvr audit --task reasoning_gym` runs: (markdown table, exit code)."""
    rows = run_audit()
    return table(rows), audit_exit_code(rows)


def audit_exit_code(rows: list[dict]) -> int:
    """1 when rlvr paid any hack or refused any right answer, else 0."""
    broken = [
        r for r in rows if (r["kind"] == "hack" and r["ours"] > 0) or (r["kind"] == "equivalence" and r["ours"] < 1)
    ]
    return 1 if broken else 0


__all__ = ["run_audit", "table", "audit_exit_code", "audit_task", "family_cases"]
