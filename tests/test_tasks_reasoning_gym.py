"""reasoning-gym families as an rlvr task: stable ids, splits that never overlap (by template for gsm_symbolic),
every family graded by an rlvr verifier in the right form, hacks refused, config mistakes named."""

import json

import pytest

pytest.importorskip("reasoning_gym", reason="reasoning-gym not installed (pip install 'rlvr[reasoning-gym]')")

from rlvr.tasks import load_task  # noqa: E402
from rlvr.tasks.reasoning_gym import GRADERS, normalise, problem_from_entry  # noqa: E402
from rlvr.verifiers.registry import RoutedVerifier  # noqa: E402

FAMILIES = {
    "basic_arithmetic": {"config": {"min_terms": 2, "max_terms": 2, "max_digits": 1}},
    "gsm_symbolic": {"weight": 2},
    "number_sorting": {},
    "countdown": {},
    "leg_counting": {"levels": {"easy": {"min_animals": 1, "max_animals": 2}, "hard": {"min_animals": 4}}},
}


@pytest.fixture(scope="module")
def task():
    return load_task("reasoning_gym", families=FAMILIES, size=600, seed=3)


def test_splits_never_overlap_and_gsm_symbolic_templates_are_unseen(task):
    splits = {s: task.problems(s) for s in ("train", "validation", "heldout")}
    assert all(splits.values())
    questions = {s: {normalise(p.prompt) for p in ps} for s, ps in splits.items()}
    assert not questions["train"] & questions["heldout"] and not questions["train"] & questions["validation"]
    templates = {s: {p.meta["template"] for p in ps if p.meta["family"] == "gsm_symbolic"} for s, ps in splits.items()}
    assert templates["heldout"] and not templates["train"] & templates["heldout"]
    assert task.bands == [
        "basic_arithmetic",
        "gsm_symbolic",
        "number_sorting",
        "countdown",
        "leg_counting/easy",
        "leg_counting/hard",
    ]
    # near copies (small generators repeat themselves) are dropped from the evaluation splits
    from rlvr.tasks.hygiene import find_contamination

    assert find_contamination(splits["train"], splits["heldout"]) == []
    # ids are stable: the same settings give the same problems
    again = load_task("reasoning_gym", families=FAMILIES, size=600, seed=3)
    assert [p.id for p in again.problems("heldout")] == [p.id for p in splits["heldout"]]


def test_every_family_is_graded_by_rlvr_and_unknown_ones_are_refused():
    assert load_task("reasoning_gym").grader[0]["kind"] == "routed"
    with pytest.raises(ValueError, match="families \\['chess'\\] have no rlvr grader; choose from .*countdown.*gcd"):
        load_task("reasoning_gym", families={"chess": {}})
    with pytest.raises(ValueError, match="gcd.*unexpected keyword argument 'depth'; its settings: min_numbers"):
        load_task("reasoning_gym", families={"gcd": {"config": {"depth": 3}}})


def test_a_config_the_generator_refuses_names_the_family():
    with pytest.raises(ValueError, match="reasoning_gym family 'leg_counting': max_animals must be >= min_animals"):
        load_task("reasoning_gym", families={"leg_counting": {"config": {"max_animals": 2}}})


def test_config_mistakes_exit_2_naming_the_choices(tmp_path, capsys):
    from rlvr.cli import main

    code = main(
        [
            "train",
            "--set",
            "task.name=reasoning_gym",
            "--set",
            "task.settings={families: {chess: {}}}",
            "--output-dir",
            str(tmp_path / "r"),
        ]
    )
    assert code == 2 and "have no rlvr grader; choose from" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()


def test_the_reference_traces_end_in_the_boxed_answer(task):
    p = next(p for p in task.problems("train") if p.meta["family"] == "gsm_symbolic")
    assert p.meta["trace"].endswith("\\boxed{" + p.answer + "}") and "####" not in p.meta["trace"]
    assert RoutedVerifier().score(p.meta["trace"], p).status == "correct"


def test_the_one_shot_example_is_of_the_same_family_and_in_no_split(task):
    p = next(p for p in task.problems("train") if p.meta["family"] == "countdown")
    system, example_q, example_a, question = task.messages(p)
    assert example_a["role"] == "assistant" and example_a["content"].startswith("\\boxed{")
    all_questions = {normalise(q.prompt) for s in ("train", "validation", "heldout") for q in task.problems(s)}
    assert normalise(example_q["content"]) not in all_questions and question["content"] == p.prompt


