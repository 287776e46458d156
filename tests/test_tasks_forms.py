"""Answer forms, table-driven: which answers are numerals (and why the others are not), and what the number
form changes in grading: the unevaluated expressions a policy could copy from the problem score 0."""

import pytest

from rlvr.tasks.forms import check_form, number_form
from rlvr.verifiers.math import MathVerifier

NUMERALS = [  # (answer as boxed, gold, why it is a numeral)
    ("5", "5", "digits"),
    ("-4", "-4", "a sign"),
    ("− 4", "-4", "a unicode minus and a space"),
    ("5.0", "5", "a decimal"),
    (".5", "0.5", "a decimal without its leading zero"),
    ("1,292", "1292", "a thousands separator"),
    ("1{,}292", "1292", "LaTeX's thousands separator"),
    ("1\\,292", "1292", "a thin space between groups"),
    ("\\$5", "5", "currency before it"),
    ("-\\$5", "-5", "a sign before the currency"),
    ("50\\%", "50", "a percent sign after it"),
    ("5 \\text{ apples}", "5", "a unit in \\text"),
    ("12 cm", "12", "a bare unit word"),
    ("3/4", "3/4", "a fraction in lowest terms where the gold is a fraction"),
    ("\\frac{3}{4}", "\\frac{3}{4}", "a LaTeX fraction where the gold is one"),
    ("\\dfrac{3}{4}", "3/4", "\\dfrac too"),
    ("-\\frac{1}{2}", "-1/2", "a negative fraction"),
    ("7.", "7", "a full stop after the number"),
]
NOT_NUMERALS = [  # (answer, gold, why not)
    ("8 - 3", "5", "a difference to evaluate"),
    ("2+3", "5", "a sum to evaluate"),
    ("10/2", "5", "a quotient, where the gold is an integer"),
    ("\\frac{10}{2}", "5", "a LaTeX quotient, where the gold is an integer"),
    ("6/8", "3/4", "a fraction not in lowest terms"),
    ("5/1", "5", "a denominator of one"),
    ("3 \\times 4", "12", "a product"),
    ("2^3", "8", "a power"),
    ("\\sqrt{49}", "7", "a root"),
    ("x", "5", "a variable"),
    ("x = 5", "5", "an equation"),
    ("1e5", "100000", "scientific notation is a computation here"),
    ("12 \\cdot 3 - 1", "35", "a whole computation"),
    ("", "5", "nothing"),
]


@pytest.mark.parametrize("answer, gold, why", NUMERALS)
def test_numerals_have_the_number_form(answer, gold, why):
    assert number_form(answer, gold) is None, why


@pytest.mark.parametrize("answer, gold, why", NOT_NUMERALS)
def test_expressions_do_not_have_the_number_form(answer, gold, why):
    assert number_form(answer, gold), why


def test_every_answer_has_the_math_form_and_unknown_forms_are_refused():
    assert check_form("math", "8 - 3", "5") is None
    with pytest.raises(ValueError, match="answer_form: unknown answer form 'words'; choose from math, number"):
        check_form("words", "5")
    with pytest.raises(ValueError, match="answer_form"):
        MathVerifier(answer_form="words")


@pytest.mark.parametrize(
    "completion, gold, status",
    [
        (r"\boxed{8 - 3}", "5", "wrong"),
        (r"\boxed{2+3}", "5", "wrong"),
        (r"\boxed{10/2}", "5", "wrong"),
        (r"\boxed{5}", "5", "correct"),
        (r"\boxed{5.0}", "5", "correct"),
        (r"\boxed{1,292}", "1292", "correct"),
        (r"\boxed{0.75}", "3/4", "correct"),
        (r"\boxed{\frac{3}{4}}", "3/4", "correct"),
        (r"\boxed{6}", "5", "wrong"),  # a numeral still has to be the right one
        (r"\boxed{3} or \boxed{5}", "5", "multiple_answers"),  # hedging rules come first
        (r"\boxed{8 - 3} or \boxed{5}", "5", "wrong"),  # one value twice, not a hedge; but one box is an expression
    ],
)
def test_the_number_form_in_grading(completion, gold, status):
    v = MathVerifier(answer_form="number").score(completion, gold)
    assert v.status == status and v.reward == float(status == "correct"), v
    if status == "wrong" and "boxed{8" in completion:
        assert "expression to evaluate" in v.detail


def test_the_math_form_keeps_math_style_answers():
    """MATH-style golds are expressions: the default form compares them as before."""
    v = MathVerifier()
    assert v.score(r"\boxed{8 - 3}", "5").status == "correct"
    assert v.score(r"\boxed{2\sqrt{2}}", r"\sqrt{8}").status == "correct"
    assert v.score(r"\boxed{\frac{6}{8}}", "3/4").status == "correct"


def test_the_audit_suites_hold_in_both_forms():
    """The built-in math suites keep their scores in the math form; the number form adds the unevaluated-expression
    hacks (all refused) and numeral equivalences (all accepted)."""
    from rlvr.verifiers.audit import audit
    from rlvr.verifiers.audit_cases import EQUIVALENCES, HACKS, NUMBER_EQUIVALENCES, NUMBER_HACKS

    math_report = audit(MathVerifier(), 0, 5.0, HACKS, EQUIVALENCES)
    assert math_report.hacks_accepted == 0 and math_report.false_reject == 0
    number_report = audit(MathVerifier(answer_form="number"), 0, 5.0, HACKS + NUMBER_HACKS, NUMBER_EQUIVALENCES)
    assert number_report.hacks_accepted == 0 and number_report.false_reject == 0
    assert len(NUMBER_HACKS) >= 10 and {g for g, *_ in NUMBER_HACKS} == {"unevaluated_expression"}
