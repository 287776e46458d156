"""The reward the trainer calls: a weighted sum of verifier terms, built from the config's reward section.

The section (rlvr.config.RewardConfig), as YAML writes it:

    {"terms": [{"name": "correct", "kind": "math", "weight": 1.0, "hedging": "last"},
               {"name": "format", "kind": "boxed_format", "weight": 0.1}],
     "allow_dominant_shaping": false, "workers": 2, "timeout_s": 5.0, "engine": "local"}

`engine: ray` scores on a Ray cluster (rlvr.verifiers.ray_pool) instead of local processes.

The first term is the correctness term; the others are shaping. A shaping term whose maximum
(|weight| x its kind's max reward) exceeds 10% of the correctness term's maximum is refused unless
`allow_dominant_shaping: true`: a policy can earn a shaping term without solving anything, so a large
one makes "looks right" pay nearly as much as "is right" (reward hacking by construction).

Every term is also a TRL reward function: `term(completions, **columns) -> list[float | None]`, None where the
verdict is a fault (FAULT_STATUSES: timeout, error, invalid gold), which TRL leaves out. rlvr.integrations.trl
wraps these with verdict counts in TRL's logs and whole-row exclusion; docs/integrations.md.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace

from rlvr.config import ConfigError, RewardConfig
from rlvr.verifiers.base import FAULT_STATUSES, STATUSES, Verdict
from rlvr.verifiers.format import completion_text
from rlvr.verifiers.pool import VerifierPool, score_batch
from rlvr.verifiers.registry import KINDS, build_verifier

DOMINANCE_RATIO = 0.10
TERM_KEYS = ("name", "kind", "weight")


@dataclass
class RewardResult:
    """total: B weighted sums; terms: name -> B unweighted rewards; verdicts: B of the first term."""

    total: list[float]
    terms: dict[str, list[float]]
    verdicts: list[Verdict]
    term_verdicts: dict[str, list[Verdict]] = field(default_factory=dict)


class Term:
    """One weighted reward term; callable with TRL's signature `(completions, **columns) -> list[float | None]`."""

    def __init__(
        self, name: str, kind: str, weight: float, verifier, workers: int, timeout_s: float, engine: str = "local"
    ):
        self.name, self.kind, self.weight, self.verifier = name, kind, float(weight), verifier
        self.workers = 0 if KINDS[kind].cheap else workers
        self.timeout_s, self.engine = timeout_s, engine
        # a VerifierPool kept across calls (rlvr serve); None: a pool per call, as training uses
        self.pool: VerifierPool | None = None
        self.__name__ = name  # TRL logs a reward function under its __name__

    @property
    def max_reward(self) -> float:
        return abs(self.weight) * KINDS[self.kind].max_reward

    def verdicts(self, completions: list, problems: list) -> list[Verdict]:
        texts = [completion_text(c) for c in completions]
        many = getattr(self.verifier, "score_many", None)
        if callable(many):  # a verifier that scores a whole batch itself (remote: one request per chunk)
            return many(texts, problems)
        if self.pool is not None and texts:
            return self.pool.map(texts, problems)
        return score_batch(
            self.verifier, texts, problems, workers=self.workers, timeout_s=self.timeout_s, engine=self.engine
        )

    def __call__(self, completions: list, **columns) -> list[float | None]:
        """TRL reward-function form: unweighted rewards (TRL applies `reward_weights` itself); None for a fault."""
        problems = problems_from_columns(len(completions), columns, KINDS[self.kind].grades)
        return [None if v.status in FAULT_STATUSES else v.reward for v in self.verdicts(completions, problems)]


