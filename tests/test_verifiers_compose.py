"""Composition: weighted sums, config errors, the 10% dominance rule, TRL shapes, simple verifiers."""

import pytest

from rlvr.config import ConfigError, RewardConfig, reward_config
from rlvr.tasks.base import Problem
from rlvr.verifiers.base import Verdict
from rlvr.verifiers.compose import build_reward, verdict_fractions
from rlvr.verifiers.format import boxed_format_check
from rlvr.verifiers.registry import KINDS, register_kind
from rlvr.verifiers.simple import ExactMatchVerifier, MultipleChoiceVerifier, NumericVerifier, RegexVerifier

CFG = {
    "terms": [
        {"name": "correct", "kind": "math", "weight": 1.0, "hedging": "last"},
        {"name": "format", "kind": "boxed_format", "weight": 0.1},
    ],
    "workers": 0,
    "timeout_s": 2.0,
}


def typed(section: dict) -> RewardConfig:
    """A reward section as YAML or a user's dict gives it, checked and typed where such dicts enter (rlvr.config):
    build_reward and resolve_reward take the typed section alone."""
    return reward_config(section)


COMPLETIONS = [r"\boxed{4}", r"\boxed{5}", "4", r"\boxed{3} or \boxed{4}"]
PROBLEMS = [Problem(str(i), "What is 2+2?", "4") for i in range(4)]


def test_weighted_sum_and_unweighted_terms():
    res = build_reward(typed(CFG))(COMPLETIONS, PROBLEMS)
    assert res.terms == {"correct": [1.0, 0.0, 0.0, 0.0], "format": [1.0, 1.0, 0.0, 0.0]}
    assert res.total == pytest.approx([1.1, 0.1, 0.0, 0.0])
    assert [v.status for v in res.verdicts] == ["correct", "wrong", "no_answer", "multiple_answers"]


def test_pool_workers_give_the_same_result():
    res = build_reward(typed({**CFG, "workers": 2}))(COMPLETIONS, PROBLEMS)
    assert res.total == pytest.approx([1.1, 0.1, 0.0, 0.0])


def test_verdict_fractions_cover_every_status():
    fr = verdict_fractions(
        [Verdict("correct", 1.0), Verdict("wrong", 0.0), Verdict("wrong", 0.0), Verdict("timeout", 0.0)]
    )
    assert fr["verdict/correct_frac"] == 0.25 and fr["verdict/wrong_frac"] == 0.5
    assert fr["verdict/timeout_frac"] == 0.25 and fr["verdict/invalid_gold_frac"] == 0.0
    assert len(fr) == 7


@pytest.mark.parametrize("weight,ok", [(0.1, True), (0.05, True), (0.11, False), (1.0, False), (-0.2, False)])
def test_dominance_rule(weight, ok):
    cfg = {
        "terms": [
            {"name": "correct", "kind": "math", "weight": 1.0},
            {"name": "format", "kind": "boxed_format", "weight": weight},
        ]
    }
    if ok:
        build_reward(typed(cfg))
    else:
        with pytest.raises(ConfigError, match="format.*10%.*allow_dominant_shaping"):
            build_reward(typed(cfg))
        build_reward(typed({**cfg, "allow_dominant_shaping": True}))  # the explicit opt-out works


def test_dominance_scales_with_correctness_weight():
    terms = [{"name": "c", "kind": "math", "weight": 2.0}, {"name": "f", "kind": "boxed_format", "weight": 0.2}]
    build_reward(typed({"terms": terms}))


@pytest.mark.parametrize(
    "cfg,match",
    [
        ({"terms": [{"kind": "maths"}]}, r"terms\[0\]\.kind: unknown verifier kind 'maths'; choose from .*math"),
        ({"terms": [{"kind": "math", "hedge": "x"}]}, r"terms\[0\]\.hedge: unknown setting .*hedging"),
        ({"terms": [{"kind": "math", "hedging": "any"}]}, r"terms\[0\]: bad settings .*hedging"),
        ({"terms": [], "workers": 1}, r"reward\.terms: need a non-empty list"),
        # the section's own keys are checked where the dict enters (as_config), by the rule that checks a config file's
        (
            {"terms": [{"kind": "math"}], "wokers": 1},
            r"^unknown config key 'reward\.wokers'; allowed keys in 'reward': allow_dominant_shaping, control, engine, "
            r"terms, timeout_s, workers$",
        ),
        ({"terms": [{"kind": "math"}], "workers": -1}, r"^config key 'reward\.workers' = -1; must be >= 0$"),
        ({"terms": [{"kind": "math"}], "timeout_s": "5"}, r"^config key 'reward\.timeout_s' must be float, got '5'$"),
        ({"terms": [{"name": "a", "kind": "math"}, {"name": "a", "kind": "boxed_format", "weight": 0.1}]}, "unique"),
        ({"terms": [{"name": "a"}]}, r"terms\[0\]\.kind: missing"),
    ],
)
def test_config_errors_name_the_key_and_choices(cfg, match):
    with pytest.raises(ConfigError, match=match):
        build_reward(typed(cfg))


