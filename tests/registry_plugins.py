"""Extension points written outside rlvr, named by `registry_plugins:attr` in tests: each gets what a built-in of
its registry gets (tests/test_verifiers_compose.py, tests/test_curriculum.py)."""

from rlvr.prompts.curriculum import FixedMix
from rlvr.verifiers.base import Verdict


class FormAwareGrader:
    """Correct when the completion equals the gold; records the answer form it was given (the task's, as math's)."""

    def __init__(self, answer_form: str = "unset"):
        self.answer_form = answer_form

    def score(self, completion, problem) -> Verdict:
        ok = str(completion).strip() == str(getattr(problem, "answer", problem))
        return Verdict("correct" if ok else "wrong", float(ok), str(completion), "equal" if ok else "differs")


class OneBandMix(FixedMix):
    """Every prompt from one band, which it cannot do without (`band`, no default)."""

    def __init__(self, problems, band: str, window: int = 8):
        super().__init__(problems, weights={band: 1.0}, window=window)
