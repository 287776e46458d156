"""Word problems of two to five steps, written as GSM8K writes them (a `question`, and an `answer` that is the worked
solution ending `#### N`), for training a model that reasons (issue 72's experiment, docs/results.md):
`python docs/examples/multi_step/make.py [OUT_DIR]` writes train.jsonl (40 a band) and heldout.jsonl (20 a band) next
to this file, or into OUT_DIR.

Each problem is one quantity carried through a chain of operations (more, fewer, packs of, times, shared equally), so
a band's number of steps is the number of operations; every intermediate value is a positive whole number. The
0.5B instruct model this was made for solves the short chains and fails the long ones (docs/results.md), which is
where RLVR has variance to learn from. Deterministic in SEED; no held-out question is a training one, and none
holds its own answer."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 72
PER_BAND = {"train": 40, "heldout": 20}
BANDS = {"2-step": 2, "3-step": 3, "4-step": 4, "5-step": 5}
NAMES = ["Amara", "Bilal", "Chloe", "Dmitri", "Esi", "Farid", "Greta", "Hamza", "Iris", "Jonas", "Keiko", "Lucas"]
THINGS = ["apples", "stamps", "marbles", "pencils", "stickers", "cookies", "shells", "coins"]


def step(r: random.Random, x: int, thing: str) -> tuple[str, str, int] | None:
    """One operation on the quantity x: (sentence, worked line, new x), or None when it would not stay whole."""
    kind = r.choice(["more", "fewer", "packs", "times", "share"])
    if kind == "more":
        v = r.randint(5, 60)
        return f"Then they get {v} more {thing}.", f"{x} + {v} = {x + v}", x + v
    if kind == "fewer":
        v = r.randint(2, max(2, x - 1))
        if v >= x:
            return None
        return f"Then they give away {v} {thing}.", f"{x} - {v} = {x - v}", x - v
    if kind == "packs":
        p, q = r.randint(2, 9), r.randint(3, 12)
        return (
            f"Then they buy {p} packs with {q} {thing} in each.",
            f"{p} * {q} = {p * q}, and {x} + {p * q} = {x + p * q}",
            x + p * q,
        )
    if kind == "times":
        m = r.choice([2, 3])
        if x * m > 2000:
            return None
        word = {2: "doubles", 3: "triples"}[m]
        return f"Then the number of {thing} {word}.", f"{x} * {m} = {x * m}", x * m
    m = r.choice([2, 3, 4, 5])
    if x % m or x // m < 2:
        return None
    return (
        f"Then they share the {thing} equally with {m - 1} friend{'s' * (m > 2)} and keep one share.",
        f"{x} / {m} = {x // m}",
        x // m,
    )


def make(r: random.Random, steps: int) -> tuple[str, str, int]:
    name, thing = r.choice(NAMES), r.choice(THINGS)
    while True:
        x = r.randint(8, 90)
        sentences, lines = [f"{name} has {x} {thing}."], [f"{name} starts with {x} {thing}."]
        while len(lines) <= steps:
            done = step(r, x, thing)
            if done is not None:
                sentence, line, x = done
                sentences.append(sentence)
                lines.append(line + ".")
        if 2 <= x <= 5000:
            question = " ".join(sentences) + f" How many {thing} does {name} have at the end?"
            return question, "\n".join(lines) + f"\n#### {x}", x


def problems(seed: int = SEED) -> dict[str, list[dict]]:
    """{"train": rows, "heldout": rows}: PER_BAND distinct questions a band in each."""
    r, seen = random.Random(seed), set()
    out: dict[str, list[dict]] = {split: [] for split in PER_BAND}
    for split, count in PER_BAND.items():
        for band, steps in BANDS.items():
            rows = out[split]
            while sum(row["band"] == band for row in rows) < count:
                question, answer, x = make(r, steps)
                if question in seen or str(x) in question.split():
                    continue
                seen.add(question)
                rows.append(
                    {"id": f"{split}-{band}-{len(rows):03d}", "question": question, "answer": answer, "band": band}
                )
    return out


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else Path(__file__).parent
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in problems().items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))


if __name__ == "__main__":
    main(sys.argv[1:])