def test_register_kind_adds_a_verifier():
    class Always:
        name = "always"

        def score(self, completion, problem):
            return Verdict("correct", 1.0, completion, "")

    register_kind("always_test", lambda: Always(), (), cheap=True)
    try:
        res = build_reward(typed({"terms": [{"name": "x", "kind": "always_test"}], "workers": 0}))(
            ["a"], [Problem("1", "q", "z")]
        )
        assert res.total == [1.0]
    finally:
        KINDS.remove("always_test")


# TRL passes completions as plain strings (standard format) or as lists of messages (conversational),
# plus every dataset column as a keyword argument (and extras like completion_ids we must ignore).
TRL_SHAPES = [
    # completions, correctness rewards, format rewards
    ([r"\boxed{4}", "no box"], [1.0, 0.0], [1.0, 0.0]),
    (
        [[{"role": "assistant", "content": r"\boxed{4}"}], [{"role": "assistant", "content": r"\boxed{3}"}]],
        [1.0, 0.0],
        [1.0, 1.0],
    ),
]


@pytest.mark.parametrize("completions,expected,expected_format", TRL_SHAPES)
def test_terms_have_trl_signature(completions, expected, expected_format):
    reward = build_reward(typed(CFG))
    correct, fmt = reward.as_trl()
    prompts = [[{"role": "user", "content": "2+2?"}]] * 2
    got = correct(completions, prompts=prompts, answer=["4", "4"], completion_ids=[[1], [2]], trainer_state=None)
    assert got == expected
    assert fmt(completions, prompts=prompts) == expected_format
    assert correct.__name__ == "correct" and reward.weights == [1.0, 0.1]


@pytest.mark.parametrize(
    "text,reward,why",
    [
        (r"So \boxed{4}.", 1.0, "one final box"),
        ("4", 0.0, "no box"),
        (r"\boxed{3} \boxed{4}", 0.0, "two boxes"),
        (r"\boxed{}", 0.0, "empty box"),
        (r"\boxed{4}" + " more text" * 40, 0.0, "box not at the end"),
        ([{"role": "assistant", "content": r"\boxed{4}"}], 1.0, "conversational"),
    ],
)
def test_boxed_format_reward(text, reward, why):
    assert boxed_format_check(text).reward == reward, why


SIMPLE = [
    # verifier, completion, gold, status, why
    (ExactMatchVerifier(), r"\boxed{Paris}", "paris", "correct", "case-insensitive"),
    (ExactMatchVerifier(), r"\boxed{\text{Paris }}", "Paris", "correct", "text and spaces stripped"),
    (ExactMatchVerifier(), r"\boxed{Lyon}", "Paris", "wrong", "different word"),
    (ExactMatchVerifier(), r"\boxed{Lyon} or \boxed{Paris}", "Paris", "multiple_answers", "hedge"),
    (ExactMatchVerifier(), "Paris", "Paris", "no_answer", "require_boxed"),
    (ExactMatchVerifier(require_boxed=False), "Answer: Paris", "Paris", "correct", "answer line"),
    (ExactMatchVerifier(), r"\boxed{x}", "", "invalid_gold", "empty gold"),
    (NumericVerifier(), r"\boxed{1,000}", "1000", "correct", "thousands separator"),
    (NumericVerifier(), r"\boxed{0.0000012}", "0.0000013", "wrong", "relative tolerance"),
    (NumericVerifier(abs_tol=1e-3), r"\boxed{2.0004}", "2", "correct", "absolute tolerance"),
    (NumericVerifier(), r"\boxed{12345678901234567891}", "12345678901234567890", "wrong", "big ints exact"),
    (NumericVerifier(), r"\boxed{3 or 4}", "4", "multiple_answers", "two numbers"),
    (NumericVerifier(), r"\boxed{four}", "4", "no_answer", "no number"),
    (NumericVerifier(), r"\boxed{4}", "four", "invalid_gold", "gold not a number"),
    (MultipleChoiceVerifier(), r"\boxed{B}", "B", "correct", "boxed letter"),
    (MultipleChoiceVerifier(), "The answer is (c).", "C", "correct", "lowercase in parens"),
    (MultipleChoiceVerifier(), "Answer: A or B", "B", "multiple_answers", "two letters"),
    (MultipleChoiceVerifier(), "Answer: D", "B", "wrong", "other letter"),
    (MultipleChoiceVerifier(), "Answer: none", "B", "no_answer", "no letter"),
    (MultipleChoiceVerifier(), "Answer: B", "Z", "invalid_gold", "gold outside choices"),
    (RegexVerifier(), "blah\nanswer: 42", "42", "correct", "captured group"),
    (RegexVerifier(), "answer: 41", "42", "wrong", "different capture"),
    (RegexVerifier(), "no marker", "42", "no_answer", "pattern absent"),
    (RegexVerifier(gold_is_pattern=True), "answer: 42.0", r"42(\.0+)?", "correct", "gold as regex"),
    (RegexVerifier(gold_is_pattern=True), "answer: 42", "(", "invalid_gold", "gold not a regex"),
]


