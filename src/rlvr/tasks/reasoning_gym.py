"""Tasks written by others: reasoning-gym's procedural generators (PyPI `reasoning-gym`, offline), graded by rlvr.

Settings: `families` = {name: {weight, config, levels}} (config: the family's own difficulty knobs; levels:
optional {level name: config} merged over it, one band each), `size` (problems over all families, shared by
weight), `seed`, `one_shot` (a solved exchange of the same family before the question), `system_prompt`.

Why not reasoning-gym's own `score_answer` as the reward: it pays partial credit for wrong answers ("1292" for 292
scores 0.75, "-4 or 7" for -4 scores 0.29), reads the first number of a hedge ("288 or 7" scores 1.0), pays 0.01 for
no answer on some families and refuses a right list written without quotes. A GRPO run rewarded that way learns to
hedge. Every family here is graded by an rlvr verifier in the right answer form (GRADERS), through the `routed`
kind: the problem carries its grader. A family without one is refused, naming those that have one.

Problems get stable ids from their normalised question; splits are by id hash, and for gsm_symbolic by template
(its generator), so held-out templates are unseen in training. Bands are the families (or family/level).
"""

from __future__ import annotations

import hashlib

from rlvr.tasks.base import SPLITS, DatasetError, Problem

# family -> the rlvr grader of its answers (a verifier kind and its settings)
NUMBER = {"kind": "math", "answer_form": "number"}
GRADERS: dict[str, dict] = {
    "basic_arithmetic": NUMBER,
    "chain_sum": NUMBER,
    "products": NUMBER,
    "gcd": NUMBER,
    "lcm": NUMBER,
    "leg_counting": NUMBER,
    "letter_counting": NUMBER,
    "count_bits": NUMBER,
    "gsm_symbolic": NUMBER,
    "fraction_simplification": {"kind": "math", "answer_form": "number"},
    "decimal_arithmetic": NUMBER,
    "number_sorting": {"kind": "ordered_list"},
    "countdown": {"kind": "countdown"},
    "spell_backward": {"kind": "text"},
}
# Families whose items carry a worked solution (metadata field), used by `sft.source: reference`.
TRACES = {"gsm_symbolic": "answer_cot"}
SYSTEM = "Solve the problem. Put the final answer inside \\boxed{}."
# Seed offset of the one-shot examples: far from any split's seeds, so an example is never a problem.
ONE_SHOT_SEED = 10_000_019
SPLIT_BUCKETS = {"train": range(0, 80), "validation": range(80, 90), "heldout": range(90, 100)}


def normalise(question: str) -> str:
    return " ".join(question.lower().split())


def _bucket(key: str) -> str:
    n = int(hashlib.sha256(key.encode()).hexdigest(), 16) % 100
    return next(s for s, r in SPLIT_BUCKETS.items() if n in r)


def _dataset(family: str, size: int, seed: int, config: dict):
    import reasoning_gym

    try:
        return reasoning_gym.create_dataset(family, size=size, seed=seed, **config)
    except TypeError as e:  # an unknown difficulty knob: name the family's own
        import dataclasses

        from reasoning_gym.factory import DATASETS

        knobs = [f.name for f in dataclasses.fields(DATASETS[family][1]) if f.name not in ("seed", "size")]
        raise ValueError(f"reasoning_gym family {family!r}: {e}; its settings: {', '.join(knobs)}") from None
    except AssertionError as e:  # the generator's own validation of a value
        raise ValueError(f"reasoning_gym family {family!r}: {e}") from None


def _euclid(a: int, b: int) -> str:
    steps = []
    while b:
        steps.append(f"{a} = {a // b} x {b} + {a % b}")
        a, b = b, a % b
    return "; ".join(steps) + f". The last non-zero remainder is {a}."


def _letters(meta: dict) -> str:
    letter = meta["target_letter"]
    counts = [(w, w.lower().count(letter.lower())) for w in meta["span"]]
    shown = ", ".join(f"{w}: {c}" for w, c in counts)
    return f"Count '{letter}' in each word: {shown}. Total: {' + '.join(str(c) for _, c in counts)} = {sum(c for _, c in counts)}."


# Worked solutions written from an item's metadata, for the one-shot exchange: a solved example that shows the
# steps, not only a box (a bare "\boxed{1}" example taught the policy to answer at once, and then to guess).
WORKED = {
    "basic_arithmetic": lambda m, a: f"{m['expression']} = {a}.",
    "chain_sum": lambda m, a: f"{m['expression']} = {a}.",
    "products": lambda m, a: f"{m['expression']} = {a}.",
    "gcd": lambda m, a: "Euclid's algorithm: " + _euclid(*m["numbers"][:2]) if len(m["numbers"]) == 2 else "",
    "lcm": lambda m, a: (
        (
            "lcm(a, b) = a x b / gcd(a, b). "
            + _euclid(*m["numbers"][:2])
            + f" So lcm = {m['numbers'][0]} x {m['numbers'][1]} / gcd = {a}."
        )
        if len(m["numbers"]) == 2
        else ""
    ),
    "letter_counting": lambda m, a: _letters(m),
    "count_bits": lambda m, a: f"{m['number']} in binary is {m['binary']}, which has {a} ones.",
}


def boxed_answer(family: str, entry: dict) -> str:
    """A solved completion for an entry: its worked solution (the dataset's own trace, or one written from its
    metadata: WORKED), then the boxed answer."""
    trace = entry["metadata"].get(TRACES.get(family, ""), "")
    trace = trace.split("####")[0].strip() if trace else ""
    if not trace and family in WORKED:
        trace = WORKED[family](entry["metadata"], entry["answer"])
    return (trace + "\n" if trace else "") + "\\boxed{" + str(entry["answer"]) + "}"


