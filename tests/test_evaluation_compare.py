"""The eval driver with a scripted policy and a small real reward; comparisons of planted models."""

import json
import re
from types import SimpleNamespace

import pytest

from rlvr.evaluation.compare import compare, compare_markdown, head_to_head, head_to_head_markdown, write_comparison
from rlvr.evaluation.driver import evaluate
from rlvr.evaluation.summary import summarize
from rlvr.tasks.base import Problem
from rlvr.verifiers.base import Verdict


class BoxedExact:
    """A tiny real reward: the last-seen \\boxed{...} must equal the gold exactly."""

    def __call__(self, completions, problems):
        verdicts = []
        for text, p in zip(completions, problems):
            found = set(re.findall(r"\\boxed\{([^{}]*)\}", text))
            if not found:
                verdicts.append(Verdict("no_answer", 0.0, None))
            elif len(found) > 1:
                verdicts.append(Verdict("multiple_answers", 0.0, None))
            else:
                (ans,) = found
                verdicts.append(
                    Verdict("correct" if ans.strip() == p.answer else "wrong", float(ans.strip() == p.answer), ans)
                )
        return SimpleNamespace(verdicts=verdicts, total=[v.reward for v in verdicts])


def make_problems(count=40):
    bands = ["easy", "hard"]
    return [
        Problem(id=f"p{i}", prompt=f"What is {i} + {i}?", answer=str(2 * i), band=bands[i % 2]) for i in range(count)
    ]


def scripted_policy(skill):
    """policy_generate whose sample j for problem i is right when j < skill(i, n); greedy is right when
    skill(i, 1) >= 1 (the call asks for n=1). Other samples are wrong, every fifth one has no box at all."""
    calls = []

    def generate(chats, n, temperature):
        calls.append((len(chats), n, temperature))
        out = []
        for chat in chats:
            i = int(re.search(r"What is (\d+)", chat[-1]["content"]).group(1))
            right = skill(i, n)
            if temperature == 0.0:
                out.append([f"\\boxed{{{2 * i}}}" if right >= 1 else f"\\boxed{{{2 * i + 1}}}"])
            else:
                out.append(
                    [
                        f"so \\boxed{{{2 * i}}}"
                        if j < right
                        else ("no idea" if j % 5 == 4 else f"\\boxed{{{2 * i + 1}}}")
                        for j in range(n)
                    ]
                )
        return out

    generate.calls = calls
    return generate


def test_evaluate_builds_records_and_hand_checked_summary():
    problems = make_problems(6)
    policy = scripted_policy(lambda i, n: n if i < 2 else (i % 3))  # p0, p1 all right; others i%3 of n
    records = evaluate(policy, BoxedExact(), problems, n=5, ks=[1, 5], temperature=0.7, batch_size=4)
    assert policy.calls == [(4, 5, 0.7), (2, 5, 0.7), (4, 1, 0.0), (2, 1, 0.0)]
    assert len(records) == 6 * 5 + 6
    assert [r.sample_idx for r in records[:5]] == [0, 1, 2, 3, 4]
    first = records[0]
    assert (first.problem_id, first.band, first.status, first.reward, first.extracted) == (
        "p0",
        "easy",
        "correct",
        1.0,
        "0",
    )
    s = summarize(records, ks=[5], n_boot=100)
    # Correct samples per problem: 5, 5, 2, 0, 1, 2 -> pass@1 = 15 / 30.
    assert s["overall"]["pass@k"]["1"]["value"] == pytest.approx(15 / 30)
    assert s["overall"]["pass@k"]["5"]["value"] == pytest.approx(5 / 6)
    assert s["overall"]["status"]["no_answer"] == pytest.approx(4 / 30)  # sample 4 of p2, p3, p4, p5
    # Greedy: skill(i, 1) is 1, 1, 2, 0, 1, 2 -> only p3 is wrong.
    assert s["overall"]["greedy"]["value"] == pytest.approx(5 / 6)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"n": 4, "ks": [8]}, "1..n=4"),
        ({"n": 0, "greedy": False}, "n must be"),
        ({"n": -1}, "n must be"),
    ],
)
def test_evaluate_fails_fast_on_bad_settings(kwargs, match):
    policy = scripted_policy(lambda i, n: 0)
    with pytest.raises(ValueError, match=match):
        evaluate(policy, BoxedExact(), make_problems(2), **kwargs)
    assert policy.calls == []


def test_evaluate_names_a_sampler_returning_the_wrong_shape():
    with pytest.raises(ValueError, match="returned"):
        evaluate(lambda chats, n, t: [["x"]] * len(chats), BoxedExact(), make_problems(2), n=2, greedy=False)


def run_model(skill, problems, n=4):
    return evaluate(scripted_policy(skill), BoxedExact(), problems, n=n, greedy=False)


