"""Contamination between training and evaluation problems, and gold answers leaking into prompts."""

import pytest

from rlvr.tasks.base import Problem
from rlvr.tasks.hygiene import (
    ContaminationError,
    check_contamination,
    find_contamination,
    find_leaks,
    normalize_text,
    word_ngrams,
)


def P(pid, prompt, answer="1"):
    return Problem(id=pid, prompt=prompt, answer=answer)


TRAIN = [
    P("t1", "A farmer has 17 sheep and buys 5 more. How many sheep does the farmer have now?"),
    P("t2", "Compute the sum of the first 20 positive odd integers."),
    P("t3", "Find the remainder when 2^100 is divided by 7."),
]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("What  is 2+2?", "what is 2 + 2"),  # operators are meaning, not punctuation
        ("3 - 4", "3 - 4"),
        ("HELLO,\tWorld!\n", "hello world"),
        ("It costs 1,000 dollars", "it costs 1000 dollars"),
        ("ｆｕｌｌ width", "full width"),  # NFKC folds full-width letters
        ("3.5 vs 35", "3 5 vs 35"),  # punctuation splits, never joins, numbers
    ],
)
def test_normalize_text(text, expected):
    assert normalize_text(text) == expected


def test_word_ngrams_counts_windows():
    assert word_ngrams("a b c d", 2) == {("a", "b"), ("b", "c"), ("c", "d")}
    assert word_ngrams("a b", 3) == set()


def test_planted_duplicate_with_other_spacing_and_case_is_caught():
    evaluation = [P("e1", "Solve x + 1 = 3."), P("e2", "  find THE remainder when 2^100   is divided by 7 ")]
    hits = find_contamination(TRAIN, evaluation)
    assert [(h.train_id, h.eval_id, h.kind, h.share) for h in hits] == [("t3", "e2", "exact", 1.0)]
    with pytest.raises(ContaminationError, match="1 of 2 problems"):
        check_contamination(TRAIN, evaluation)
    assert check_contamination(TRAIN, evaluation, allow_contaminated=True) == hits


def test_near_copy_is_caught_by_ngram_overlap():
    # The training problem with an instruction appended: most of its 8-grams survive.
    evaluation = [P("e1", TRAIN[0].prompt + " Put the answer in a box.")]
    (hit,) = find_contamination(TRAIN, evaluation, n=8)
    assert (hit.train_id, hit.kind) == ("t1", "ngram")
    # The original's 17 words give 10 shared 8-grams, out of the 16 that the 23-word copy has.
    assert hit.share == pytest.approx(10 / 16)
    assert find_contamination(TRAIN, evaluation, n=8, threshold=0.7) == []


def test_clean_split_passes_including_same_template_other_numbers():
    evaluation = [
        P("e1", "A farmer has 23 sheep and buys 9 more. How many sheep does the farmer have now?"),
        P("e2", "Compute the sum of the first 30 positive even integers."),
        P("e3", "What is 6 times 7?"),
    ]
    assert check_contamination(TRAIN, evaluation) == []


def test_contamination_rejects_bad_settings():
    with pytest.raises(ValueError):
        find_contamination(TRAIN, TRAIN, threshold=0)


@pytest.mark.parametrize(
    "prompt, answer, leaked, why",
    [
        ("The answer is 42. What is 6*7?", "42", True, "gold number stated as a token"),
        ("What is 6*7? (hint: 420 / 10)", "42", False, "42 only inside 420"),
        ("Round 3.42 to one decimal place.", "42", False, "42 only after a decimal point"),
        ("How many legs do 2 spiders have? Not 2.", "2", False, "single-digit gold is not searched"),
        ("Total is 1,250 apples; how many apples?", "1250", True, "thousands separator folded"),
        ("Is 17 prime? Answer yes or no.", "yes", True, "word gold as a whole word"),
        ("What do you say to eyes? Say hi.", "yes", False, "'yes' only inside 'eyes'"),
        ("Simplify $\\frac{1}{2} + 0$.", "$\\frac{1}{2}$", True, "latex gold, dollars stripped"),
        ("Compute 12 + 30.", "42", False, "clean prompt"),
        ("Show that n divides n^2 - n for every n.", "n", False, "one-character symbolic gold is not searched"),
        (
            "Which is larger: x or y? Answer 'always larger' or 'never'.",
            "always larger",
            True,
            "multiple choice lists its answer: reported, for a person to judge",
        ),
    ],
)
def test_leak_check_table(prompt, answer, leaked, why):
    leaks = find_leaks([P("p", prompt, answer)])
    assert bool(leaks) == leaked, why
    if leaked:
        assert leaks[0].problem_id == "p" and leaks[0].answer == answer