def problem_from_entry(entry: dict, band: str | None = None, template: int | None = None) -> Problem:
    """A Problem from a reasoning-gym item (`question`, `answer`, `metadata.source_dataset`): the grader of its
    family rides in meta, with the item itself (countdown reads its numbers and target there)."""
    family = entry["metadata"]["source_dataset"]
    if family not in GRADERS:
        raise ValueError(f"reasoning_gym family {family!r} has no rlvr grader; graded: {', '.join(sorted(GRADERS))}")
    meta = {"family": family, "grader": dict(GRADERS[family]), "entry": entry, "template": template}
    if family in TRACES:
        meta["trace"] = boxed_answer(family, entry)
    pid = f"rg/{family}/" + hashlib.sha256(normalise(entry["question"]).encode()).hexdigest()[:16]
    return Problem(id=pid, prompt=entry["question"], answer=str(entry["answer"]), band=band or family, meta=meta)


class ReasoningGymTask:
    """Problems from reasoning-gym families, each graded by its rlvr grader (GRADERS); see the module doc."""

    name = "reasoning_gym"
    answer_form = "math"
    grader = [
        {"name": "correct", "kind": "routed", "weight": 1.0},
        {"name": "format", "kind": "boxed_format", "weight": 0.1},
    ]

    def __init__(
        self,
        families: dict | None = None,
        size: int = 1000,
        seed: int = 0,
        one_shot: bool = True,
        system_prompt: str | None = None,
    ):
        families = families or {"basic_arithmetic": {}}
        unknown = [f for f in families if f not in GRADERS]
        if unknown:
            raise ValueError(
                f"reasoning_gym families {unknown} have no rlvr grader; choose from {', '.join(sorted(GRADERS))}"
            )
        self.system_prompt, self.one_shot, self.seed = system_prompt or SYSTEM, one_shot, seed
        specs = {f: dict(s or {}) for f, s in families.items()}
        total = sum(float(s.get("weight", 1.0)) for s in specs.values())
        self._splits: dict[str, list[Problem]] = {s: [] for s in SPLITS}
        self._examples: dict[str, dict] = {}
        self.bands: list[str] = []
        for i, (family, spec) in enumerate(specs.items()):
            n = max(1, round(size * float(spec.get("weight", 1.0)) / total))
            self._add_family(family, spec, n, seed + 1000 * i)
        self._drop_near_copies()

    def _drop_near_copies(self) -> None:
        """Small generators repeat themselves: a validation or held-out problem that the contamination check
        (rlvr.tasks.hygiene) finds in the training split is dropped, so evaluation never refuses this task."""
        from rlvr.tasks.hygiene import find_contamination

        for split in ("validation", "heldout"):
            near = {h.eval_id for h in find_contamination(self._splits["train"], self._splits[split])}
            self._splits[split] = [p for p in self._splits[split] if p.id not in near]

    def _add_family(self, family: str, spec: dict, n: int, seed: int) -> None:
        bad = set(spec) - {"weight", "config", "levels"}
        if bad:
            raise ValueError(
                f"reasoning_gym family {family!r}: unknown keys {sorted(bad)}; choose from weight, config, levels"
            )
        levels = spec.get("levels") or {None: {}}
        seen = {p.id for ps in self._splits.values() for p in ps}
        for j, (level, overrides) in enumerate(levels.items()):
            config = {**(spec.get("config") or {}), **(overrides or {})}
            band = family if level is None else f"{family}/{level}"
            data = _dataset(family, max(1, n // len(levels)), seed + j, config)
            self.bands.append(band)
            self._examples.setdefault(family, _dataset(family, 1, seed + j + ONE_SHOT_SEED, config)[0])
            for idx in range(len(data)):
                template = data.task_indices[idx] if family == "gsm_symbolic" else None
                p = problem_from_entry(data[idx], band, template)
                if p.id in seen or normalise(p.prompt) == normalise(self._examples[family]["question"]):
                    continue  # the same question twice, or the one-shot example: kept out of every split
                seen.add(p.id)
                self._splits[_bucket(f"{family}/template/{template}" if template is not None else p.id)].append(p)

    def problem_from_row(self, row: dict) -> Problem:
        """`rlvr verify --task reasoning_gym` rows: {"completion", "entry"}, entry = the generator's own item."""
        entry = row.get("entry")
        if not isinstance(entry, dict) or "metadata" not in entry or "answer" not in entry:
            raise DatasetError("reasoning_gym rows need 'entry': the generator's item (question, answer, metadata)")
        return problem_from_entry(entry)

    def problems(self, split: str) -> list[Problem]:
        if split not in SPLITS:
            raise ValueError(f"split {split!r}: choose from {', '.join(SPLITS)}")
        return self._splits[split]

    def messages(self, problem: Problem) -> list[dict]:
        """The system prompt, a solved example of the same family (one_shot), then the question."""
        msgs = [{"role": "system", "content": self.system_prompt}]
        family = problem.meta["family"]
        if self.one_shot and family in self._examples:
            example = self._examples[family]
            msgs += [
                {"role": "user", "content": example["question"]},
                {"role": "assistant", "content": boxed_answer(family, example)},
            ]
        return msgs + [{"role": "user", "content": problem.prompt}]


def load_reasoning_gym(**settings) -> ReasoningGymTask:
    try:
        import reasoning_gym  # noqa: F401
    except ImportError:
        raise DatasetError(
            'task reasoning_gym needs the reasoning-gym package: pip install "rlvr[reasoning-gym]"'
        ) from None
    return ReasoningGymTask(**settings)


__all__ = ["ReasoningGymTask", "GRADERS", "problem_from_entry", "load_reasoning_gym"]
