"""Per-band summary figures against hand-computed values; records round-trip through JSON lines."""

import json

import pytest

from rlvr.evaluation.records import EvalRecord, by_problem, read_records, write_records
from rlvr.evaluation.summary import per_problem_values, summarize, summary_markdown, write_summary

C, W, N = "correct", "wrong", "no_answer"


def recs(pid, band, statuses, mode="sampled"):
    return [EvalRecord(pid, band, j, s, float(s == C), None, f"text {pid} {j}", mode) for j, s in enumerate(statuses)]


RECORDS = (
    recs("e1", "easy", [C, C, C, W])
    + recs("e2", "easy", [C, N, W, W])
    + recs("h1", "hard", [N, N, W, W])
    + recs("e1", "easy", [C], "greedy")
    + recs("e2", "easy", [W], "greedy")
    + recs("h1", "hard", [N], "greedy")
)


def test_summary_hand_values():
    s = summarize(RECORDS, ks=[2], n_boot=200)
    assert s["ks"] == [1, 2]
    easy, hard, overall = s["bands"]["easy"], s["bands"]["hard"], s["overall"]
    assert list(s["bands"]) == ["easy", "hard"]
    assert (easy["n_problems"], easy["samples_per_problem"], overall["n_problems"]) == (2, 4, 3)
    # pass@1: e1 3/4, e2 1/4, h1 0.
    assert easy["pass@k"]["1"]["value"] == pytest.approx(0.5)
    assert hard["pass@k"]["1"] == {"value": 0.0, "lo": 0.0, "hi": 0.0}
    assert overall["pass@k"]["1"]["value"] == pytest.approx(1 / 3)
    # pass@2: e1 1 (one wrong cannot fill a pair), e2 1 - C(3,2)/C(4,2) = 0.5, h1 0.
    assert easy["pass@k"]["2"]["value"] == pytest.approx(0.75)
    assert overall["pass@k"]["2"]["value"] == pytest.approx(0.5)
    assert overall["greedy"]["value"] == pytest.approx(1 / 3) and easy["greedy"]["value"] == 0.5
    # Statuses apart: a parse failure is not a wrong answer.
    assert overall["status"][C] == pytest.approx(4 / 12)
    assert overall["status"][W] == pytest.approx(5 / 12)
    assert overall["status"][N] == pytest.approx(3 / 12)
    assert overall["status"]["timeout"] == 0.0
    assert overall["greedy_status"][N] == pytest.approx(1 / 3)
    for block in (easy, hard, overall):
        for cell in [*block["pass@k"].values(), block["greedy"]]:
            assert cell["lo"] <= cell["value"] <= cell["hi"]


def test_summary_refuses_k_beyond_samples_and_empty_input():
    with pytest.raises(ValueError, match="pass@8"):
        summarize(RECORDS, ks=[8])
    with pytest.raises(ValueError):
        summarize([])


def test_greedy_only_records_summarise_without_pass_at_k():
    s = summarize([r for r in RECORDS if r.mode == "greedy"], n_boot=50)
    assert s["overall"]["pass@k"] == {} and s["overall"]["status"] is None
    assert s["overall"]["greedy"]["value"] == pytest.approx(1 / 3)


def test_per_problem_values_and_mixups():
    assert per_problem_values(RECORDS, "pass@1") == {"e1": ("easy", 0.75), "e2": ("easy", 0.25), "h1": ("hard", 0.0)}
    assert per_problem_values(RECORDS, "greedy")["e1"] == ("easy", 1.0)
    with pytest.raises(ValueError, match="twice"):
        by_problem(RECORDS + recs("e1", "easy", [C]))
    with pytest.raises(ValueError, match="bands"):
        by_problem(RECORDS + [EvalRecord("e1", "hard", 9, C, 1.0, None, "")])
    with pytest.raises(ValueError):
        per_problem_values(RECORDS, "accuracy")


def test_markdown_and_files(tmp_path):
    s = summarize(RECORDS, ks=[2], n_boot=100, label="held-out")
    md = summary_markdown(s)
    assert md.startswith("### held-out")
    assert "| easy | 2 | 4 | 0.500 [" in md and "| **all** | 3 | 4 | 0.333 [" in md
    assert "no_answer" in md
    j, m = write_summary(s, tmp_path / "eval", "heldout")
    assert json.loads(j.read_text()) == json.loads(json.dumps(s))
    assert m.read_text() == md


def test_records_round_trip_and_bad_line(tmp_path):
    path = write_records(RECORDS, tmp_path / "records.jsonl")
    assert read_records(path) == RECORDS
    path.write_text(path.read_text() + '{"problem_id": "x"}\n')
    with pytest.raises(ValueError, match=r"records.jsonl: line 16"):
        read_records(path)


def test_record_rejects_unknown_status_and_mode():
    with pytest.raises(ValueError):
        EvalRecord("p", "b", 0, "almost", 0.0, None, "")
    with pytest.raises(ValueError):
        EvalRecord("p", "b", 0, C, 1.0, None, "", mode="beam")
