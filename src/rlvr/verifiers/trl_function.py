"""A TRL reward function as an rlvr verifier (kind `trl_reward`, setting `func: package.module:attr`), so that
another project's final-answer grader can be audited by rlvr (`rlvr audit --verifier trl_reward --set
func=my_rewards:correctness`, the math suite's hacks and equivalences) or serve as a reward term.

The function is called as TRL calls it on a conversational dataset, with a batch of one: `prompts` (the question as
one user message), `completions` (the completion as one assistant message), the gold as `answer`, `solution` and
`ground_truth` (the columns graders read), `completion_ids=[None]` and `environments=[None]`. A reward from 1 up is
`correct`, below is `wrong`; None (TRL's "not applicable") or a value that is not a number is `error`. Only graders
that are a function of the text can be audited this way: one that reads an environment's state gets None for it.
The function is imported as the verifier is built, so a reference that does not import (a typo, its folder not on
PYTHONPATH) is a one-line ConfigError before anything loads, not a run of `error` verdicts; each worker process
imports it again by its reference, so the verifier travels to them.
"""

from __future__ import annotations

import math

from rlvr.registry import ConfigError, load_attr
from rlvr.verifiers.base import Verdict


class TRLRewardVerifier:
    def __init__(self, func: str = ""):
        if not func:
            raise ValueError("kind trl_reward needs func: package.module:attr (a TRL reward function)")
        self.ref, self.name = func, f"trl_reward:{func}"
        self._fn = load_attr(func, "func")  # here, not at the first score: a typo stops the run before it starts
        if not callable(self._fn):
            raise ConfigError(f"func={func!r} is a {type(self._fn).__name__}, not a TRL reward function")

    def __getstate__(self):
        return {"ref": self.ref, "name": self.name, "_fn": None}

    def fn(self):
        if self._fn is None:
            self._fn = load_attr(self.ref, "func")
        return self._fn

    def score(self, completion: str, problem) -> Verdict:
        gold = problem if isinstance(problem, str) or problem is None else problem.answer
        question = "" if isinstance(problem, str) or problem is None else problem.prompt
        try:
            values = self.fn()(
                prompts=[[{"role": "user", "content": question}]],
                completions=[[{"role": "assistant", "content": completion}]],
                completion_ids=[None],
                environments=[None],
                answer=[gold],
                solution=[gold],
                ground_truth=[gold],
            )
            value = float(values[0])
        except (TypeError, ValueError, IndexError) as e:
            return Verdict("error", 0.0, None, f"{self.ref}: {type(e).__name__}: {e}"[:300])
        if math.isnan(value):
            return Verdict("error", 0.0, None, f"{self.ref} returned NaN")
        return Verdict("correct" if value >= 1.0 else "wrong", value, None, f"{self.ref}: {value:g}")


__all__ = ["TRLRewardVerifier"]
