"""Held-out hygiene: is an evaluation problem also a training problem, and does a prompt give its answer away?

Contamination is checked two ways. A hash of the normalised text catches a copy that differs only in
case, spacing or punctuation. Word n-gram overlap catches a near copy (a reworded sentence, an added
instruction line). Numbers stay tokens of their own, so two instances of one template that differ in
their numbers do not share the n-grams that hold those numbers; a template whose long wording has no
number in it will share n-grams, which is why the threshold is a fraction of the evaluation problem's
n-grams and both it and n can be set.

Text that many training problems share (an instruction, a one-shot preamble, a format line, a generator's
fixed wording) is a template, not a question: an n-gram found in at least TEMPLATE_SHARE of the training
problems (and in at least TEMPLATE_MIN of them) is left out of the overlap, so honest problems behind one
preamble do not look like copies of each other, while the same question told again, behind any preamble,
still shares its own n-grams.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from rlvr.tasks.base import Problem

# Operators and relations carry meaning in math text ("3 + 4" is not "3 - 4"), so they survive as words.
_OPERATOR = re.compile(r"[+\-*/=^<>×÷√]")
_NON_WORD = re.compile(r"[^\w+\-*/=^<>×÷√]+")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}\b)")


class ContaminationError(ValueError):
    """An evaluation set shares problems with the training data; the message names some pairs."""


@dataclass(frozen=True)
class Overlap:
    """One evaluation problem found in the training data: kind is "exact" (same normalised text) or
    "ngram" (share is the fraction of the evaluation problem's n-grams also in the training problem)."""

    train_id: str
    eval_id: str
    kind: str
    share: float


@dataclass(frozen=True)
class Leak:
    """A prompt that contains its own gold answer as a whole token; context shows where."""

    problem_id: str
    answer: str
    context: str


def normalize_text(text: str) -> str:
    """Case, width, spacing and punctuation folded away, operators kept: 'What  is 2+2?' -> 'what is 2 + 2'."""
    text = unicodedata.normalize("NFKC", text).casefold()
    text = _THOUSANDS.sub("", text)  # 1,000 and 1000 are the same number
    text = _OPERATOR.sub(lambda m: f" {m.group()} ", text)
    return " ".join(_NON_WORD.sub(" ", text).replace("_", " ").split())


def text_hash(text: str) -> str:
    return hashlib.sha1(normalize_text(text).encode("utf-8")).hexdigest()


def word_ngrams(text: str, n: int) -> set[tuple[str, ...]]:
    """The set of n-word windows of the normalised text; empty when it has fewer than n words."""
    words = normalize_text(text).split()
    return {tuple(words[i : i + n]) for i in range(len(words) - n + 1)}


# 13-word windows, the usual decontamination length: shorter windows flag template siblings of short
# problems ("Ana has 7 pens and gives away 3" vs "... has 8 pens and gives away 3"), which ask different
# questions; exact copies of short problems are still caught by the normalised-text hash.
NGRAM_N = 13
# An n-gram in at least this share of the training problems (and at least TEMPLATE_MIN of them) is template text.
TEMPLATE_SHARE = 0.05
TEMPLATE_MIN = 3


def find_contamination(
    train: Sequence[Problem], evaluation: Sequence[Problem], n: int = NGRAM_N, threshold: float = 0.5
) -> list[Overlap]:
    """Every (train, eval) pair that is an exact normalised copy, or shares at least `threshold` of the
    evaluation problem's word n-grams. An eval problem with an exact copy is not also reported as ngram.

    Cost: one pass over the training n-grams into an index, then one lookup per evaluation n-gram.
    """
    if n < 1 or not 0 < threshold <= 1:
        raise ValueError(f"need n >= 1 and 0 < threshold <= 1, got n={n}, threshold={threshold}")
    by_hash: dict[str, list[str]] = defaultdict(list)
    index: dict[tuple[str, ...], set[str]] = defaultdict(set)
    for p in train:
        by_hash[text_hash(p.prompt)].append(p.id)
        for g in word_ngrams(p.prompt, n):
            index[g].add(p.id)
    template = template_ngrams(index, len(train))
    hits = []
    for q in evaluation:
        exact = by_hash.get(text_hash(q.prompt), [])
        hits += [Overlap(tid, q.id, "exact", 1.0) for tid in exact]
        grams = word_ngrams(q.prompt, n) - template
        if exact or not grams:
            continue
        shared: dict[str, int] = defaultdict(int)
        for g in grams:
            for tid in index.get(g, ()):
                shared[tid] += 1
        hits += [
            Overlap(tid, q.id, "ngram", cnt / len(grams))
            for tid, cnt in shared.items()
            if cnt / len(grams) >= threshold
        ]
    return hits


def template_ngrams(index: dict[tuple[str, ...], set[str]], n_train: int) -> set[tuple[str, ...]]:
    """The n-grams that many training problems share (see the module doc): index maps n-gram -> problem ids."""
    cutoff = max(TEMPLATE_MIN, TEMPLATE_SHARE * n_train)
    return {g for g, ids in index.items() if len(ids) >= cutoff}


def check_contamination(
    train: Sequence[Problem],
    evaluation: Sequence[Problem],
    name: str = "evaluation set",
    allow_contaminated: bool = False,
    n: int = NGRAM_N,
    threshold: float = 0.5,
) -> list[Overlap]:
    """find_contamination, refusing (ContaminationError) when anything is found unless allow_contaminated.

    Returns the overlaps either way, so a caller that allows them can still report them.
    """
    hits = find_contamination(train, evaluation, n=n, threshold=threshold)
    if hits and not allow_contaminated:
        eval_ids = {h.eval_id for h in hits}
        shown = ", ".join(f"{h.eval_id}~{h.train_id} ({h.kind} {h.share:.2f})" for h in hits[:5])
        raise ContaminationError(
            f"{name}: {len(eval_ids)} of {len(evaluation)} problems overlap the training data "
            f"(e.g. {shown}); fix the split, or pass --allow-contaminated to evaluate anyway"
        )
    return hits


def _answer_pattern(answer: str) -> re.Pattern | None:
    """A regex for the gold as a whole token in normalised-spacing text, or None when it is empty."""
    gold = " ".join(_THOUSANDS.sub("", answer.strip().strip("$").strip()).split())
    if not gold:
        return None
    # Whole token: no word character or decimal point glued on either side, so '12' is not found in
    # '120', '3.12' or 'x12'; a trailing full stop ends a sentence and still counts.
    return re.compile(r"(?<![\w.])" + re.escape(gold) + r"(?![\w]|\.\d)", re.IGNORECASE)


def find_leaks(problems: Sequence[Problem], min_numeric_digits: int = 2) -> list[Leak]:
    """Problems whose prompt contains the gold answer as a whole token.

    A short number is in many honest prompts ('a 2-digit number', 'in 3 steps'), so a purely
    numeric gold with fewer than min_numeric_digits digits is not searched for, nor is a one-character
    gold such as 'n' (the variable the question is about). This is a report: a hit means "look at this
    problem" (a multiple-choice prompt lists its answer on purpose), not proof of a leak.
    """
    leaks = []
    for p in problems:
        if p.answer is None:
            continue
        answer = str(p.answer)
        digits = sum(ch.isdigit() for ch in answer)
        if re.fullmatch(r"\s*-?[\d.,]+\s*", answer) and digits < min_numeric_digits:
            continue
        if len(answer.strip().strip("$").strip()) < 2 and not answer.strip().isdigit():
            continue
        pattern = _answer_pattern(answer)
        text = _THOUSANDS.sub("", " ".join(p.prompt.split()))
        m = pattern.search(text) if pattern else None
        if m:
            leaks.append(Leak(p.id, answer, text[max(0, m.start() - 30) : m.end() + 30]))
    return leaks
