"""The math verifier: final answer in the completion vs the problem's gold answer, on math-verify.

Rules (each is a test case in tests/test_verifiers_math.py):
- The gold is parsed robustly (bare LaTeX too, see equiv.parse_gold); a gold that still does not parse
  gives `invalid_gold` (reward 0, and the trainer leaves the sample out of the loss), never 1.0.
- `require_boxed=True` (default): only `\\boxed{...}` answers count, because the task prompt asks for a
  box; no box is `no_answer`. Training on "the last number in the text" would reward a policy for
  trailing digits it never meant as an answer. `require_boxed=False` keeps math-verify's lenient
  extraction for completions from other prompts (evaluation of foreign models, TRL users).
- `answer_format="tags"`: the same rules for `<answer>...</answer>` (the R1 format, extract.py): only answer
  tags count (with require_boxed), and their content is parsed as LaTeX, else as text (tests/test_answer_formats.py).
- Hedging never pays (policy in extract.py): several distinct answers offered together, a boxed set or
  list, or "3 or \\boxed{5}" give `multiple_answers` when the gold is one value.
- Numbers compare exactly (rationals, big integers) or with relative tolerance `rel_tol` (equiv.py).
- `answer_form` (forms.py): what an answer must look like. "math" (default) takes any expression; "number"
  takes numerals only, so `\\boxed{8 - 3}` for gold 5 is `wrong` (an expression to evaluate), not correct.
- Every check runs under a deadline of `timeout_s` that works in any thread (deadline.py); answers
  whose evaluation would be one giant C-level computation are refused up front (guard.py).
"""

from __future__ import annotations

import sympy

from rlvr.tasks import forms
from rlvr.tasks.answer_formats import ANSWER_FORMATS
from rlvr.verifiers import equiv, extract, guard
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.deadline import TimedOut, call_with_deadline
from rlvr.verifiers.format import completion_text

# One of each kind of comparison, so every lazily loaded sympy path is loaded.
_WARM_UP = [
    (r"\boxed{(x-1)(x+1)}", "x^2-1"),
    (r"\boxed{\frac{1}{2}}", "0.5"),
    (r"\boxed{[0, 1)}", "[0,1)"),
    (r"\boxed{\begin{pmatrix}1\\2\end{pmatrix}}", r"\begin{pmatrix}1\\2\end{pmatrix}"),
    (r"\boxed{x = 3}", "3"),
    (r"\boxed{2\sqrt{2}}", r"\sqrt{8}"),
    (r"\boxed{\{1, 2\}}", "1, 2"),
]