def test_head_to_head_pairs_two_models_by_pass1_and_greedy():
    # sft: every problem 2 of 4 samples, greedy right on even problems; rlvr: 3 of 4, greedy right everywhere
    problems = make_problems(20)
    sft = evaluate(scripted_policy(lambda i, n: 2 if n > 1 else (i % 2 == 0)), BoxedExact(), problems, n=4)
    rlvr = evaluate(scripted_policy(lambda i, n: 3 if n > 1 else 1), BoxedExact(), problems, n=4)
    evals = {"start": run_model(lambda i, n: 0, problems), "sft": sft, "rlvr": rlvr}
    results = head_to_head(evals, "rlvr", "sft", seed=0)
    assert [(r["metric"], r["baseline"], r["models"]) for r in results] == [
        ("pass@1", "sft", ["sft", "rlvr"]),
        ("greedy", "sft", ["sft", "rlvr"]),
    ]
    sampled, greedy = (r["diffs"]["rlvr"] for r in results)
    assert sampled["all"]["diff"] == pytest.approx(3 / 4 - 2 / 4) and sampled["all"]["verdict"] == "better"
    # greedy: the same on the 10 even problems (the "easy" band), right against wrong on the 10 odd ones
    assert (greedy["easy"]["diff"], greedy["easy"]["verdict"]) == (0.0, "inside the noise")
    assert (greedy["hard"]["diff"], greedy["hard"]["verdict"]) == (1.0, "better")
    assert greedy["all"]["diff"] == pytest.approx(0.5)
    md = head_to_head_markdown(results)
    assert "| hard | greedy | 0.000 | 1.000 | +1.000 [+1.000, +1.000] | better |" in md
    assert "| all | pass@1 | 0.500 | 0.750 | +0.250 " in md
    # without greedy decodes on one side, pass@1 alone
    assert [
        r["metric"] for r in head_to_head({**evals, "sft": run_model(lambda i, n: 2, problems)}, "rlvr", "sft")
    ] == ["pass@1"]


def test_compare_identical_and_planted_gain():
    problems = make_problems(60)
    base_skill = lambda i, n: 1 if i % 4 == 0 else 0  # noqa: E731  one in four problems, 1 of 4 samples
    strong_skill = lambda i, n: 4 if i % 4 != 3 else 0  # noqa: E731  three in four problems, always
    evals = {
        "base": run_model(base_skill, problems),
        "same": run_model(base_skill, problems),
        "rlvr": run_model(strong_skill, problems),
    }
    result = compare(evals, baseline="base", n_boot=500)
    assert result["bands"] == ["easy", "hard", "all"]
    assert result["accuracy"]["base"]["all"]["value"] == pytest.approx(15 * 0.25 / 60)
    assert result["accuracy"]["rlvr"]["all"]["value"] == pytest.approx(45 / 60)
    for band in result["bands"]:
        assert result["diffs"]["same"][band] == {
            "diff": 0.0,
            "lo": 0.0,
            "hi": 0.0,
            "verdict": "inside the noise",
            "n_problems": 60 if band == "all" else 30,
        }
        assert result["diffs"]["rlvr"][band]["verdict"] == "better"
    assert "base" not in result["diffs"]
    md = compare_markdown(result)
    assert "| all | rlvr | +0.688 [" in md and "| better |" in md


def test_compare_refuses_unmatched_evaluations():
    problems = make_problems(10)
    base = run_model(lambda i, n: 1, problems)
    with pytest.raises(ValueError, match="same problems"):
        compare({"base": base, "other": run_model(lambda i, n: 1, problems[:8])}, baseline="base")
    with pytest.raises(ValueError, match="samples per problem"):
        compare({"base": base, "other": run_model(lambda i, n: 1, problems, n=6)}, baseline="base")
    with pytest.raises(ValueError, match="baseline"):
        compare({"base": base}, baseline="sft")


def test_write_comparison_files(tmp_path):
    problems = make_problems(12)
    result = compare(
        {"base": run_model(lambda i, n: 1, problems), "rlvr": run_model(lambda i, n: 3, problems)},
        baseline="base",
        n_boot=100,
    )
    paths = write_comparison(result, tmp_path / "run")
    assert json.loads(paths["json"].read_text())["diffs"]["rlvr"]["all"]["diff"] == pytest.approx(0.5)
    assert paths["md"].read_text() == compare_markdown(result)
    png = paths["png"].read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n" and len(png) > 5000
    assert sorted(p.name for p in (tmp_path / "run").iterdir()) == ["compare.json", "compare.md", "compare.png"]


def test_compare_verb_on_records_files(tmp_path, capsys):
    import argparse

    from rlvr.cli.compare import add_parser, run
    from rlvr.evaluation.records import write_records

    problems = make_problems(20)
    write_records(run_model(lambda i, n: 1, problems), tmp_path / "base.jsonl")
    write_records(run_model(lambda i, n: 4, problems), tmp_path / "rlvr.jsonl")
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="verb"))
    args = parser.parse_args(
        [
            "compare",
            f"base={tmp_path / 'base.jsonl'}",
            f"rlvr={tmp_path / 'rlvr.jsonl'}",
            "--out",
            str(tmp_path / "out"),
            "--n-boot",
            "100",
        ]
    )
    assert run(args) == 0
    assert "| all | rlvr | +0.750 [+0.750, +0.750] | better |" in capsys.readouterr().out
    assert (tmp_path / "out" / "compare.png").is_file()
    bad = parser.parse_args(["compare", f"base={tmp_path / 'base.jsonl'}", "rlvr"])
    assert run(bad) == 2
    assert "NAME=RECORDS" in capsys.readouterr().err