@pytest.mark.parametrize("verifier,completion,gold,status,why", SIMPLE, ids=[s[4] for s in SIMPLE])
def test_simple_verifiers(verifier, completion, gold, status, why):
    v = verifier.score(completion, Problem("p", "q", gold))
    assert v.status == status, f"{why}: {v}"
    assert v.reward == (1.0 if status == "correct" else 0.0)


# ---- each task carries its grader ---------------------------------------------------------------------------


def test_no_terms_means_the_tasks_own_grader():
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import resolve_reward

    arithmetic = resolve_reward(typed({"terms": []}), load_task("arithmetic", per_band=20))
    assert arithmetic.terms == [
        {"name": "correct", "kind": "math", "weight": 1.0, "answer_form": "number"},
        {"name": "format", "kind": "boxed_format", "weight": 0.1},
    ]
    humaneval = resolve_reward(typed({"terms": []}), load_task("humaneval"))
    assert humaneval.terms == [{"name": "correct", "kind": "python_tests", "weight": 1.0}]
    # a math term the config names takes the task's answer form unless it sets its own
    named = resolve_reward(typed({"terms": [{"name": "c", "kind": "math"}]}), load_task("arithmetic", per_band=20))
    assert named.terms[0]["answer_form"] == "number"
    own = resolve_reward(
        typed({"terms": [{"name": "c", "kind": "math", "answer_form": "math"}]}), load_task("arithmetic", per_band=20)
    )
    assert own.terms[0]["answer_form"] == "math"


def test_a_reward_that_cannot_grade_the_tasks_golds_is_a_config_error():
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import resolve_reward

    with pytest.raises(
        ConfigError,
        match=r"reward.terms\[0\] \(kind 'math'\) grades answer, but task 'humaneval' "
        r"carries hidden tests; the grader that fits is python_tests",
    ):
        resolve_reward(typed({"terms": [{"name": "c", "kind": "math"}]}), load_task("humaneval"))
    with pytest.raises(
        ConfigError,
        match=r"kind 'python_tests'\) grades tests, but task 'arithmetic' carries "
        r"answers; the grader that fits is math",
    ):
        resolve_reward(typed({"terms": [{"name": "c", "kind": "python_tests"}]}), load_task("arithmetic", per_band=20))


def test_humaneval_graded_by_its_own_grader_pays_the_canonical_solution():
    import gzip
    import json

    from rlvr.tasks import load_task
    from rlvr.tasks.humaneval import data_path
    from rlvr.verifiers.compose import build_reward, resolve_reward

    task = load_task("humaneval")
    reward = build_reward(resolve_reward(typed({"terms": [], "workers": 0}), task))
    with gzip.open(data_path(), "rt") as f:
        rows = [json.loads(line) for line, _ in zip(f, range(2))]
    problems = {p.id: p for p in task.problems("heldout")}
    completions = ["```python\n" + r["prompt"] + r["canonical_solution"] + "```" for r in rows]
    result = reward(completions, [problems[r["task_id"]] for r in rows])
    assert result.total == [1.0, 1.0] and [v.status for v in result.verdicts] == ["correct", "correct"]


def test_a_plugin_kind_with_an_answer_form_setting_takes_the_tasks_as_math_does():
    """The task's answer form reaches every kind whose settings name it (math's entry; a plug-in's signature), not
    the kind called "math" alone; a kind without the setting is left as it is."""
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import resolve_reward

    terms = [{"name": "c", "kind": "registry_plugins:FormAwareGrader"}, {"name": "f", "kind": "boxed_format"}]
    resolved = resolve_reward(typed({"terms": terms}), load_task("arithmetic", per_band=20))
    assert resolved.terms == [
        {"name": "c", "kind": "registry_plugins:FormAwareGrader", "answer_form": "number"},
        {"name": "f", "kind": "boxed_format"},
    ]
