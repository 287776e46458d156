"""Coverage side by side (rlvr.evaluation.coverage): pass@k at each k, paired against the baseline, by hand."""

import pytest

from rlvr.evaluation.compare import compare, compare_markdown
from rlvr.evaluation.coverage import as_summaries, coverage
from rlvr.evaluation.records import EvalRecord


def records(hits: dict[str, list[bool]]) -> list[EvalRecord]:
    return [
        EvalRecord(pid, "b", j, "correct" if ok else "wrong", float(ok), None, "")
        for pid, row in hits.items()
        for j, ok in enumerate(row)
    ]


T, F = True, False
# the start model samples p1 and p2 right once in 4; the trained one always, and still never p3: it sharpened what the
# start model could already reach, so pass@1 rises and pass@4 does not
START = records({"p1": [T, F, F, F], "p2": [F, T, F, F], "p3": [F, F, F, F]})
SHARP = records({"p1": [T, T, T, T], "p2": [T, T, T, T], "p3": [F, F, F, F]})


def test_pass_at_k_at_every_k_paired_against_the_baseline():
    cov = coverage({"start": START, "rlvr": SHARP}, "start", n_boot=500)
    assert cov["ks"] == [1, 2, 4]
    # start, per problem: pass@1 1/4, 1/4, 0; pass@2 = 1 - C(3,2)/C(4,2) = 1/2, 1/2, 0; pass@4 1, 1, 0
    assert [cov["accuracy"]["start"][k]["value"] for k in (1, 2, 4)] == pytest.approx([1 / 6, 1 / 3, 2 / 3])
    assert [cov["accuracy"]["rlvr"][k]["value"] for k in (1, 2, 4)] == pytest.approx([2 / 3, 2 / 3, 2 / 3])
    d = cov["diffs"]["rlvr"]
    assert [d[k]["diff"] for k in (1, 2, 4)] == pytest.approx([0.5, 1 / 3, 0.0])
    # per-problem differences at k = 4 are all 0: an interval of [0, 0], no gain
    assert (d[4]["lo"], d[4]["hi"], d[4]["verdict"]) == (0.0, 0.0, "inside the noise")
    assert "rlvr" not in cov["diffs"]["rlvr"] and "start" not in cov["diffs"]
    assert as_summaries(cov)["rlvr"]["overall"]["pass@k"][4]["value"] == pytest.approx(2 / 3)


def test_compare_carries_the_coverage_table_and_one_sample_has_none():
    result = compare({"start": START, "rlvr": SHARP}, "start", n_boot=200)
    md = compare_markdown(result)
    assert "Coverage: pass@k" in md and "| 4 | 0.667" in md and "+0.000 [+0.000, +0.000] inside the noise" in md
    one = {pid: row[:1] for pid, row in {"p1": [T], "p2": [F], "p3": [F]}.items()}
    assert coverage({"start": records(one), "rlvr": records(one)}, "start") is None
    assert compare({"start": records(one), "rlvr": records(one)}, "start", n_boot=50)["coverage"] is None


def test_rlvr_compare_writes_the_coverage_plot(tmp_path, capsys):
    from rlvr.cli import main
    from rlvr.evaluation.records import write_records

    write_records(START, tmp_path / "start.jsonl")
    write_records(SHARP, tmp_path / "rlvr.jsonl")
    args = ["compare", f"start={tmp_path / 'start.jsonl'}", f"rlvr={tmp_path / 'rlvr.jsonl'}", "--n-boot", "100"]
    assert main([*args, "--out", str(tmp_path / "cmp")]) == 0
    assert (tmp_path / "cmp" / "coverage.png").stat().st_size > 1000
    assert "| 2 | 0.333" in (tmp_path / "cmp" / "compare.md").read_text()


def banded(hits: dict[str, tuple[str, list[bool]]]) -> list[EvalRecord]:
    return [
        EvalRecord(pid, band, j, "correct" if ok else "wrong", float(ok), None, "")
        for pid, (band, row) in hits.items()
        for j, ok in enumerate(row)
    ]


def test_per_band_coverage_shows_bands_that_cancel_overall():
    # band "easy": the start reaches both problems in 2 tries, the trained model only one of them (it narrowed);
    # band "hard": the start reaches neither, the trained model one of them (it widened). Overall pass@2 is level.
    start = banded({"e1": ("easy", [T, F]), "e2": ("easy", [F, T]), "h1": ("hard", [F, F]), "h2": ("hard", [F, F])})
    rlvr = banded({"e1": ("easy", [T, T]), "e2": ("easy", [F, F]), "h1": ("hard", [T, F]), "h2": ("hard", [F, F])})
    cov = coverage({"start": start, "rlvr": rlvr}, "start", n_boot=300)
    assert cov["diffs"]["rlvr"][2]["diff"] == pytest.approx(0.0)  # 2/4 reached by each model
    easy, hard = cov["bands"]["easy"]["rlvr"], cov["bands"]["hard"]["rlvr"]
    # easy: pass@1 per problem start 1/2, 1/2 -> rlvr 1, 0 (level); pass@2 start 1, 1 -> rlvr 1, 0 (-1/2)
    assert (easy[1]["diff"], easy[2]["diff"]) == pytest.approx((0.0, -0.5))
    # hard: pass@1 0, 0 -> 1/2, 0 (+1/4); pass@2 0, 0 -> 1, 0 (+1/2)
    assert (hard[1]["diff"], hard[2]["diff"]) == pytest.approx((0.25, 0.5))
    assert set(cov["bands"]) == {"easy", "hard"} and set(easy) == {1, 2}
    md = compare_markdown(compare({"start": start, "rlvr": rlvr}, "start", n_boot=300))
    assert "| easy | rlvr | +0.000 [" in md and "| hard | rlvr | +0.250 [" in md
    assert "Per band, each model minus start at k = 1 and k = 2" in md
    # one band only: the overall table already is the band's, no second table
    assert coverage({"start": START, "rlvr": SHARP}, "start", n_boot=50)["bands"] == {}
