"""Scoring speed of the math verifier on 1,000 ordinary completions (prints figures, asserts nothing).

    PYTHONPATH=src python benchmarks/bench_verifier.py [--n 1000] [--workers 0 2]

"Ordinary" = what a policy on the default task writes: some reasoning, then one boxed answer; a mix of
integers, fractions, radicals and wrong answers, plus a few hedges and missing boxes.
"""

import argparse
import random
import time

from rlvr.tasks.base import Problem
from rlvr.verifiers.math import MathVerifier
from rlvr.verifiers.pool import score_batch

ANSWERS = [
    ("42", "42"),
    ("17", "-17"),
    (r"\frac{3}{4}", "0.75"),
    (r"2\sqrt{2}", r"\sqrt{8}"),
    ("1,000", "1000"),
    ("7", "8"),
    (r"\frac{1}{2}", r"\frac{2}{4}"),
    ("3.5", r"\frac{7}{2}"),
    ("x = 5", "5"),
    ("12", "12"),
]


def make_batch(n: int, seed: int = 0):
    rng = random.Random(seed)
    completions, problems = [], []
    for i in range(n):
        pred, gold = ANSWERS[rng.randrange(len(ANSWERS))]
        if rng.random() < 0.5:  # fresh values, so math-verify's parse caches do not flatter the figure
            k = rng.randint(1, 10**6)
            pred, gold = rng.choice(
                [(str(k), str(k)), (f"\\frac{{{k}}}{{7}}", f"\\frac{{{2 * k}}}{{14}}"), (str(k), str(k + 1))]
            )
        body = "Let me work through this step by step. " * rng.randint(3, 30)
        kind = rng.random()
        if kind < 0.85:
            text = f"{body}So the answer is $\\boxed{{{pred}}}$."
        elif kind < 0.93:
            text = f"{body}It is \\boxed{{{pred}}} or \\boxed{{{gold}}}."
        else:
            text = f"{body}The answer is {pred}."
        completions.append(text)
        problems.append(Problem(str(i), "q", gold))
    return completions, problems


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1000)
    ap.add_argument("--workers", type=int, nargs="+", default=[0, 2])
    args = ap.parse_args()
    completions, problems = make_batch(args.n)
    verifier = MathVerifier()
    t = time.perf_counter()
    verifier.warm_up()
    print(f"warm-up (once per process): {time.perf_counter() - t:.2f} s")
    for workers in args.workers:
        t = time.perf_counter()
        verdicts = score_batch(verifier, completions, problems, workers=workers, timeout_s=5.0)
        dt = time.perf_counter() - t
        counts = {}
        for v in verdicts:
            counts[v.status] = counts.get(v.status, 0) + 1
        print(f"workers={workers}: {args.n} completions in {dt:.2f} s = {100 * dt / args.n:.3f} s per 100; {counts}")


if __name__ == "__main__":
    main()