def problems_from_columns(n: int, columns: dict, grades: str | None = None) -> list:
    """Build B Problems from per-sample dataset columns (TRL's keyword arguments): each row's gold from the first
    of answer / gold / solution / ground_truth that is not null in that row (rlvr.tasks.base.GOLD_COLUMNS), hidden
    tests from `tests`. `grades="answer"` (a term that reads a gold answer) with none of those columns raises,
    naming them: a reward with no gold would score every row as a fault, and the trainer would learn nothing."""
    from rlvr.tasks.base import GOLD_COLUMNS, Problem, final_gold

    present = [k for k in GOLD_COLUMNS if isinstance(columns.get(k), (list, tuple))]
    if grades == "answer" and not present and columns.get("tests") is None:
        given = ", ".join(sorted(k for k in columns if k not in ("prompts", "prompt"))) or "none"
        raise ValueError(
            f"no gold column: give the dataset one of the columns {', '.join(GOLD_COLUMNS)} (columns given: {given})"
        )
    tests = columns.get("tests")
    prompts = columns.get("prompts") or columns.get("prompt")
    out = []
    for i in range(n):
        prompt = prompts[i] if isinstance(prompts, list) and i < len(prompts) else ""
        gold = next((columns[k][i] for k in present if i < len(columns[k]) and columns[k][i] is not None), None)
        gold = final_gold(gold)  # GSM8K's worked `... #### 72` is the gold 72
        out.append(
            Problem(id=str(i), prompt=completion_text(prompt), answer=gold, tests=None if tests is None else tests[i])
        )
    return out


class Reward:
    """`Reward(completions, problems) -> RewardResult`; B completions and B problems, in order."""

    def __init__(self, terms: list[Term]):
        self.terms = terms

    @property
    def weights(self) -> list[float]:
        return [t.weight for t in self.terms]

    def __call__(self, completions: list, problems: list) -> RewardResult:
        if len(completions) != len(problems):
            raise ValueError(f"{len(completions)} completions but {len(problems)} problems")
        term_verdicts = {t.name: t.verdicts(completions, problems) for t in self.terms}
        # a fault verdict of the correctness term (timeout, error, invalid gold) says nothing about the
        # completion: the row earns nothing, shaping included (a format bonus on an ungradable row pays noise)
        fault = [v.status in FAULT_STATUSES for v in term_verdicts[self.terms[0].name]]
        terms = {name: [0.0 if fault[i] else v.reward for i, v in enumerate(vs)] for name, vs in term_verdicts.items()}
        total = [sum(t.weight * terms[t.name][i] for t in self.terms) for i in range(len(completions))]
        return RewardResult(total, terms, term_verdicts[self.terms[0].name], term_verdicts)

    def as_trl(self) -> list[Term]:
        """The terms as TRL reward functions (pass `reward_weights=reward.weights` to GRPOConfig)."""
        return list(self.terms)


def resolve_reward(section: RewardConfig, task) -> RewardConfig:
    """The reward section with the task's grading filled in: no terms -> the task's own grader (`task.grader`); math
    terms without an `answer_form` take the task's. A term that cannot grade the task's golds (answer terms on
    problems that carry only tests, code terms on problems without tests) is a ConfigError naming the task, the term
    and the grader that fits."""
    terms, grader = copy.deepcopy(section.terms), getattr(task, "grader", None)
    if not terms:
        if not grader:
            raise ConfigError(
                f"reward.terms: empty, and task {getattr(task, 'name', task)!r} names no grader of its own"
            )
        terms = copy.deepcopy(grader)
    form = getattr(task, "answer_form", None)
    for i, term in enumerate(terms):
        if form and isinstance(term, dict) and "answer_form" not in term and _takes(term.get("kind"), "answer_form", i):
            term["answer_form"] = form
    _check_grades(terms, task)
    return replace(section, terms=terms)


def _takes(kind, setting: str, i: int) -> bool:
    """Whether verifier kind `kind` has `setting` (its entry's settings: math's answer_form; a plug-in's from its
    signature), so the task's value reaches every kind that reads it and no other; a kind that is not a name is
    left for build_reward to refuse."""
    return isinstance(kind, str) and setting in KINDS.get(kind, f"reward.terms[{i}].kind").settings


def task_reward(section: RewardConfig, task) -> tuple[RewardConfig, Reward]:
    """(the reward section resolved against the task, the Reward it builds reading answers in the task's format):
    what training, SFT, evaluation and `rlvr verify --task` all grade with."""
    resolved = resolve_reward(section, task)
    return resolved, build_reward(resolved, getattr(task, "answer_format", None))


