"""A task read from a local JSON-lines file: one problem per line, `prompt` and `answer` (or `tests`),
optional `id` and `band`. A bad row fails the load with its file and line, before anything is written."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from rlvr.tasks.base import SPLITS, DatasetError, Problem, default_grader, validate_problem


def read_problems(path: str | Path) -> list[Problem]:
    path = Path(path)
    out = []
    with path.open() as f:
        for line_no, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as e:
                raise DatasetError(f"{path}:{line_no}: not valid JSON ({e.msg})") from None
            if not isinstance(row, dict):
                raise DatasetError(f"{path}:{line_no}: expected a JSON object, got {type(row).__name__}")
            prompt = row.get("prompt", row.get("problem", ""))
            answer = row.get("answer", row.get("solution"))
            pid = str(row.get("id") or "row-" + hashlib.sha256(str(prompt).encode()).hexdigest()[:16])
            problem = Problem(id=pid, prompt=prompt, answer=None if answer is None else str(answer),
                              tests=row.get("tests"), band=str(row.get("band", "all")),
                              meta={k: v for k, v in row.items() if k not in ("prompt", "answer", "tests")})
            out.append(validate_problem(problem, f"{path}:{line_no}", line_no))
    return out


class JsonlTask:
    """Problems from files: either one file split by id hash, or one file per split."""

    name = "jsonl"

    def __init__(self, path: str | None = None, splits: dict | None = None, system_prompt: str | None = None,
                 answer_form: str = "math"):
        from rlvr.tasks.arithmetic import DEFAULT_SYSTEM, split_of
        from rlvr.verifiers.forms import ANSWER_FORMS

        if answer_form not in ANSWER_FORMS:
            raise ValueError(f"answer_form={answer_form!r}; choose from {', '.join(ANSWER_FORMS)}")

        self.system_prompt = system_prompt or DEFAULT_SYSTEM
        if splits:
            self._splits = {s: read_problems(p) for s, p in splits.items()}
        elif path:
            pool = read_problems(path)
            self._splits = {s: [p for p in pool if split_of(p.id) == s] for s in SPLITS}
        else:
            raise ValueError("jsonl task: give `path` (split by id) or `splits` {train: ..., heldout: ...}")
        self.bands = sorted({p.band for ps in self._splits.values() for p in ps})
        self.answer_form = answer_form
        self.grader = default_grader((p for ps in self._splits.values() for p in ps), answer_form)

    def problems(self, split: str) -> list[Problem]:
        return self._splits.get(split, [])

    def messages(self, problem: Problem) -> list[dict]:
        return [{"role": "system", "content": self.system_prompt}, {"role": "user", "content": problem.prompt}]