def test_leak_check_can_search_single_digits_when_asked():
    problems = [P("p", "Two plus two is 4; what is 2 + 2?", "4")]
    assert find_leaks(problems) == []
    assert len(find_leaks(problems, min_numeric_digits=1)) == 1


# ---- templates are not overlap ----------------------------------------------------------------------------

PREAMBLE = (
    "You are a careful solver. Here is a worked example of the expected format: the question, a short "
    "derivation, then the final answer written inside a box, and nothing after the box. Now solve the "
    "next problem in the same way, showing your steps before the answer. Problem: "
)
FAMILIES = [
    "How many legs do {a} spiders and {b} cats have in total when they all stand in a row?",
    "What is the greatest common divisor of {a} and {b} when both are written in base ten?",
    "Sort the numbers {a}, {b} and {c} from the smallest to the largest and give the middle one.",
    "Count the letters r in the word strawberry repeated {a} times, then add {b} to that count.",
    "A train leaves at {a} minutes past noon and travels {b} minutes; at what minute does it arrive?",
    "What is the sum of the digits of {a} multiplied by {b}, written as a single whole number?",
    "Alice has {a} marbles and gives {b} of them to Bob, who already had {c}; how many has Bob?",
    "Compute {a} plus {b} minus {c}, and then double the result before writing the final answer.",
]


def family_problems(prefix, start, n_per_family):
    out = []
    for f, template in enumerate(FAMILIES):
        for i in range(start, start + n_per_family):
            a, b, c = 3 + 7 * i + f, 11 + 13 * i, 5 + 3 * i + f
            out.append(P(f"{prefix}{f}-{i}", PREAMBLE + template.format(a=a, b=b, c=c)))
    return out


def test_problems_sharing_only_a_long_preamble_pass():
    """192 problems from eight families behind one long preamble (the case refused before): the held-out
    problems differ in their questions' numbers, so nothing overlaps."""
    train, heldout = family_problems("t", 0, 24), family_problems("h", 100, 4)
    assert len(train) == 192
    assert find_contamination(train, heldout) == []


LONG_QUESTION = (
    "A bakery sells muffins in boxes of six and cookies in bags of ten. On Monday it sold forty two "
    "muffins and ninety cookies, and on Tuesday it sold twice as many muffins but only half as many "
    "cookies as on Monday. How many boxes and bags did the bakery sell over the two days together?"
)


def test_a_reworded_copy_behind_the_same_preamble_is_caught():
    """The question's own wording still counts, behind the shared preamble or behind another one. (A one-word
    change in a question shorter than about two 13-word windows is beyond any n-gram check, as before.)"""
    train = family_problems("t", 0, 24) + [P("t-bakery", PREAMBLE + LONG_QUESTION)]
    reworded = P("h-copy", PREAMBLE + LONG_QUESTION.replace("twice as many muffins", "double the muffins"))
    hits = find_contamination(train, [reworded])
    assert [(h.train_id, h.kind) for h in hits] == [("t-bakery", "ngram")] and hits[0].share >= 0.5
    other = P("h-other", "Answer briefly and box the result. " + LONG_QUESTION)
    assert [(h.train_id, h.kind) for h in find_contamination(train, [other])] == [("t-bakery", "ngram")]
    # and the same question behind the same preamble is an exact copy
    assert [h.kind for h in find_contamination(train, [P("h-same", PREAMBLE + LONG_QUESTION)])] == ["exact"]