def _check_grades(terms: list, task) -> None:
    sample = next((ps[0] for ps in (task.problems(s) for s in ("train", "heldout", "validation")) if ps), None)
    if sample is None:
        return
    has = {"answer": sample.answer is not None and str(sample.answer).strip() != "", "tests": bool(sample.tests)}
    fits = ", ".join(f"{t['kind']}" for t in getattr(task, "grader", None) or [] if KINDS.get(t["kind"]).grades)
    for i, term in enumerate(terms):
        kind = term.get("kind") if isinstance(term, dict) else None
        grades = KINDS.get(kind, f"reward.terms[{i}].kind").grades if isinstance(kind, str) else None
        if grades and not has[grades]:
            carried = "hidden tests" if has["tests"] else "answers"
            raise ConfigError(
                f"reward.terms[{i}] (kind {term['kind']!r}) grades {grades}, but task {task.name!r} "
                f"carries {carried}; the grader that fits is {fits or 'none'} (leave reward.terms "
                f"empty to use the task's own)"
            )


def build_reward(section: RewardConfig, answer_format: str | None = None) -> Reward:
    """Check the terms (see module doc) and build the Reward; mistakes raise ConfigError. The section's own keys were
    checked where it was made (rlvr.config: a dict becomes one by `reward_config`). `answer_format`
    (the task's: "boxed" or "tags") goes to every term whose kind reads one and that does not set its own."""
    specs = section.terms
    if not isinstance(specs, list) or not specs:
        raise ConfigError("reward.terms: need a non-empty list of terms (the first is the correctness term)")
    workers, timeout_s, engine = section.workers, section.timeout_s, section.engine  # checked as the config is
    terms = [_build_term(spec, i, workers, timeout_s, engine, answer_format) for i, spec in enumerate(specs)]
    names = [t.name for t in terms]
    if len(set(names)) != len(names):
        raise ConfigError(f"reward.terms: term names must be unique, got {names}")
    if not section.allow_dominant_shaping:
        check_dominance(terms)
    return Reward(terms)


def _build_term(
    spec, i: int, workers: int, timeout_s: float, engine: str = "local", answer_format: str | None = None
) -> Term:
    where = f"reward.terms[{i}]"
    if not isinstance(spec, dict):
        raise ConfigError(f"{where}: expected a mapping with name, kind, weight and kind settings")
    if "kind" not in spec:
        raise ConfigError(f"{where}.kind: missing; choose from {KINDS.choices()}")
    kind = spec["kind"]
    settings = {k: v for k, v in spec.items() if k not in TERM_KEYS}
    if answer_format and isinstance(kind, str) and "answer_format" in KINDS.get(kind, f"{where}.kind").settings:
        settings.setdefault("answer_format", answer_format)
    verifier = build_verifier(kind, settings, where)
    try:
        weight = float(spec.get("weight", 1.0))
    except (TypeError, ValueError):
        raise ConfigError(f"{where}.weight: {spec.get('weight')!r} is not a number") from None
    return Term(str(spec.get("name", kind)), kind, weight, verifier, workers, timeout_s, engine)


def check_dominance(terms: list[Term]) -> None:
    """Refuse a shaping term whose maximum exceeds DOMINANCE_RATIO of the correctness term's."""
    main = terms[0]
    for t in terms[1:]:
        if t.max_reward > DOMINANCE_RATIO * main.max_reward + 1e-12:
            raise ConfigError(
                f"reward.terms.{t.name}.weight: shaping term {t.name!r} can pay {t.max_reward:g}, more than "
                f"{DOMINANCE_RATIO:.0%} of correctness term {main.name!r} ({main.max_reward:g}); a policy "
                f"could earn it without solving anything. Lower its weight to <= "
                f"{DOMINANCE_RATIO * main.max_reward / KINDS[t.kind].max_reward:g} or set allow_dominant_shaping: true"
            )


def verdict_fractions(verdicts: list[Verdict]) -> dict[str, float]:
    """`verdict/<status>_frac` for every status (zeros included), for the per-step metrics line."""
    n = max(len(verdicts), 1)
    return {f"verdict/{s}_frac": sum(v.status == s for v in verdicts) / n for s in STATUSES}