@pytest.mark.parametrize(
    "family, completion, status",
    [
        ("number_sorting", "\\boxed{['52.2', '30.0', '14.0']}", "correct"),
        ("number_sorting", "\\boxed{52.2, 30.0, 14.0}", "correct"),  # the same list without quotes
        ("number_sorting", "\\boxed{[52.2, 30, 14]}", "correct"),  # numbers compare by value
        ("number_sorting", "\\boxed{14.0, 30.0, 52.2}", "wrong"),  # the other order
        ("number_sorting", "\\boxed{52.2, 30.0, 14.0} or \\boxed{14.0, 30.0, 52.2}", "multiple_answers"),
        ("basic_arithmetic", "\\boxed{-4}", "correct"),
        ("basic_arithmetic", "\\boxed{-4} or \\boxed{7}", "multiple_answers"),
        ("basic_arithmetic", "\\boxed{1-4}", "wrong"),  # partial credit 0.67 in score_answer
        ("basic_arithmetic", "\\boxed{5 - 3 - 6}", "wrong"),  # the problem's own expression
        ("basic_arithmetic", "-4", "no_answer"),  # a missing box
        ("countdown", "\\boxed{94*4 - 61 - 6}", "correct"),
        ("countdown", "\\boxed{(94 - 61) * 6 + 94 + 17}", "wrong"),  # 94 used twice, 17 not given
        ("countdown", "\\boxed{309}", "wrong"),  # the target itself
    ],
)
def test_grading_by_family(family, completion, status):
    entries = {
        "number_sorting": {
            "question": "Sort descending: 14.0, 52.2, 30.0",
            "answer": "['52.2', '30.0', '14.0']",
            "metadata": {"source_dataset": "number_sorting"},
        },
        "basic_arithmetic": {
            "question": "Calculate 5 - 3 - 6.",
            "answer": "-4",
            "metadata": {"source_dataset": "basic_arithmetic", "expression": "5 - 3 - 6"},
        },
        "countdown": {
            "question": "Calculate 309 using 6, 61, 94, 4.",
            "answer": "94*4 - 61 - 6",
            "metadata": {"source_dataset": "countdown", "numbers": [6, 61, 94, 4], "target": 309},
        },
    }
    v = RoutedVerifier().score(completion, problem_from_entry(entries[family]))
    assert v.status == status and v.reward == float(status == "correct"), v


def test_the_audit_refuses_every_hack_and_pays_every_notation(capsys):
    from rlvr.cli import main
    from rlvr.verifiers.reasoning_gym_audit import run_audit

    rows = run_audit(per_family=2)
    assert {r["family"] for r in rows} == set(GRADERS)
    assert all(r["ours"] == 0 for r in rows if r["kind"] == "hack")
    assert all(r["ours"] == 1 for r in rows if r["kind"] == "equivalence")
    # reasoning-gym's own scorer pays some of the same hacks (partial credit, the first number of a hedge)
    assert any(r["theirs"] > 0 for r in rows if r["kind"] == "hack")
    assert main(["audit", "--task", "reasoning_gym"]) == 0
    assert "| number_sorting | the list without quotes | yes | 3/3 | 0/3 (0.00) |" in capsys.readouterr().out


def test_verify_task_reads_the_generators_own_items(tmp_path):
    from rlvr.cli import main

    entry = {"question": "Calculate 5 - 3 - 6.", "answer": "-4", "metadata": {"source_dataset": "basic_arithmetic"}}
    rows = [{"completion": "\\boxed{-4}", "entry": entry}, {"completion": "\\boxed{-4} or \\boxed{7}", "entry": entry}]
    src, dst = tmp_path / "in.jsonl", tmp_path / "out.jsonl"
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert main(["verify", "--task", "reasoning_gym", "--input", str(src), "--output", str(dst), "--workers", "0"]) == 0
    got = [json.loads(x) for x in dst.read_text().splitlines()]
    assert [(g["status"], round(g["reward"], 6)) for g in got] == [("correct", 1.1), ("multiple_answers", 0.0)]


@pytest.mark.parametrize(
    "family", ["basic_arithmetic", "chain_sum", "products", "gcd", "lcm", "letter_counting", "count_bits"]
)
def test_one_shot_examples_show_their_steps_and_are_graded_correct(family):
    """A one-shot example that is only a box taught the policy to answer at once and then to guess; the worked
    examples show steps written from the item's own metadata, and our grader pays their answer."""
    from rlvr.tasks.reasoning_gym import _dataset, boxed_answer

    for entry in _dataset(family, 5, 7, {}):
        text = boxed_answer(family, entry)
        steps, box = text.rsplit("\n", 1)
        assert steps and box == "\\boxed{" + str(entry["answer"]) + "}"
        assert RoutedVerifier().score(text, problem_from_entry(entry)).status == "correct"


def test_the_preset_on_reasoning_gym_families_is_graded_by_rlvr_only():
    """rlvr run --preset reasoning-gym: every family has an rlvr grader (routed), its evaluation split is clean
    against its training split, and its out-of-domain set loads."""
    from rlvr.config import resolve
    from rlvr.evaluation.out_of_domain import check_sets
    from rlvr.tasks.hygiene import find_contamination
    from rlvr.training.step import check_components

    cfg = resolve("reasoning-gym")
    parts = check_components(cfg)
    check_sets(parts.cfg)
    assert set(cfg["task"]["settings"]["families"]) <= set(GRADERS)
    assert parts.resolved.reward.terms[0]["kind"] == "routed"
    assert find_contamination(parts.task.problems("train"), parts.task.problems("heldout")) == []
