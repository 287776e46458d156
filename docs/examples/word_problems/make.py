"""Short word problems with numeric answers in three bands (1-step, 2-step, 3-step), for trying rlvr on data of
your own (docs/your-data.md): `python docs/examples/word_problems/make.py [OUT_DIR]` writes train.jsonl (30 a band)
and heldout.jsonl (20 a band) next to this file, or into OUT_DIR.

Deterministic in SEED: the same files on every machine, so the figures measured on them can be made again. The
templates differ from the built-in `arithmetic` task's (several operations, money, time, distances), and no
question is in both files."""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 50
PER_BAND = {"train": 30, "heldout": 20}
NAMES = ["Amir", "Bea", "Carlos", "Dana", "Emeka", "Freya", "Goran", "Hiro", "Ines", "Jamal", "Kira", "Luis"]
THINGS = ["stamps", "beads", "cookies", "stickers", "marbles", "tulips", "crayons", "buttons"]


def one_step(r: random.Random, name: str, thing: str) -> tuple[str, int, str]:
    a, b = r.randint(12, 90), r.randint(2, 9)
    k = r.randint(2, 12)
    return r.choice(
        [
            (
                f"{name} has {a} {thing} and buys {b * 3} more. How many {thing} does {name} have now?",
                a + b * 3,
                f"{a} + {b * 3} = {a + b * 3}",
            ),
            (
                f"A shelf holds {a} jars. {b} jars are taken away. How many jars are left on the shelf?",
                a - b,
                f"{a} - {b} = {a - b}",
            ),
            (f"Each bag holds {a} {thing}. How many {thing} are in {b} bags?", a * b, f"{a} * {b} = {a * b}"),
            (
                f"{k * b} {thing} are shared equally among {b} friends. How many {thing} does each friend get?",
                k,
                f"{k * b} / {b} = {k}",
            ),
            (
                f"A train travels {a} km every hour. How many km does it travel in {b} hours?",
                a * b,
                f"{a} * {b} = {a * b}",
            ),
            (
                f"{name} had {a} dollars and spent {b * 2} dollars on lunch. How many dollars are left?",
                a - b * 2,
                f"{a} - {b * 2} = {a - b * 2}",
            ),
            (
                f"A class has {a} boys and {a // 2 + b} girls. How many children are in the class?",
                a + a // 2 + b,
                f"{a} + {a // 2 + b} = {a + a // 2 + b}",
            ),
            (
                f"A rope is {a} meters long. {name} cuts off {b} meters. How long is the rope now, in meters?",
                a - b,
                f"{a} - {b} = {a - b}",
            ),
        ]
    )


def two_step(r: random.Random, name: str, thing: str) -> tuple[str, int, str]:
    a, b, c = r.randint(3, 9), r.randint(4, 12), r.randint(2, 15)
    n = r.randint(20, 60)
    return r.choice(
        [
            (
                f"{name} buys {a} packs of {b} {thing} and gives away {c}. How many {thing} are left?",
                a * b - c,
                f"{a} * {b} = {a * b}, then {a * b} - {c} = {a * b - c}",
            ),
            (
                f"A farm has {n} cows and {b * 2} sheep. The farmer sells {c} sheep. How many animals are left?",
                n + b * 2 - c,
                f"{n} + {b * 2} = {n + b * 2}, then {n + b * 2} - {c} = {n + b * 2 - c}",
            ),
            (
                f"{name} reads {b} pages a day for {a} days, then {c} more pages. How many pages is that in all?",
                a * b + c,
                f"{b} * {a} = {a * b}, then {a * b} + {c} = {a * b + c}",
            ),
            (
                f"A box has {a * c} red pens and {b * c} blue pens. They are put into {c} equal groups. How many pens "
                f"are in each group?",
                a + b,
                f"{a * c} + {b * c} = {(a + b) * c}, then {(a + b) * c} / {c} = {a + b}",
            ),
            (
                f"Tickets cost {a} dollars each. {name} buys {b} tickets and pays with {a * b + c} dollars. How many "
                f"dollars of change does {name} get?",
                c,
                f"{a} * {b} = {a * b}, then {a * b + c} - {a * b} = {c}",
            ),
            (
                f"{name} is {b} years old. {name}'s sister is {a} years older. How old will the sister be in {c} "
                "years?",
                a + b + c,
                f"{b} + {a} = {a + b}, then {a + b} + {c} = {a + b + c}",
            ),
            (
                f"A baker makes {a} trays of {b} rolls and drops {c} of them. How many rolls are left?",
                a * b - c,
                f"{a} * {b} = {a * b}, then {a * b} - {c} = {a * b - c}",
            ),
            (
                f"A tank holds {n + a * c} liters. {a} liters are used each day for {c} days. How many liters are "
                f"left?",
                n,
                f"{a} * {c} = {a * c}, then {n + a * c} - {a * c} = {n}",
            ),
        ]
    )


