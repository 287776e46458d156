"""Word problems about prices, for training the model to use a tool of your own (mytools.unit_price) from reference
traces written by a function of the row (docs/your-data.md, "Your own tool"): `python docs/examples/unit_prices/make.py
[OUT_DIR]` writes train.jsonl (50 a band) and heldout.jsonl (20 a band) next to this file, or into OUT_DIR.

Bands: `1-unit` (the price of one item of a pack), `2-buy` (the price of several items at a pack's price), `3-compare`
(the lower price of one item of two offers). Besides `prompt`, `answer` and `band`, each row has the numbers a
reference trace calls the tool with: `offers` ([[price, count], ...]) and `buy`. Every price divides into whole
cents, so the gold is exact. Deterministic in SEED; a held-out question that rlvr's contamination check would call a
copy of a training one, or that holds its own answer as a number, is drawn again (as word_problems/make.py does).
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path

SEED = 51
PER_BAND = {"train": 50, "heldout": 20}
SHOPS = ["the corner shop", "the market", "the bakery", "the kiosk", "the supermarket", "the stall", "the pharmacy"]
ITEMS = ["pens", "eggs", "apples", "batteries", "candles", "rolls", "notebooks", "soaps", "bulbs", "lemons"]
NAMES = ["Amir", "Bea", "Carlos", "Dana", "Emeka", "Freya", "Goran", "Hiro", "Ines", "Jamal", "Kira", "Luis"]


def money(cents: int) -> str:
    """The gold as a number: 1.5, not 1.50 (the number grader compares values either way)."""
    return f"{cents / 100:.2f}".rstrip("0").rstrip(".")


def price(cents: int) -> str:
    """A price in a question, as a shop writes it: 41.80."""
    return f"{cents / 100:.2f}"


def offer(r: random.Random) -> tuple[int, int]:
    """(cents for one item, items in the pack): a pack price that divides into whole cents."""
    return r.randint(15, 450), r.randint(3, 24)


def one_unit(r: random.Random, item: str) -> tuple[str, int, list, int]:
    unit, count = offer(r)
    shop = r.choice(SHOPS)
    text = f"At {shop}, a pack of {count} {item} costs {price(unit * count)} dollars. What does one of the {item} cost, in dollars?"
    return text, unit, [[unit * count / 100, count]], 1


def some(r: random.Random, item: str) -> tuple[str, int, list, int]:
    unit, count = offer(r)
    buy = r.choice([n for n in range(2, 30) if n != count])
    name = r.choice(NAMES)
    text = (
        f"{count} {item} cost {price(unit * count)} dollars together. {name} wants {buy} {item} at the same price. "
        f"How many dollars is that?"
    )
    return text, unit * buy, [[unit * count / 100, count]], buy


def compare(r: random.Random, item: str) -> tuple[str, int, list, int]:
    (u1, c1), (u2, c2) = offer(r), offer(r)
    while u2 == u1:
        u2 = r.randint(15, 450)
    s1, s2 = r.sample(SHOPS, 2)
    text = (
        f"{s1.capitalize()} sells {c1} {item} for {price(u1 * c1)} dollars. {s2.capitalize()} sells {c2} {item} for "
        f"{price(u2 * c2)} dollars. What is the lower price of one of the {item}, in dollars?"
    )
    return text, min(u1, u2), [[u1 * c1 / 100, c1], [u2 * c2 / 100, c2]], 1


BANDS = {"1-unit": one_unit, "2-buy": some, "3-compare": compare}


def problems(seed: int = SEED) -> dict[str, list[dict]]:
    """{"train": rows, "heldout": rows}: PER_BAND distinct questions a band in each, checked as rlvr eval checks them."""
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
                    text, cents, offers, buy = make(r, r.choice(ITEMS))
                    answer = money(cents)
                    copy = split != "train" and find_contamination(train, [Problem("q", text)])
                    leak = find_leaks([Problem("q", text, answer)])
                    if text not in seen and not copy and not leak:
                        break
                seen.add(text)
                row = {"id": f"{split}-{band}-{i:02d}", "prompt": text, "answer": answer, "band": band}
                out[split].append({**row, "offers": offers, "buy": buy})
    return out


def main(argv: list[str]) -> None:
    folder = Path(argv[0]) if argv else Path(__file__).parent
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in problems().items():
        (folder / f"{split}.jsonl").write_text("".join(json.dumps(row) + "\n" for row in rows))
        print(f"{folder / split}.jsonl: {len(rows)} problems")


if __name__ == "__main__":
    main(sys.argv[1:])
