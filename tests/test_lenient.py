"""Strict and lenient side by side: the last answer found whatever the format, graded by the task's own reward;
the strict gain split into format learned and answers learned, on hand-built records."""

import pytest

from rlvr.config import RewardConfig
from rlvr.evaluation.compare import compare, compare_markdown
from rlvr.evaluation.lenient import gain_split, in_answer_format, lenient_statuses, per_problem_rates
from rlvr.evaluation.records import EvalRecord
from rlvr.evaluation.summary import summarize, summary_markdown
from rlvr.tasks.base import Problem
from rlvr.verifiers.extract import last_answer


@pytest.mark.parametrize(
    "text, expected",
    [
        ("The answer is 42.", "42"),
        ("so 10-3=7", "7"),
        ("x = -3", "-3"),
        ("total 1,234 apples", "1234"),
        ("\\boxed{\\frac{1}{2}} done", "\\frac{1}{2}"),
        ("3 or 5", "5"),
        ("$x^2$ is it", "x^2"),
        ("<answer>12</answer>", "12"),
        ("\\boxed{12} since 3*4", "4"),
        ("no number here", None),
        ("", None),
    ],
)
def test_last_answer(text, expected):
    assert last_answer(text) == expected


def test_in_answer_format():
    assert in_answer_format("7", "boxed") == "\\boxed{7}" and in_answer_format("7", "tags") == "<answer>7</answer>"


def test_lenient_statuses_with_the_task_reward():
    """The arithmetic task's own grader (math in the number form, boxed): strict needs the box, lenient does not; a
    hedge offers its last answer only; a problem without an answer is not scored."""
    from rlvr.tasks import load_task
    from rlvr.verifiers.compose import task_reward

    task = load_task("arithmetic", per_band=5)
    _, reward = task_reward(RewardConfig(workers=0, timeout_s=5.0), task)
    gold = Problem(id="g", prompt="?", answer="12", band="b")
    code = Problem(id="c", prompt="?", answer=None, band="b", tests="assert True")
    texts = [
        "\\boxed{12}",
        "The answer is 12.",
        "I think 12 or 13",
        "no idea",
        "it is 8 + 4 = 12, so \\boxed{11}",
        "anything",
    ]
    problems = [gold] * 5 + [code]
    strict = [v.status for v in reward(texts[:5], problems[:5]).verdicts] + ["error"]
    assert strict == ["correct", "no_answer", "no_answer", "no_answer", "wrong", "error"]
    assert lenient_statuses(reward, texts, problems, strict) == [
        "correct",
        "correct",
        "wrong",
        "no_answer",
        "wrong",
        None,
    ]


def rec(pid, band, idx, status, lenient):
    return EvalRecord(
        problem_id=pid,
        band=band,
        sample_idx=idx,
        status=status,
        reward=float(status == "correct"),
        extracted=None,
        completion="",
        lenient=lenient,
    )


# (strict, lenient) per sample, two samples per problem; p1, p2 in band A, p3, p4 in band B
START = {
    "p1": [("wrong", "correct"), ("wrong", "correct")],
    "p2": [("wrong", "wrong"), ("no_answer", "no_answer")],
    "p3": [("correct", "correct"), ("wrong", "correct")],
    "p4": [("no_answer", "wrong"), ("wrong", "wrong")],
}
RLVR = {
    "p1": [("correct", "correct"), ("correct", "correct")],
    "p2": [("correct", "correct"), ("wrong", "wrong")],
    "p3": [("correct", "correct"), ("correct", "correct")],
    "p4": [("wrong", "wrong"), ("wrong", "wrong")],
}


def records(table):
    return [
        rec(pid, "A" if pid in ("p1", "p2") else "B", i, s, le)
        for pid, samples in table.items()
        for i, (s, le) in enumerate(samples)
    ]


def test_per_problem_rates_by_hand():
    rates = per_problem_rates(records(START))
    assert rates == {
        "p1": ("A", 0.0, 1.0, 1.0),
        "p2": ("A", 0.0, 0.0, 0.0),
        "p3": ("B", 0.5, 1.0, 0.5),
        "p4": ("B", 0.0, 0.0, 0.0),
    }


def test_the_split_adds_up_to_the_strict_gain():
    """Band A: format-only share 0.5 -> 0 (format +0.5), lenient 0.5 -> 0.75 (answers +0.25), strict 0 -> 0.75.
    Band B: format 0.25 -> 0 (+0.25), lenient 0.5 -> 0.5 (answers 0), strict 0.25 -> 0.5. All: +0.375, +0.125."""
    split = gain_split({"start": records(START), "rlvr": records(RLVR)}, baseline="start", seed=0)
    expected = {"A": (0.5, 0.25), "B": (0.25, 0.0), "all": (0.375, 0.125)}
    result = compare({"start": records(START), "rlvr": records(RLVR)}, baseline="start")
    for band, (fmt, ans) in expected.items():
        got = split["rlvr"][band]
        assert got["format"]["diff"] == pytest.approx(fmt) and got["answers"]["diff"] == pytest.approx(ans)
        assert got["format"]["lo"] <= fmt <= got["format"]["hi"]
        assert result["diffs"]["rlvr"][band]["diff"] == pytest.approx(fmt + ans)
    assert result["split"] == split
    md = compare_markdown(result)
    assert "| all | rlvr | +0.375 [" in md and "format learned [CI] | answers learned [CI]" in md


def test_no_split_without_lenient_statuses_and_the_summary_column():
    old = [EvalRecord(**{**r.to_dict(), "lenient": None}) for r in records(START)]
    assert gain_split({"start": old, "rlvr": records(RLVR)}, baseline="start") is None
    assert compare({"start": old, "rlvr": records(RLVR)}, baseline="start")["split"] is None
    summary = summarize(records(START), ks=(1,), seed=0)
    assert summary["bands"]["A"]["lenient"]["value"] == 0.5 and summary["bands"]["B"]["lenient"]["value"] == 0.5
    assert summary["bands"]["A"]["pass@k"]["1"]["value"] == 0.0
    assert "lenient pass@1" in summary_markdown(summary)
    assert summarize(old, ks=(1,))["overall"]["lenient"] is None and "lenient" not in summary_markdown(summarize(old))


def test_a_bad_lenient_status_is_refused():
    with pytest.raises(ValueError, match="unknown lenient status 'maybe'"):
        rec("p", "A", 0, "wrong", "maybe")