def three_step(r: random.Random, name: str, thing: str) -> tuple[str, int, str]:
    a, b, c, d = r.randint(2, 8), r.randint(3, 9), r.randint(2, 6), r.randint(2, 9)
    n = r.randint(30, 80)
    return r.choice(
        [
            (
                f"{name} buys {a} notebooks at {b} dollars each and {c} pens at {d} dollars each. How many dollars "
                f"does {name} spend?",
                a * b + c * d,
                f"{a} * {b} = {a * b}, {c} * {d} = {c * d}, then {a * b} + {c * d} = {a * b + c * d}",
            ),
            (
                f"A library has {n} books. It buys {a} boxes of {b} books and gives away {d}. How many books does it "
                f"have now?",
                n + a * b - d,
                f"{a} * {b} = {a * b}, {n} + {a * b} = {n + a * b}, then {n + a * b} - {d} = {n + a * b - d}",
            ),
            (
                f"{name} saves {b} dollars a week for {a} weeks, spends {c} dollars, then earns {d} more. How many "
                f"dollars does {name} have now?",
                a * b - c + d,
                f"{b} * {a} = {a * b}, {a * b} - {c} = {a * b - c}, then {a * b - c} + {d} = {a * b - c + d}",
            ),
            (
                f"A hall has {a} rows of {b * d} chairs. The chairs are moved into {d} rooms equally, and {c} chairs "
                f"are added to each room. How many chairs are in each room?",
                a * b + c,
                f"{a} * {b * d} = {a * b * d}, {a * b * d} / {d} = {a * b}, then {a * b} + {c} = {a * b + c}",
            ),
            (
                f"A shop has {n} {thing}. It sells {a} in the morning and {b} in the afternoon, then gets {c} boxes of "
                f"{d} more. How many {thing} does it have now?",
                n - a - b + c * d,
                f"{n} - {a} - {b} = {n - a - b}, {c} * {d} = {c * d}, then {n - a - b} + {c * d} = {n - a - b + c * d}",
            ),
            (
                f"{name} walks {b} km on Monday and twice as far on Tuesday. On Wednesday {name} walks {min(a, b)} km "
                f"less than on Tuesday. How many km does {name} walk in the three days?",
                b + 2 * b + (2 * b - min(a, b)),
                f"Tuesday 2 * {b} = {2 * b}, Wednesday {2 * b} - {min(a, b)} = {2 * b - min(a, b)}, then {b} + {2 * b}"
                f" + {2 * b - min(a, b)} = {b + 2 * b + (2 * b - min(a, b))}",
            ),
        ]
    )


BANDS = {"1-step": one_step, "2-step": two_step, "3-step": three_step}


def problems(seed: int = SEED) -> dict[str, list[dict]]:
    """{"train": rows, "heldout": rows}: PER_BAND distinct questions a band in each. A held-out question that rlvr's
    contamination check would call a copy of a training one (rlvr.tasks.hygiene: the same text, or most of its
    13-word windows) is drawn again, so that `rlvr eval` takes the held-out file as it is; so is a question that holds
    its own answer as a number (rlvr.tasks.hygiene's leak check)."""
    from rlvr.tasks.base import Problem
    from rlvr.tasks.hygiene import find_contamination, find_leaks

    r = random.Random(seed)
    out: dict[str, list[dict]] = {split: [] for split in PER_BAND}
    seen: set[str] = set()
    for split, count in PER_BAND.items():
        train = [Problem(row["id"], row["prompt"]) for row in out["train"]]
        for band, make in BANDS.items():
            for i in range(count):
                while True:
                    text, answer, work = make(r, r.choice(NAMES), r.choice(THINGS))
                    copy = split != "train" and find_contamination(train, [Problem("q", text)])
                    leak = find_leaks([Problem("q", text, str(answer))])  # the answer as a number in the question
                    if text not in seen and answer > 0 and not copy and not leak:
                        break
                seen.add(text)
                row = {"id": f"{split}-{band}-{i:02d}", "prompt": text, "answer": str(answer), "band": band}
                if split == "train":  # a worked solution, for SFT before RL (sft.source: reference reads `trace`)
                    row["trace"] = f"{work}.\nThe answer is \\boxed{{{answer}}}."
                out[split].append(row)
    return out


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else Path(__file__).parent
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in problems().items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        print(f"{folder / split}.jsonl: {len(rows)} problems")


if __name__ == "__main__":
    main(sys.argv[1:])
