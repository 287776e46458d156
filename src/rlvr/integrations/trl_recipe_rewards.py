"""A recipe's reward_funcs + reward_weights -> rlvr reward terms through rlvr's verifiers (correctness first), the
recipe's own reward functions (an import path) as `trl_reward` terms that call them as TRL does, the soft overlong
punishment as the algorithm's overlong shaping, and the 10% shaping rule reported, never silently applied. Part of
rlvr.integrations.trl_recipe."""

from __future__ import annotations

import re

from rlvr.algorithms.advantages import OVERLONG_SHAPINGS
from rlvr.config import ConfigError
from rlvr.integrations.conversion import Conversion
from rlvr.integrations.trl_recipe_keys import OPEN_R1_REWARDS, OVERLONG, REWARDS, REWARDS_UNMAPPED
from rlvr.verifiers.compose import DOMINANCE_RATIO
from rlvr.verifiers.registry import KINDS


def map_rewards(r: dict, conv: Conversion, open_r1: bool) -> set:
    """reward_funcs + reward_weights -> reward terms (correctness first); the 10% shaping rule reported."""
    names = r.get("reward_funcs")
    if names is None and open_r1:
        names = list(OPEN_R1_REWARDS)
        conv.notes.append(f"no reward_funcs: open-r1's default {OPEN_R1_REWARDS}")
    if names is None:
        conv.notes.append("no reward_funcs (GRPOConfig leaves them to the training script): rlvr's default reward")
        return {"reward_funcs", "reward_weights"}
    names = [names] if isinstance(names, str) else list(names)
    weights = r.get("reward_weights") or [1.0] * len(names)
    if len(weights) != len(names):
        raise ConfigError(f"recipe: {len(names)} reward_funcs but {len(weights)} reward_weights")
    terms = []
    for name, w in zip(names, weights):
        if name in REWARDS:
            term_name, spec, note = REWARDS[name]
            terms.append({"name": term_name, **spec, "weight": float(w)})
            conv.notes += [note] if note else []
        elif name in OVERLONG:
            _overlong(r, conv, name)
        elif name not in REWARDS_UNMAPPED and (func := import_path(str(name))):
            terms.append(_own_function(name, func, float(w), terms, conv))
        else:
            conv.unmapped.append(
                (
                    f"reward_funcs: {name}",
                    REWARDS_UNMAPPED.get(
                        name,
                        "not a reward function rlvr knows from TRL or open-r1, nor an import path "
                        "(package.module:attr, or TRL's package.module.attr)",
                    ),
                )
            )
    _reward_terms(terms, conv)
    return {"reward_funcs", "reward_weights"}


# a module path or an attribute path: identifiers joined by dots
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def import_path(name: str) -> str | None:
    """A reward function named by its import path -> rlvr's `package.module:attr`: rlvr's own form as it is, TRL's
    dotted `package.module.attr` split at its last dot (as trl/scripts/grpo.py does); None for any other name."""
    module, sep, attr = name.partition(":") if ":" in name else name.rpartition(".")
    return f"{module}:{attr}" if sep and _DOTTED.fullmatch(module) and _DOTTED.fullmatch(attr) else None


def _own_function(name: str, func: str, weight: float, terms: list, conv: Conversion) -> dict:
    """The recipe's own reward function (`func`, as rlvr writes its import path) as a `trl_reward` term: the same
    function, called as TRL calls it."""
    term = func.rpartition(":")[2].rpartition(".")[2]
    term = term if term not in {t["name"] for t in terms} else func
    conv.notes.append(
        f"reward_funcs: {name} -> term {term!r} of kind trl_reward (func: {func}), the recipe's own function "
        "called as TRL calls it; its module must import where rlvr runs (its folder on PYTHONPATH)"
    )
    return {"name": term, "kind": "trl_reward", "func": func, "weight": weight}


def _reward_terms(terms: list, conv: Conversion) -> None:
    """The terms in rlvr's order (correctness first), the task's answer format, the shaping rule's report."""
    if not terms:
        conv.notes.append("no reward function maps to an rlvr verifier: rlvr's default reward is kept")
        return
    # stable: correctness first (a term that grades against the gold, by its kind's entry), the rest as given
    terms.sort(key=lambda t: not _grades(t))
    fmt = next((t["answer_format"] for t in terms if t.get("answer_format")), None)
    if fmt:  # a mapped format reward asked for its format (open-r1's: tags); the task's prompt must ask for it
        conv.set("task.settings.answer_format", fmt)
        for t in terms:
            t.pop("answer_format", None)  # every term follows the task's format
    if not _grades(terms[0]):
        conv.notes.append(
            f"no correctness reward among reward_funcs: rlvr treats {terms[0]['name']!r} as the correctness term"
        )
    main = abs(terms[0]["weight"])
    over = [t for t in terms[1:] if abs(t["weight"]) > DOMINANCE_RATIO * main + 1e-12]
    for t in over:
        share = abs(t["weight"]) / main if main else float("inf")
        conv.notes.append(
            f"SHAPING RULE: {t['name']} weight {t['weight']:g} is {share:.0%} of {terms[0]['name']}'s "
            f"{terms[0]['weight']:g}, above rlvr's {DOMINANCE_RATIO:.0%} rule (a policy can earn it without "
            f"solving anything); kept as given, with reward.allow_dominant_shaping: true; rlvr's rule "
            f"would cap it at {DOMINANCE_RATIO * main:g}"
        )
    conv.config.setdefault("reward", {})["terms"] = terms
    if over:
        conv.config["reward"]["allow_dominant_shaping"] = True


def _grades(term: dict) -> bool:
    """Whether a term checks the answer against the gold (its kind's `grades`), rather than shaping it."""
    return KINDS.get(term["kind"]).grades is not None


def _overlong(r: dict, conv: Conversion, name: str) -> None:
    """The soft overlong punishment as rlvr's soft overlong shaping; its buffer as a fraction of the budget
    (open-r1's defaults: 4096 of 16384 tokens; TRL's CLI registers 256 of 1280)."""
    budget, cache = (16384, 4096) if name == "soft_overlong_punishment" else (1280, 256)
    budget, cache = int(r.get("max_completion_len", budget)), int(r.get("soft_punish_cache", cache))
    frac = min(1.0, cache / budget) if budget else 0.2
    algo = conv.config.setdefault("algorithm", {})
    if "overlong" in algo and OVERLONG_SHAPINGS.get(algo["overlong"]).masks_truncated:
        conv.unmapped.append(
            (
                "mask_truncated_completions",
                f"rlvr's algorithm.overlong is filter or soft, not both: {name} (soft) is kept",
            )
        )
    algo.update(overlong="soft", overlong_buffer_frac=round(frac, 4))
    conv.notes.append(
        f"soft_overlong_punishment -> algorithm.overlong soft over the last {frac:.0%} of "
        f"max_completion_length (its reward weight is not used: rlvr applies it as DAPO does)"
    )


__all__ = ["map_rewards", "import_path"]