class MathVerifier:
    """Scores a completion's final math answer against `problem.answer`; see the module doc for rules."""

    name = "math"
    _warm = False  # per process: see warm_up

    def __init__(
        self,
        hedging: str = "last",
        require_boxed: bool = True,
        rel_tol: float = 1e-9,
        timeout_s: float = 5.0,
        max_answer_chars: int = 2000,
        answer_form: str = "math",
        answer_format: str = "boxed",
    ):
        if hedging not in extract.HEDGING_POLICIES:
            raise ValueError(f"hedging={hedging!r}; choose from {', '.join(extract.HEDGING_POLICIES)}")
        self.format = ANSWER_FORMATS.get(answer_format)
        self.answer_format = answer_format
        if not 0 <= rel_tol < 1:
            raise ValueError(f"rel_tol={rel_tol!r}; must be in [0, 1)")
        self.hedging, self.require_boxed, self.rel_tol = hedging, bool(require_boxed), float(rel_tol)
        self.timeout_s, self.max_answer_chars = timeout_s, int(max_answer_chars)
        forms.ANSWER_FORMS.check(answer_form)
        self.answer_form = answer_form

    def __repr__(self) -> str:
        return (
            f"MathVerifier(hedging={self.hedging!r}, require_boxed={self.require_boxed}, "
            f"rel_tol={self.rel_tol}, timeout_s={self.timeout_s}, answer_form={self.answer_form!r}, "
            f"answer_format={self.answer_format!r})"
        )

    def warm_up(self) -> None:
        """Pay sympy's first-use costs (lazy imports, caches: ~1 s) once per process, outside any deadline.

        Without it the first symbolic comparison in a process can exceed a short deadline and turn a
        correct answer into `timeout`. The pool calls it before forking, so workers start warm.
        """
        if MathVerifier._warm:
            return
        MathVerifier._warm = True
        for completion, gold in _WARM_UP:
            self._score(completion, gold)

    def score(self, completion: str, problem) -> Verdict:
        """Verdict for one completion; `problem` is a Problem (gold = .answer) or the gold string itself."""
        self.warm_up()
        gold = problem if isinstance(problem, str) else getattr(problem, "answer", None)
        completion = completion_text(completion)
        try:
            return call_with_deadline(lambda: self._score(completion, gold), self.timeout_s)
        except TimedOut as e:
            return Verdict("timeout", 0.0, None, f"verification {e}")
        except RecursionError:
            return Verdict("error", 0.0, None, "RecursionError while parsing")
        except Exception as e:  # a verifier never raises for bad model output
            return Verdict("error", 0.0, None, f"{type(e).__name__}: {e}"[:300])

    def _score(self, completion, gold) -> Verdict:
        gold_text = "" if gold is None else str(gold)
        gold_parsed = equiv.parse_gold(gold_text)
        if not gold_parsed:
            return Verdict("invalid_gold", 0.0, None, f"gold {gold_text[:80]!r} does not parse")
        if not isinstance(completion, str) or not completion.strip():
            return Verdict("no_answer", 0.0, None, "empty completion")
        g = gold_parsed[0]
        boxes = self.format.find(completion)
        if not boxes:
            return self._score_unboxed(completion, g, gold_text)
        group = extract.final_group(completion, boxes, self.hedging)
        shown = " | ".join(b.content for b in group)
        values = []
        for box in group:
            refused = guard.refuse(box.content, self.max_answer_chars)
            if refused:
                return Verdict(refused[0], 0.0, shown, refused[1])
            if self.format.free_text and extract.prose_hedge_final(box.content):
                return Verdict("multiple_answers", 0.0, shown, "the answer tag offers alternatives ('3 or 5')")
            parsed = self._parse(box.content)
            if equiv.is_parsed(parsed):
                values.append((parsed[0], "%" in box.content))
        if not values:
            return Verdict("no_answer", 0.0, shown, f"{self.format.container} has no parseable math")
        prose_hedge = extract.prose_hedge_around(completion, group) or (
            self.hedging == "strict" and extract.prose_hedge_anywhere(completion, boxes)
        )
        verdict = self._judge(values, g, gold_text, shown, prose_hedge)
        return self._in_form(verdict, [b.content for b in group], gold_text)

    def _in_form(self, verdict: Verdict, answers: list[str], gold_text: str) -> Verdict:
        """A correct verdict whose answer is not in the task's form (forms.py) becomes wrong: `8 - 3` equals 5,
        but a number was asked for. Hedging and wrong answers keep their own verdicts."""
        if verdict.status != "correct":
            return verdict
        off = next((why for a in answers if (why := forms.check_form(self.answer_form, a, gold_text))), None)
        return Verdict("wrong", 0.0, verdict.extracted, f"answer form {self.answer_form}: {off}") if off else verdict

    def _parse(self, content: str) -> list:
        """A final answer's content: LaTeX as inside a box; in an answer tag, else math-verify's text extraction."""
        if not content:
            return []
        parsed = equiv.parse_boxed(content)
        if self.format.free_text and not equiv.is_parsed(parsed):
            parsed = equiv.parse_free_text(content)
        return parsed

    def _score_unboxed(self, completion: str, g, gold_text: str) -> Verdict:
        if self.require_boxed:
            return Verdict("no_answer", 0.0, None, f"no {self.format.missing} (require_boxed=True)")
        if extract.prose_hedge_final(completion):
            return Verdict("multiple_answers", 0.0, None, "final line offers alternatives ('3 or 5')")
        tail = completion[-self.max_answer_chars :]
        refused = guard.refuse(tail, 10 * self.max_answer_chars)
        if refused:
            return Verdict(refused[0], 0.0, None, refused[1])
        parsed = equiv.parse_free_text(completion)
        if not equiv.is_parsed(parsed):
            return Verdict("no_answer", 0.0, None, "no answer found in the text")
        return self._in_form(
            self._judge([(parsed[0], False)], g, gold_text, str(parsed[1]), False), [str(parsed[1])], gold_text
        )

    def _judge(self, values: list, g, gold_text: str, shown: str, prose_hedge: bool) -> Verdict:
        """values: [(parsed answer, written as percent)] from the final group; one verdict for all."""
        gold_multi = equiv.is_multi(g) or not equiv.is_scalar(g)
        distinct: list = []
        for v, pct in values:
            if not any(equiv.answers_equal(d, v, self.rel_tol) for d, _ in distinct):
                distinct.append((v, pct))
        if len(distinct) > 1:
            if not equiv.is_multi(g):
                return Verdict("multiple_answers", 0.0, shown, f"{len(distinct)} distinct answers offered together")
            distinct = [(sympy.FiniteSet(*(v for v, _ in distinct)), False)]
        v, pct = distinct[0]
        if not gold_multi and (equiv.is_multi(v) or prose_hedge):
            why = "a set of answers in the box" if equiv.is_multi(v) else "another answer offered in prose"
            return Verdict("multiple_answers", 0.0, shown, why)
        ok = equiv.answers_equal(g, v, self.rel_tol, ("%" in gold_text, pct))
        return Verdict(
            "correct" if ok else "wrong", 1.0 if ok else 0.0, shown, "matches gold" if ok else "differs from gold"
        )
